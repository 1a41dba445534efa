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
	defer func(n, m int) { docSetMinBatch, docSetChunkShift = n, m }(docSetMinBatch, docSetChunkShift)
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
	docSetMinBatch = 0 // this batch loads the set
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
