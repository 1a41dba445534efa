package index

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
)

// Verify reads each table once, in rowid chunks, and sorts the rows by
// doc id in Go (eachInDocOrder): its result, digest and lists in order, is
// the one of the reads it replaced (one sorted query per range of doc ids,
// docOrderRanged), with one bucket in memory and with many spilled to
// files, on an index whose rows lie neither in doc-id order nor without
// gaps (documents replaced and deleted), with vectors, kept text and a
// failed document.
func TestVerifyDocOrder(t *testing.T) {
	ctx := context.Background()
	savedChunk, savedRanged, savedSorted := readChunkBytes, docOrderRanged, docOrderSorted
	defer func() { readChunkBytes, docOrderRanged, docOrderSorted = savedChunk, savedRanged, savedSorted }()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ingest := func(ins []Input) {
		t.Helper()
		_, errs, err := ix.IngestBatch(ctx, ins)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil && ins[i].Source != "mem://broken.docx" { // kept as a failed document
				t.Fatal(e)
			}
		}
	}
	doc := func(i, version int) Input {
		var b strings.Builder
		fmt.Fprintf(&b, "# Document %d\n\n", i)
		for s := range 1 + i%5 {
			fmt.Fprintf(&b, "## Part %d\n\nversion %d of part %d of document %d, with words like alpha%d and beta%d.\n\n", s, version, s, i, i%7, s)
		}
		in := Input{Source: fmt.Sprintf("mem://doc-%03d.md", i), MediaType: "text/markdown", Data: []byte(b.String())}
		switch i % 6 {
		case 1:
			in.Sensitivity = Internal
		case 4:
			in.Sensitivity = Restricted
		}
		return in
	}
	var ins []Input
	for i := range 60 {
		ins = append(ins, doc(i, 1))
	}
	ins = append(ins,
		Input{Source: "mem://page.html", MediaType: "text/html", Data: []byte("<html><head><title>Page</title></head><body><h1>Kept</h1><p>text kept for an HTML page</p></body></html>")},
		Input{Source: "mem://broken.docx", MediaType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", Data: []byte("PK\x03\x04 not a zip at all")},
	)
	ingest(ins[:30])
	ingest(ins[30:])
	// Replaced documents: their rows are deleted and written again at
	// the end, so the tables have gaps and follow no doc-id order.
	ingest([]Input{doc(3, 2), doc(41, 2), doc(17, 2), doc(58, 2)})
	if _, err := ix.Delete(ctx, "mem://doc-005.md", "mem://doc-044.md"); err != nil {
		t.Fatal(err)
	}
	ingest([]Input{doc(5, 3), doc(22, 3)})

	docOrderRanged, readChunkBytes = true, 1<<40
	want, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !want.OK() || want.Vectors == 0 || want.Failed != 1 || want.Blocks < 150 {
		t.Fatalf("verify, one sorted query a table: %+v; want OK with vectors, one failed document and the blocks of 61 documents", want)
	}
	s := ix.cur.Load()
	var texts int
	if err := s.db.QueryRow(`SELECT count(*) FROM document_text`).Scan(&texts); err != nil || texts == 0 {
		t.Fatalf("document_text: %d rows, %v; the test needs kept text", texts, err)
	}
	genDir := filepath.Dir(s.path)
	// ForEachBlock's blocks, as one sorted join gives them.
	joined := func(levels string) []string {
		t.Helper()
		rows, err := s.db.Query(`SELECT b.public_id, b.doc_id, d.source, d.title, b.body, b.page, b.byte_start, b.byte_end, b.heading_path
			FROM blocks b JOIN documents d ON d.doc_id = b.doc_id WHERE d.sensitivity IN (` + levels + `) ORDER BY b.doc_id, b.ord`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id, doc, src, title, body, path string
			var page, start, end int64
			if err := rows.Scan(&id, &doc, &src, &title, &body, &page, &start, &end, &path); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s|%s|%s|%s|%s|%d|%d|%d|%s", id, doc, src, title, body, page, start, end, path))
		}
		return out
	}
	wantPublic, wantAll := joined(`'public'`), joined(`'public', 'internal', 'restricted'`)
	if len(wantPublic) == 0 || len(wantPublic) >= len(wantAll) {
		t.Fatalf("%d public blocks of %d: the test needs both", len(wantPublic), len(wantAll))
	}
	walk := func(clearance string) []string {
		t.Helper()
		var out []string
		if err := ix.ForEachBlock(ctx, clearance, func(h Hit) error {
			path, _ := json.Marshal(h.HeadingPath)
			if len(h.HeadingPath) == 0 {
				path = []byte("[]")
			}
			out = append(out, fmt.Sprintf("%s|%s|%s|%s|%s|%d|%d|%d|%s", h.BlockID, h.DocID, h.Source, h.Title, h.Body, h.Page, h.ByteStart, h.ByteEnd, path))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		ranged bool
		chunk  int64
		spill  bool // more than one bucket for the blocks
	}{
		{true, 2048, false}, // the old reads in ranges: the same result
		{false, 1 << 40, false},
		{false, 2048, true},
		{false, 300, true},
	} {
		docOrderRanged, readChunkBytes = c.ranged, c.chunk
		most := 0
		docOrderSorted = func(n int) { most = max(most, n) }
		got, err := ix.Verify(ctx, nil)
		if err != nil {
			t.Fatalf("ranged %v, chunk %d: %v", c.ranged, c.chunk, err)
		}
		got.Generation = want.Generation
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ranged %v, chunk %d: digest %s, %d documents, %d blocks, %d vectors; want %s, %d, %d, %d (or the lists differ)",
				c.ranged, c.chunk, got.Digest, got.Documents, got.Blocks, got.Vectors, want.Digest, want.Documents, want.Blocks, want.Vectors)
		}
		if !c.ranged && (most > 1) != c.spill {
			t.Errorf("chunk %d: at most %d buckets; want spilling %v", c.chunk, most, c.spill)
		}
		if !c.ranged {
			if got := walk(Public); !slices.Equal(got, wantPublic) {
				t.Errorf("chunk %d: ForEachBlock(public): %d blocks; want %d, as one sorted join", c.chunk, len(got), len(wantPublic))
			}
			if got := walk(Restricted); !slices.Equal(got, wantAll) {
				t.Errorf("chunk %d: ForEachBlock(restricted): %d blocks; want %d, as one sorted join", c.chunk, len(got), len(wantAll))
			}
		}
		if left, _ := filepath.Glob(filepath.Join(genDir, ".sort-*")); len(left) > 0 {
			t.Errorf("chunk %d: left %v", c.chunk, left)
		}
	}
	// Drift found in order: blocks without postings, listed in the
	// canonical order whatever the chunks.
	if _, err := s.db.Exec(`DELETE FROM fts_blocks WHERE block_id % 4 = 1`); err != nil {
		t.Fatal(err)
	}
	docOrderRanged, readChunkBytes = true, 1<<40
	want, err = ix.Verify(ctx, nil)
	if err != nil || len(want.BlocksWithoutPostings) < 10 {
		t.Fatalf("after deleting full-text rows: %v, %d blocks without postings; want some", err, len(want.BlocksWithoutPostings))
	}
	docOrderRanged, readChunkBytes = false, 300
	got, err := ix.Verify(ctx, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after deleting full-text rows, in chunks: digest %s, %v, blocks without postings %v; want %s, %v", got.Digest, err, got.BlocksWithoutPostings, want.Digest, want.BlocksWithoutPostings)
	}
}

