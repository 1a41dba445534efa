package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
)

// artLoaded is what DuckDB's ART indexes of the live generation take now.
func artLoaded(t *testing.T, ix *Index) int64 {
	t.Helper()
	var a int64
	if err := ix.cur.Load().db.QueryRow(`SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT FROM duckdb_memory() WHERE tag = 'ART_INDEX'`).Scan(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

// buildForReopen ingests 8,000 small documents in four batches into a new
// index in dir and closes it; it returns the ART indexes' size before
// Close (all of them loaded: the build wrote them).
func buildForReopen(t *testing.T, dir string) int64 {
	t.Helper()
	ctx := context.Background()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + dir + "/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	for b := range 4 {
		ins := make([]Input, 2000)
		for i := range ins {
			ins[i] = Input{Source: fmt.Sprintf("mem://doc-%d-%d", b, i), MediaType: "text/plain",
				Data: []byte(fmt.Sprintf("passage %d of batch %d about %s", i, b, strings.Repeat(fmt.Sprintf("w%d ", i*7+b), 3)))}
		}
		if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.WaitForMerges(ctx); err != nil {
		t.Fatal(err)
	}
	art := artLoaded(t, ix)
	// Folded into the file: replayed from the log, the rows would sit in
	// memory from the open on.
	foldOnClose(t)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	return art
}

// foldOnClose makes every Close fold the write-ahead log into the file
// (closeCheckpointBytes 0) until the test ends.
func foldOnClose(t *testing.T) {
	saved := closeCheckpointBytes
	closeCheckpointBytes = 0
	t.Cleanup(func() { closeCheckpointBytes = saved })
}

// scaleMemory sets the automatic limit's floor and headroom for a test,
// restored at its end.
func scaleMemory(t *testing.T, floor, headroom, step int64) {
	saved := [3]int64{autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep}
	t.Cleanup(func() { autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep = saved[0], saved[1], saved[2] })
	autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep = floor, headroom, step
}

// Review 7's H1, scaled: DuckDB loads ART indexes lazily, so right after
// an open it shows next to none of them, and a limit fitted to what it
// shows left the first searches, deletes and writes out of memory, every
// time. 8k documents hold about 5 MB of ART; reopened with a floor of 4
// MiB and a headroom of 3 MiB (the ratio of 1M passages' 140 MB to a 96
// MiB floor), the open fits the limit to the indexes as stored, and
// searches, deletes and an ingest all succeed, leaving no rows without
// records.
func TestReopenFitsStoredIndexes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	built := buildForReopen(t, dir)
	scaleMemory(t, 4<<20, 6<<20, 1<<20)
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + dir + "/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	if loaded, limit := artLoaded(t, ix), s.memLimit.Load(); limit < built*3/4+autoMemoryHeadroom {
		t.Fatalf("after open: limit %d MiB (ART loaded %d KiB); the indexes as stored (%d KiB when built) plus the headroom do not fit", limit>>20, loaded>>10, built>>10)
	}
	for _, q := range []string{"passage", "w7", "batch about"} {
		if hits, err := ix.Search(ctx, q, nil); err != nil || len(hits) == 0 {
			t.Fatalf("search %q: %d hits, %v", q, len(hits), err)
		}
	}
	for k := range 5 {
		if _, err := ix.Delete(ctx, fmt.Sprintf("mem://doc-1-%d", k)); err != nil {
			t.Fatalf("delete %d: %v", k, err)
		}
	}
	if _, _, err := ix.IngestBatch(ctx, []Input{{Source: "mem://new", MediaType: "text/plain", Data: []byte("new passage")}}); err != nil {
		t.Fatal("ingest:", err)
	}
	// Verify at the usual floor and headroom: its reads have fixed costs
	// (DuckDB's 256 KiB buffers per column) that a 3 MiB headroom does
	// not scale down to; what it checks here is that nothing above left
	// rows without records.
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	scaleMemory(t, 96<<20, 88<<20, 16<<20)
	if ix, err = Open(ctx, dir, &Options{BlobURL: "file://" + dir + "/blobs"}); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	v, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.RowsWithoutRecords) > 0 || len(v.RecordsWithoutRows) > 0 {
		t.Fatalf("verify: rows without records %v, records without rows %v", v.RowsWithoutRecords, v.RecordsWithoutRows)
	}
}

