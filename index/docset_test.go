package index

import (
	"context"
	"fmt"
	"testing"
)

// TestDocSetLoad: the set a process loads from a file (its keys read in
// chunks of concatenated prefixes) counts every document under its key,
// as one read of each doc id does, across chunks and after deletes.
func TestDocSetLoad(t *testing.T) {
	ctx := context.Background()
	defer func(n, m, k int) { docSetMinBatch, docSetChunkShift, docSetLoadAfter = n, m, k }(docSetMinBatch, docSetChunkShift, docSetLoadAfter)
	docSetChunkShift = 3 // 8 rows a chunk: several chunks, the last one short
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ins []Input
	for i := range 45 {
		ins = append(ins, Input{Source: fmt.Sprintf("/docs/d%02d.txt", i), Data: []byte(fmt.Sprintf("text number %d\n", i))})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/docs/d07.txt", "/docs/d30.txt"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	docSetMinBatch, docSetLoadAfter = 0, 0 // this batch loads the set
	if _, _, err := ix.IngestBatch(ctx, ins[:1]); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]int32{}
	rows, err := s.db.QueryContext(ctx, `SELECT doc_id FROM documents`)
	if err != nil {
		t.Fatal(err)
	}
	docs := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		k, ok := docKey(id)
		if !ok {
			t.Fatalf("doc id %q has no key", id)
		}
		want[k]++
		docs++
	}
	rows.Close()
	if docs != 43 {
		t.Fatalf("%d documents, want 43", docs)
	}
	s.docs.mu.Lock()
	defer s.docs.mu.Unlock()
	if !s.docs.loaded {
		t.Fatal("doc id set not loaded")
	}
	if fmt.Sprint(s.docs.n) != fmt.Sprint(want) {
		t.Errorf("doc id set %v, want %v", s.docs.n, want)
	}
}

// TestDocSetRentsFirst: a process's first batches ask DuckDB which of
// their documents the index holds (the set is not loaded for them), and
// their results are those the set gives: a document held is unchanged
// or replaced, a new one added; after docSetLoadAfter lookups the set is
// loaded and counts every document.
func TestDocSetRentsFirst(t *testing.T) {
	ctx := context.Background()
	defer func(n, k int) { docSetMinBatch, docSetLoadAfter = n, k }(docSetMinBatch, docSetLoadAfter)
	// Two batches rent, the third loads: one lookup a batch, as no
	// other writer holds writeMu between a batch's preparation and its
	// lock (a background merge does not count: writerLock.unlockMerge).
	docSetMinBatch, docSetLoadAfter = 4, 2
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := func(i int, text string) Input {
		return Input{Source: fmt.Sprintf("/docs/d%02d.txt", i), Data: []byte(fmt.Sprintf("%s %d\n", text, i))}
	}
	var ins []Input
	for i := range 10 {
		ins = append(ins, doc(i, "first text"))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	loaded := func() bool {
		s.docs.mu.Lock()
		defer s.docs.mu.Unlock()
		return s.docs.loaded
	}
	// Batch 1: d00-d04 unchanged, d05 replaced, d10-d11 new.
	// Batch 2: d06 unchanged, d10 unchanged (batch 1 added it), d12 new,
	// d07-d08 replaced.
	batches := [][]Input{
		{doc(0, "first text"), doc(1, "first text"), doc(2, "first text"), doc(3, "first text"), doc(4, "first text"),
			doc(5, "second text"), doc(10, "new text"), doc(11, "new text")},
		{doc(6, "first text"), doc(10, "new text"), doc(12, "new text"), doc(7, "second text"), doc(8, "second text")},
	}
	want := [][]Status{
		{Unchanged, Unchanged, Unchanged, Unchanged, Unchanged, Replaced, Added, Added},
		{Unchanged, Unchanged, Added, Replaced, Replaced},
	}
	for i, b := range batches {
		res, errs, err := ix.IngestBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range res {
			if errs[j] != nil {
				t.Fatalf("batch %d, %s: %v", i+1, r.Source, errs[j])
			}
			if r.Status != want[i][j] {
				t.Errorf("batch %d, %s: %s, want %s", i+1, r.Source, r.Status, want[i][j])
			}
		}
		if loaded() {
			t.Fatalf("batch %d loaded the doc id set; the first %d lookups rent", i+1, docSetLoadAfter)
		}
	}
	res, _, err := ix.IngestBatch(ctx, []Input{doc(9, "first text"), doc(13, "new text"), doc(14, "new text"), doc(15, "new text"), doc(16, "new text")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != Unchanged || res[1].Status != Added {
		t.Errorf("batch 3: %s and %s, want unchanged and added", res[0].Status, res[1].Status)
	}
	if !loaded() {
		t.Fatal("batch 3 did not load the doc id set")
	}
	s.docs.mu.Lock()
	defer s.docs.mu.Unlock()
	held := 0
	for _, c := range s.docs.n {
		held += int(c)
	}
	if held != 17 {
		t.Errorf("doc id set counts %d documents, want 17", held)
	}
}

// Once a search has loaded the table of documents (hitDocs), an ingest
// learns which of its documents exist from it: no semi-join is rented
// and no doc-id set loaded, and the statuses are those the rows give.
func TestCandidatesFromHitDocs(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	doc := func(i int, text string) Input {
		return Input{Source: fmt.Sprintf("/h%03d.md", i), Data: []byte(fmt.Sprintf("# H%d\n\n%s about tables\n", i, text))}
	}
	var first []Input
	for i := range 10 {
		first = append(first, doc(i, "first"))
	}
	if _, _, err := ix.IngestBatch(ctx, first); err != nil {
		t.Fatal(err)
	}
	for range hitDocsLoadAfter {
		if _, err := ix.Search(ctx, "tables", nil); err != nil {
			t.Fatal(err)
		}
	}
	s := ix.cur.Load()
	if !s.hitDocs.isLoaded() {
		t.Fatal("the search did not load the table of documents")
	}
	// Two unchanged, three replaced, 95 new: more than docSetMinBatch ids,
	// which without the table rent a semi-join.
	batch := []Input{doc(0, "first"), doc(1, "first"), doc(2, "second"), doc(3, "second"), doc(4, "second")}
	for i := 10; i < 105; i++ {
		batch = append(batch, doc(i, "new"))
	}
	res, errs, err := ix.IngestBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := Added
		switch {
		case i < 2:
			want = Unchanged
		case i < 5:
			want = Replaced
		}
		if errs[i] != nil || r.Status != want {
			t.Errorf("%s: %s, %v; want %s", r.Source, r.Status, errs[i], want)
		}
	}
	s.docs.mu.Lock()
	queried, loaded := s.docs.queried, s.docs.loaded
	s.docs.mu.Unlock()
	if queried != 0 || loaded {
		t.Errorf("the doc-id set answered %d lookups and was loaded %v; want none and false (the table answers)", queried, loaded)
	}
	if err := CheckDocTable(ctx, ix); err != nil {
		t.Error(err)
	}
}