// eachInDocOrder's rows keep every kind a scan gives back, and a
// destination it cannot fill is an error, not a silent zero.
func TestDocOrderRowCodec(t *testing.T) {
	at := time.Date(2026, 12, 2, 15, 4, 5, 123456789, time.UTC)
	vals := []any{nil, "text", "", int64(-7), int32(42), int8(-3), []byte{1, 2, 3}, []byte{}, at, 1.5, true}
	b, err := appendRow(nil, vals)
	if err != nil {
		t.Fatal(err)
	}
	var null *int64
	var s, empty string
	var i64, small int64
	var i32 int32
	var raw sql.RawBytes
	var bs []byte
	var tm time.Time
	var f, flag any
	if err := scanRow(b, []any{&null, &s, &empty, &i64, &i32, &small, &raw, &bs, &tm, &f, &flag}); err != nil {
		t.Fatal(err)
	}
	if null != nil || s != "text" || empty != "" || i64 != -7 || i32 != 42 || small != -3 || !slices.Equal(raw, []byte{1, 2, 3}) ||
		bs == nil || len(bs) != 0 || !tm.Equal(at) || f != 1.5 || flag != true {
		t.Errorf("round trip: %v %q %q %d %d %d %v %v %v %v %v", null, s, empty, i64, i32, small, raw, bs, tm, f, flag)
	}
	for _, dest := range [][]any{
		{new(int64)},                // nil into a non-pointer integer
		{new(*int64), new(float32)}, // an unsupported destination
		{new(*int64), new(int64)},   // a string into an integer
	} {
		if err := scanRow(b, dest); err == nil {
			t.Errorf("scan into %T: no error", dest)
		}
	}
	if err := scanRow(b[:3], []any{new(*int64), new(string)}); err == nil {
		t.Error("scan of a truncated row: no error")
	}
	if _, err := appendRow(nil, []any{struct{}{}}); err == nil {
		t.Error("a struct appended: no error")
	}
}

