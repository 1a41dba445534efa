package index

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/escurel/escurel/index/dense"
	"github.com/escurel/escurel/internal/duck"
)

// storedVectors reads the active set's table as it is stored, by internal
// block id, with each block's level.
func storedVectors(t testing.TB, s *state) map[int64][]float32 {
	t.Helper()
	rows, err := s.db.Query(`SELECT block_id, vector FROM ` + s.vec.table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64][]float32{}
	for rows.Next() {
		var id int64
		var raw any
		if err := rows.Scan(&id, &raw); err != nil {
			t.Fatal(err)
		}
		var v []float32
		switch x := raw.(type) {
		case []byte: // BLOB: float32 little-endian
			for i := 0; i+4 <= len(x); i += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(x[i:])))
			}
		case []any: // FLOAT[dim]
			for _, c := range x {
				v = append(v, c.(float32))
			}
		default:
			t.Fatalf("block %d: vector stored as %T", id, raw)
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// memVector reads block id's vector back from d through its search
// alone: scored against each unit axis, among the allowed block id, at
// levels ≤ maxLevel, the score is that component exactly. ok is false
// when d holds no vector for id at those levels.
func memVector(t *testing.T, d *dense.Index, id int64, maxLevel uint8) ([]float32, bool) {
	t.Helper()
	allowed := make([]uint64, id/64+1)
	allowed[id/64] = 1 << (id % 64)
	v := make([]float32, d.Dim())
	q := make([]float32, d.Dim())
	for j := range q {
		q[j] = 1
		hits, err := d.SearchAllowed(context.Background(), q, 1, maxLevel, allowed, 1)
		q[j] = 0
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			return nil, false
		}
		v[j] = float32(hits[0].Score)
	}
	return v, true
}

