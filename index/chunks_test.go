package index

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
)

// idRanges partitions every string in order: each id falls in exactly one
// range, and the ranges follow each other.
func TestIDRanges(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	db := ix.cur.Load().db
	saved := readChunkBytes
	defer func() { readChunkBytes = saved }()
	readChunkBytes = 10
	for _, c := range []struct {
		size int64
		n    int
	}{{0, 1}, {10, 1}, {11, 2}, {95, 10}, {1 << 40, maxIDRanges}} {
		rs, err := idRanges(ctx, db, fmt.Sprintf(`SELECT %d::BIGINT`, c.size), readChunkBytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != c.n || rs[0].lo != "" || rs[len(rs)-1].hi != "" {
			t.Fatalf("size %d: %d ranges, first %+v, last %+v; want %d, open at both ends", c.size, len(rs), rs[0], rs[len(rs)-1], c.n)
		}
		ids := []string{"", "0", "00000000", "0000000000000000000000000000000", "7fffffff", "80000000", "ffffffff", "fffffffff", "g", "zz", "\u00e9"}
		for range 200 {
			ids = append(ids, fmt.Sprintf("%032x", rand.Uint64()))
		}
		for _, id := range ids {
			in := 0
			for i, r := range rs {
				if (r.lo == "" || id >= r.lo) && (r.hi == "" || id < r.hi) {
					in++
				}
				if i > 0 && (r.lo != rs[i-1].hi || r.lo <= rs[i-1].lo) {
					t.Fatalf("ranges %d and %d do not follow each other: %+v %+v", i-1, i, rs[i-1], r)
				}
			}
			if in != 1 {
				t.Errorf("size %d: id %q in %d ranges", c.size, id, in)
			}
		}
	}
}

// Verify reads each table in bounded chunks (eachInDocOrder): at a
// memory_limit below the blocks' text, where one sorted read of them fails
// (DuckDB out of memory), it passes, with the digest of a verify at the
// default limit.
// Without vectors: their pass (1.5 KiB a row at 384 dimensions) needs
// more than this tiny limit; it passed at 100k passages at 128 MiB.
func TestVerifyBoundedMemory(t *testing.T) {
	ctx := context.Background()
	saved := [4]int64{autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep, readChunkBytes}
	defer func() {
		autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep, readChunkBytes = saved[0], saved[1], saved[2], saved[3]
	}()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + t.TempDir(), Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("w%xabcdefghijklmnopqrstuvwxyz", r.IntN(5000)) }
	var ins []Input
	for i := range 320 {
		var b strings.Builder
		for p := range 100 {
			for range 30 {
				b.WriteString(word() + " ")
			}
			fmt.Fprintf(&b, "end of passage %d.\n\n", p)
		}
		ins = append(ins, Input{Source: fmt.Sprintf("mem://doc-%d.txt", i), MediaType: "text/plain", Data: []byte(b.String())})
	}
	if _, errs, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
	want, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !want.OK() {
		t.Fatalf("verify at the default limit: %+v", want)
	}
	walk := func() ([]string, error) {
		var ids []string
		err := ix.ForEachBlock(ctx, Restricted, func(h Hit) error {
			ids = append(ids, h.DocID+" "+h.BlockID)
			return nil
		})
		return ids, err
	}
	exported := t.TempDir()
	if _, err := ix.Export(ctx, exported, &ExportOptions{Clearance: Restricted}); err != nil {
		t.Fatal(err)
	}
	// Export in ranges writes the same files (at the default limit: a
	// Parquet writer needs more than the tiny one below).
	chunked := t.TempDir()
	readChunkBytes = 1 << 20
	_, err = ix.Export(ctx, chunked, &ExportOptions{Clearance: Restricted})
	readChunkBytes = saved[3]
	if err != nil {
		t.Fatalf("export in ranges: %v", err)
	}
	wantIDs, err := walk()
	if err != nil || int64(len(wantIDs)) != want.Blocks {
		t.Fatalf("ForEachBlock at the default limit: %d blocks, %v; want %d", len(wantIDs), err, want.Blocks)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	var text int64
	autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep = 1<<20, 20<<20, 1<<20
	ix, err = Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	if err := s.db.QueryRow(`SELECT sum(strlen(body) + strlen(window_text))::BIGINT FROM blocks`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if limit := s.memLimit.Load(); text < limit {
		t.Fatalf("blocks' text %d bytes, memory_limit %d: the test needs the text well past the limit", text, limit)
	}
	// One sorted query a table (the reads before eachInDocOrder, in one
	// range) fails here.
	readChunkBytes, docOrderRanged = 1<<40, true
	_, err = s.verifyRows(ctx, nil) // verifyRows: not tried again at a raised limit
	docOrderRanged = false
	if err == nil || !strings.Contains(err.Error(), "Out of Memory") {
		t.Errorf("verify in one query a table at memory_limit %d MiB (blocks' text %d MiB): %v; want DuckDB out of memory (else this test proves nothing)", s.memLimit.Load()>>20, text>>20, err)
	}
	readChunkBytes = 1 << 20
	got, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatalf("verify in ranges at memory_limit %d MiB (blocks' text %d MiB): %v", s.memLimit.Load()>>20, text>>20, err)
	}
	if got.Digest != want.Digest || got.Blocks != want.Blocks || got.Documents != want.Documents || !got.OK() {
		t.Errorf("verify in ranges: digest %s, %d documents, %d blocks; want %s, %d, %d", got.Digest, got.Documents, got.Blocks, want.Digest, want.Documents, want.Blocks)
	}
	if ids, err := walk(); err != nil || !slices.Equal(ids, wantIDs) {
		t.Errorf("ForEachBlock in ranges: %d blocks, %v; want the %d of the default limit, in the same order", len(ids), err, len(wantIDs))
	}
	mem, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, c := range []struct{ file, cols string }{
		{ExportDocumentsFile, `doc_id || ':' || source || ':' || block_count`},
		{ExportBlocksFile, `block_id || ':' || doc_id || ':' || ordinal || ':' || body`},
	} {
		var sums [2]string
		var n [2]int64
		for i, dir := range []string{exported, chunked} {
			if err := mem.QueryRow(`SELECT md5(string_agg(`+c.cols+`, '|' ORDER BY file_row_number)), count(*) FROM read_parquet(?, file_row_number = true)`,
				filepath.Join(dir, c.file)).Scan(&sums[i], &n[i]); err != nil {
				t.Fatal(err)
			}
		}
		if sums[0] != sums[1] || n[0] == 0 {
			t.Errorf("%s in ranges: %d rows, md5 %s; want the %d rows of one query, md5 %s", c.file, n[1], sums[1], n[0], sums[0])
		}
	}
	if left, _ := filepath.Glob(filepath.Join(chunked, ".export-*")); len(left) > 0 {
		t.Errorf("export left %v", left)
	}
}

// embedMissing reads the blocks without vectors in pages: with pages of
// 3 blocks it gives back every vector deleted, as they were.
func TestEmbedMissingPages(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	for i := range 12 {
		ins = append(ins, Input{Source: fmt.Sprintf("mem://d%d.md", i), MediaType: "text/markdown",
			Data: []byte(fmt.Sprintf("# Doc %d\n\nfirst part %d\n\n## Two\n\nsecond part %d\n", i, i, i))})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	want, err := ix.Verify(ctx, nil)
	if err != nil || !want.OK() || want.Vectors < 20 {
		t.Fatalf("verify: %+v, %v; want OK with vectors", want, err)
	}
	s := ix.cur.Load()
	r, err := s.db.Exec(`DELETE FROM ` + s.vec.table + ` WHERE block_id % 3 <> 0`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.RowsAffected(); n < 10 {
		t.Fatalf("deleted %d vectors: the test needs several pages", n)
	}
	saved := embedPage
	embedPage = 3
	defer func() { embedPage = saved }()
	ix.writeMu.Lock()
	err = s.embedMissing(ctx)
	ix.writeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ix.Verify(ctx, nil)
	if err != nil || got.Digest != want.Digest || got.Vectors != want.Vectors {
		t.Errorf("after embedMissing in pages: %d vectors, digest %s, %v; want %d, %s", got.Vectors, got.Digest, err, want.Vectors, want.Digest)
	}
	// Export's vectors in ranges: the same file.
	var sums []string
	savedChunk := readChunkBytes
	defer func() { readChunkBytes = savedChunk }()
	for _, chunk := range []int64{1 << 40, 64} {
		readChunkBytes = chunk
		dir := t.TempDir()
		_, err := ix.Export(ctx, dir, &ExportOptions{Clearance: Restricted})
		readChunkBytes = savedChunk
		if err != nil {
			t.Fatalf("export, readChunkBytes %d: %v", chunk, err)
		}
		var sum string
		var n int64
		if err := s.db.QueryRow(`SELECT md5(string_agg(block_id || ':' || vector::VARCHAR, '|' ORDER BY file_row_number)), count(*) FROM read_parquet(?, file_row_number = true)`,
			filepath.Join(dir, ExportVectorsFile)).Scan(&sum, &n); err != nil || n != want.Vectors {
			t.Fatalf("vectors file: %d rows, %v; want %d", n, err, want.Vectors)
		}
		sums = append(sums, sum)
	}
	if sums[0] != sums[1] {
		t.Errorf("vectors exported in ranges differ from one query's")
	}
}