// postingRadix sorts as a stable comparison sort by block does, for
// positions of one digit and of several, runs with repeats included.
func TestPostingRadix(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var rs postingRadix
	for _, c := range []struct {
		n   int32 // positions in [0, n)
		len int
	}{{1, 1}, {2, 5000}, {2047, 3000}, {2048, 3000}, {1 << 22, 20000}, {math.MaxInt32, 5000}} {
		run := make([]posting, c.len)
		for i := range run {
			run[i] = posting{block: r.Int32N(c.n), tf: [2]uint32{uint32(i), 0}} // tf[0]: the order read
		}
		want := slices.Clone(run)
		slices.SortStableFunc(want, func(a, b posting) int { return cmp.Compare(a.block, b.block) })
		rs.sort(run, c.n)
		if !slices.Equal(run, want) {
			t.Errorf("positions below %d, %d postings: not the stable sort by block", c.n, c.len)
		}
	}
}

// ForEachBlock stops at the first block after its context is done, with
// the context's error (review 10 L1: it delivered every block and
// returned nil).
func TestForEachBlockStopsWhenCancelled(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	for i := range 40 {
		ins = append(ins, Input{Source: fmt.Sprintf("/d%02d.md", i), Data: []byte(fmt.Sprintf("# D%d\n\nfirst %d\n\n## Two\n\nsecond %d\n", i, i, i))})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	calls := 0
	err = ix.ForEachBlock(cctx, "", func(Hit) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Errorf("walk cancelled at the third block: %d calls, %v; want 3 and context.Canceled", calls, err)
	}
}

// ForEachBlock below a document's sensitivity never writes that
// document's blocks to its spill files (their text on disk for the
// length of the walk, or after a crash), and still gives every block at
// the clearance; a clearance that covers it spills and gives it.
func TestForEachBlockSpillsOnlyCleared(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ins := []Input{
		{Source: "/open.md", Data: []byte("# Open\n\nanyone may read this\n")},
		{Source: "/inside.md", Sensitivity: Internal, Data: []byte("# Inside\n\nstaff only\n")},
		{Source: "/secret.md", Sensitivity: Restricted, Data: []byte("# Secret\n\nthe launch codes\n")},
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	defer func() { docSpilled = nil }()
	for _, c := range []struct {
		clearance string
		want      []string // sources walked, in doc-id order as spilled
	}{
		{Public, []string{"/open.md"}},
		{Internal, []string{"/inside.md", "/open.md"}},
		{Restricted, []string{"/inside.md", "/open.md", "/secret.md"}},
	} {
		spilled := map[string]bool{}
		docSpilled = func(table, doc string) {
			if table == "blocks" {
				spilled[doc] = true
			}
		}
		var walked []string
		if err := ix.ForEachBlock(ctx, c.clearance, func(h Hit) error {
			walked = append(walked, h.Source)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(walked)
		if !slices.Equal(walked, c.want) {
			t.Errorf("clearance %s: walked %v, want %v", c.clearance, walked, c.want)
		}
		for _, in := range ins {
			id := blobstore.DocID(in.Source)
			if want := slices.Contains(c.want, in.Source); spilled[id] != want {
				t.Errorf("clearance %s: blocks of %s spilled %v, want %v", c.clearance, in.Source, spilled[id], want)
			}
		}
	}
}