// sameValues reports whether a and b hold equal components (0 and -0
// alike: a score of -0 reads back as 0).
func sameValues(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkDense compares the in-memory vectors of the live state with the
// stored rows and with the embedder's output for each block's text, bit
// for bit, and each level with its document's sensitivity.
func checkDense(t *testing.T, ix *Index, stage string) {
	t.Helper()
	ctx := context.Background()
	s := ix.cur.Load()
	if !s.vec.isLoaded() {
		t.Fatalf("%s: vectors not loaded", stage)
	}
	d := s.vec.dense
	stored := storedVectors(t, s)
	if d.Len() != len(stored) {
		t.Errorf("%s: %d vectors in memory, %d stored", stage, d.Len(), len(stored))
	}
	rows, err := s.db.Query(`SELECT b.block_id, b.body, b.context, d.sensitivity FROM blocks b JOIN documents d USING (doc_id) ORDER BY b.block_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var body, context, sens string
		if err := rows.Scan(&id, &body, &context, &sens); err != nil {
			t.Fatal(err)
		}
		n++
		want, err := s.embedTexts(ctx, []string{s.embeddingText(context, body)})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := memVector(t, d, id, level(sens))
		if !ok {
			t.Errorf("%s: block %d has no vector in memory at its document's level (%s)", stage, id, sens)
			continue
		}
		if lvl := level(sens); lvl > 0 {
			if _, ok := memVector(t, d, id, lvl-1); ok {
				t.Errorf("%s: block %d: a level below its document's (%s) in memory", stage, id, sens)
			}
		}
		if !sameValues(got, want[0]) {
			t.Errorf("%s: block %d: the vector in memory is not the embedder's", stage, id)
		}
		if !sameBits(stored[id], want[0]) {
			t.Errorf("%s: block %d: the stored vector is not the embedder's", stage, id)
		}
	}
	if n != d.Len() {
		t.Errorf("%s: %d blocks, %d vectors in memory", stage, n, d.Len())
	}
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// The vectors a dense search uses are the stored ones, bit for bit, with
// their documents' levels: on the first load, kept in step by ingest and
// delete, loaded again from the rows, and on the generation a switch
// makes live.
func TestDenseLoadExact(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	doc := func(i int) Input {
		in := Input{Source: fmt.Sprintf("/v%02d.md", i), Data: []byte(fmt.Sprintf(
			"# Doc %d\n\nwords about apples %d\n\n## Part\n\ntext on pears %d and more %d\n", i, i, i, i*7))}
		in.Sensitivity = []string{Public, Internal, Restricted}[i%3]
		return in
	}
	var ins []Input
	for i := range 12 {
		ins = append(ins, doc(i))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	dense := &SearchOptions{Mode: ModeDense, Clearance: Restricted}
	if _, err := ix.Search(ctx, "apples", dense); err != nil {
		t.Fatal(err)
	}
	checkDense(t, ix, "first load")

	// Ingest and delete while loaded: the copy follows the commits.
	if _, _, err := ix.IngestBatch(ctx, []Input{doc(12), doc(13)}); err != nil {
		t.Fatal(err)
	}
	changed := doc(3)
	changed.Data = append(changed.Data, "\n## New\n\nplums\n"...)
	if _, err := ix.Ingest(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/v05.md", "/v07.md"); err != nil {
		t.Fatal(err)
	}
	checkDense(t, ix, "after ingest and delete")

	// Loaded again from the rows.
	s := ix.cur.Load()
	s.vec.mu.Lock()
	s.vec.loaded, s.vec.dense = false, nil
	s.vec.mu.Unlock()
	if _, err := ix.Search(ctx, "apples", dense); err != nil {
		t.Fatal(err)
	}
	checkDense(t, ix, "reloaded")

	// A switch (a purge makes a new generation live) loads the new
	// generation's vectors before it is live.
	if _, err := ix.Purge(ctx, "/v08.md"); err != nil {
		t.Fatal(err)
	}
	if ix.cur.Load() == s {
		t.Fatal("the purge did not switch generations")
	}
	checkDense(t, ix, "after a switch")
}

// A write whose vectors outgrow the loaded arrays' room reserves rows for
// all of them before its commit (reserveDense): the arrays are then sized
// by dense.Room for exactly those rows, where appends inside the commit's
// critical section (applyDense), while every search waits, would have
// grown them as append does.
func TestWriteReservesDenseRows(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	doc := func(i int) Input {
		return Input{Source: fmt.Sprintf("/r%04d.md", i), Data: []byte(fmt.Sprintf("# Doc %d\n\nwords about apples %d\n", i, i))}
	}
	if _, _, err := ix.IngestBatch(ctx, []Input{doc(0), doc(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Search(ctx, "apples", &SearchOptions{Mode: ModeDense}); err != nil {
		t.Fatal(err)
	}
	s := ix.cur.Load()
	d := s.vec.dense
	before, room := d.Len(), d.Cap()
	var ins []Input
	for i := 2; i < 2+room+8; i++ { // one block each: more than the room
		ins = append(ins, doc(i))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if s.vec.dense != d {
		t.Fatal("the vectors were loaded again: the test measures nothing")
	}
	added := d.Len() - before
	if added <= room-before {
		t.Fatalf("%d vectors added to %d with room for %d: the write fit", added, before, room)
	}
	if got, want := d.Cap(), dense.Room(before+added)/8*8; got != want {
		t.Errorf("after adding %d vectors to %d: room for %d, want %d (dense.Room): the commit grew the arrays, not reserveDense", added, before, got, want)
	}
}

// seedVectors fills a new index's tables with n blocks (in 4 documents of
// each level) and their random unit vectors, without the ingest path.
func seedVectors(tb testing.TB, n int) *Index {
	tb.Helper()
	ctx := context.Background()
	ix, err := Open(ctx, tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	s := ix.cur.Load()
	for i, sens := range []string{"public", "internal", "restricted", "public"} {
		if _, err := s.db.Exec(`INSERT INTO documents (doc_id, source, media_type, title, sensitivity, blob_id, language, ingested_at)
			VALUES (?, ?, 'text/plain', '', ?, '', 'en', now()::TIMESTAMP)`, fmt.Sprintf("d%d", i), fmt.Sprintf("/d%d", i), sens); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := s.db.Exec(`INSERT INTO blocks (block_id, doc_id, ord, body, byte_start, byte_end, public_id)
		SELECT i, 'd' || (i % 4), i, 'b', 0, 1, printf('%016x', i) FROM range(1, ? + 1) t(i)`, n); err != nil {
		tb.Fatal(err)
	}
	tx, err := duck.Begin(ctx, s.db)
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	dim := s.vec.spec.Dim
	err = duck.Append(ctx, tx.Conn, s.vec.table, []string{"block_id", "vector"}, func(add func(...driver.Value) error) error {
		v := make([]float32, dim)
		for i := 1; i <= n; i++ {
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			if err := add(int64(i), vectorValue(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
	return ix
}

// BenchmarkDenseLoad reads 20,000 vectors of 384 dimensions into memory,
// as the first dense search of a process and every switch do; MB/op is
// the memory allocated per load (the vectors themselves are 30.7 MB).
func BenchmarkDenseLoad(b *testing.B) {
	const n = 20000
	ix := seedVectors(b, n)
	defer ix.Close()
	s := ix.cur.Load()
	ctx := context.Background()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.vec.mu.Lock()
		s.vec.loaded, s.vec.dense = false, nil
		s.vec.mu.Unlock()
		d, err := s.denseIndex(ctx, s.db)
		if err != nil {
			b.Fatal(err)
		}
		if d.Len() != n {
			b.Fatalf("%d vectors loaded, want %d", d.Len(), n)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/1e6, "MB/op")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
	// CPU time of the whole process (DuckDB's threads too): on a loaded
	// machine the wall time says little.
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A file from before schema 14 stores vectors as FLOAT[dim] arrays; Open
// converts its table to BLOBs, and the vectors, the digest and the dense
// ranking stay what they were.
func TestConvertFloatVectors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ins []Input
	for i := range 30 {
		ins = append(ins, Input{Source: fmt.Sprintf("/c%02d.md", i), Data: []byte(fmt.Sprintf("# C %d\n\ncherries %d and figs %d\n", i, i, i*i)),
			Sensitivity: []string{Public, Internal, Restricted}[i%3]})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	opts := &SearchOptions{Mode: ModeDense, Clearance: Restricted, K: 20}
	before, err := ix.Search(ctx, "cherries and figs", opts)
	if err != nil || len(before) != 20 {
		t.Fatalf("%d hits, %v", len(before), err)
	}
	v1, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Write the table back as schema 13 had it.
	s := ix.cur.Load()
	stored := storedVectors(t, s)
	tb := s.vec.table
	for _, q := range []string{
		`CREATE TABLE old_vectors (block_id BIGINT PRIMARY KEY, vector FLOAT[384] NOT NULL)`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := duck.Begin(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}
	err = duck.Append(ctx, tx.Conn, "old_vectors", []string{"block_id", "vector"}, func(add func(...driver.Value) error) error {
		for id, v := range stored {
			if err := add(id, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE ` + tb,
		`ALTER TABLE old_vectors RENAME TO ` + tb,
		`DELETE FROM schema_migrations WHERE version = 14`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ix.Close()

	ix, err = Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s = ix.cur.Load()
	var typ string
	s.db.QueryRow(`SELECT data_type FROM information_schema.columns WHERE table_name = ? AND column_name = 'vector'`, tb).Scan(&typ)
	if typ != "BLOB" {
		t.Errorf("vector column %q after open, want BLOB", typ)
	}
	if ix.Manifest().SchemaVersion != SchemaVersion {
		t.Errorf("schema version %d", ix.Manifest().SchemaVersion)
	}
	v2, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Digest != v1.Digest || v2.Vectors != v1.Vectors || v2.Vectors != int64(len(stored)) {
		t.Errorf("digest %s with %d vectors after the conversion, %s with %d before", v2.Digest, v2.Vectors, v1.Digest, v1.Vectors)
	}
	after, err := ix.Search(ctx, "cherries and figs", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if i >= len(after) || after[i].BlockID != before[i].BlockID || after[i].Score != before[i].Score {
			t.Fatalf("hit %d after the conversion differs:\n%+v\n%+v", i, after, before)
		}
	}
	checkDense(t, ix, "converted")
}