// A search, a delete, an ingest and a verify that DuckDB fails for memory under the
// automatic limit raise it and run once more: with the limit forced far
// below what they need, each succeeds and the limit has risen; under a
// fixed Options.MemoryLimit the error stays.
func TestOutOfMemoryRaisesAndRetries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	buildForReopen(t, dir)
	scaleMemory(t, 4<<20, 24<<20, 1<<20)
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + dir + "/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	var starved int64
	starve := func() { // the limit just above what the pool holds
		t.Helper()
		s.memMu.Lock()
		defer s.memMu.Unlock()
		var used int64
		if err := s.db.QueryRow(`SELECT sum(memory_usage_bytes)::BIGINT FROM duckdb_memory()`).Scan(&used); err != nil {
			t.Fatal(err)
		}
		starved = (used>>18 + 2) << 18
		if _, err := s.db.Exec(fmt.Sprintf(`SET memory_limit = '%dKiB'`, starved>>10)); err != nil {
			t.Fatal(err)
		}
		s.memLimit.Store(starved)
	}
	starve()
	if hits, err := ix.Search(ctx, "passage", nil); err != nil || len(hits) == 0 {
		t.Fatalf("search: %d hits, %v", len(hits), err)
	}
	if s.memLimit.Load() <= starved {
		t.Fatalf("search: limit %d not raised", s.memLimit.Load())
	}
	starve()
	if _, err := ix.Delete(ctx, "mem://doc-2-5"); err != nil {
		t.Fatal("delete:", err)
	}
	if s.memLimit.Load() <= starved {
		t.Fatalf("delete: limit %d not raised", s.memLimit.Load())
	}
	starve()
	if _, _, err := ix.IngestBatch(ctx, []Input{{Source: "mem://new", MediaType: "text/plain", Data: []byte("new passage")}}); err != nil {
		t.Fatal("ingest:", err)
	}
	if s.memLimit.Load() <= starved {
		t.Fatalf("ingest: limit %d not raised", s.memLimit.Load())
	}
	// Every verify, not only Index.Verify's: a replica's digest of its
	// rows, a snapshot's for publish and a rollback's (review 8 L2).
	// One sorted query a table (the reads before eachInDocOrder): the
	// reads' pieces alone, and eachInDocOrder's unsorted chunks, fit the
	// starved pool.
	starve()
	saved := readChunkBytes
	readChunkBytes, docOrderRanged = 1<<40, true
	_, err = s.digestOnly(ctx)
	readChunkBytes, docOrderRanged = saved, false
	if err != nil {
		t.Fatal("a replica's digest:", err)
	}
	if s.memLimit.Load() <= starved {
		t.Fatalf("a replica's digest: limit %d not raised", s.memLimit.Load())
	}
	// Index.Verify reads outside writeMu (verifyAt), where a retry would
	// read other rows: out of memory there, it verifies again with writes
	// held back (verifyHeld), after the limit was raised.
	starve()
	readChunkBytes, docOrderRanged = 1<<40, true
	v, err := ix.Verify(ctx, nil)
	readChunkBytes, docOrderRanged = saved, false
	if err != nil || len(v.RowsWithoutRecords) > 0 || len(v.RecordsWithoutRows) > 0 {
		t.Fatalf("verify: %v, %+v", err, v)
	}
	if s.memLimit.Load() <= starved {
		t.Fatalf("verify: limit %d not raised", s.memLimit.Load())
	}
	ix.Close()

	ix, err = Open(ctx, dir, &Options{BlobURL: "file://" + dir + "/blobs", MemoryLimit: "64MB"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s = ix.cur.Load()
	starve()
	if _, err := ix.Search(ctx, "passage", nil); err == nil || !isOutOfMemory(err) {
		t.Fatalf("search under a fixed MemoryLimit, starved: %v, want DuckDB's out of memory", err)
	}
	if s.memLimit.Load() != starved {
		t.Fatalf("a fixed MemoryLimit moved to %d", s.memLimit.Load())
	}
}

// An out-of-memory error after a write committed is never tried again
// (the write would be repeated); one before is, and what is logged of it
// is DuckDB's message, not the wrapping text (a query, a source).
func TestOutOfMemoryAfterCommitNotRetried(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	oom := fmt.Errorf(`search "secret query": %w`, &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: failed to pin block of size 256.0 KiB (1.0 MiB/1.0 MiB used)"})
	if s.outOfMemory(ctx, "test", afterCommit(fmt.Errorf("ingest: committed, then: %w", oom))) {
		t.Error("an error after a commit was to be tried again")
	}
	if !Committed(fmt.Errorf("wrapped: %w", afterCommit(oom))) || Committed(oom) || Committed(nil) {
		t.Error("Committed does not tell an error after a commit from one before")
	}
	if s.outOfMemory(ctx, "test", errors.New("some other error")) {
		t.Error("an error other than out of memory was to be tried again")
	}
	if !s.outOfMemory(ctx, "test", oom) {
		t.Error("an out-of-memory error before any commit was not to be tried again")
	}
	if s.outOfMemory(ctx, "test", errors.New("ingest: FATAL Error: Failed to rollback transaction. Cannot continue operation.\nOriginal Error: Out of Memory Error: failed to pin block of size 256.0 KiB (14.8 MiB/15.0 MiB used)")) {
		t.Error("a FATAL error (an invalidated database) was to be tried again")
	}
	if m := duckMessage(oom); strings.Contains(m, "secret") || !strings.HasPrefix(m, "Out of Memory Error") {
		t.Errorf("logged %q", m)
	}
	if m := duckMessage(errors.New(`ingest "/secret/a.md": could not close appender: Failed to append: could not allocate block of size 256.0 KiB (5.8 MiB/6.0 MiB used)`)); strings.Contains(m, "secret") {
		t.Errorf("logged %q", m)
	}
	// What a wrapping error appends after DuckDB's message is not logged
	// (review 8, L4).
	for _, e := range []string{
		`delete: could not allocate block of size 256.0 KiB (5.8 MiB/6.0 MiB used); and the records could not be put back: record of "/secret/b.md"`,
		"merge: Out of Memory Error: failed to pin block\nrecord of /secret/c.md",
	} {
		if m := duckMessage(errors.New(e)); strings.Contains(m, "secret") || m == "" {
			t.Errorf("logged %q", m)
		}
	}
}

// A purge's rewrite right after a reopen (as `escurel purge` always is)
// fits the limit to twice the ART indexes as stored, not to the few an
// open and some searches and deletes loaded: at these scaled limits the
// rewrite failed out of memory at the open's fit (review 8, H1), which
// left the purged documents' text in the old generation.
func TestPurgeAfterReopenFitsStoredIndexes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	buildForReopen(t, dir)
	scaleMemory(t, 4<<20, 6<<20, 1<<20)
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + dir + "/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, q := range []string{"passage", "w7", "batch about"} {
		if _, err := ix.Search(ctx, q, nil); err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
	}
	for k := range 5 {
		if _, err := ix.Delete(ctx, fmt.Sprintf("mem://doc-1-%d", k)); err != nil {
			t.Fatalf("delete %d: %v", k, err)
		}
	}
	gen := ix.Generation()
	res, err := ix.Purge(ctx, "mem://doc-2-1")
	if err != nil {
		t.Fatalf("purge after a reopen: %v", err)
	}
	if res.Generation == "" || res.Generation == gen || ix.Generation() != res.Generation {
		t.Errorf("purge wrote no new live generation: %+v, live %s (was %s)", res, ix.Generation(), gen)
	}
}
