package index

import (
	"context"
	"fmt"
	"github.com/escurel/escurel/blobstore"
	"testing"
)

// A document's blocks are found by its block range (documents.first_block,
// block_count) when a write replaces or deletes it: the range written is
// exactly its blocks; a delete through it removes its rows, vectors and
// postings and nothing of any other document; a row whose range is not
// known (-1) or is wrong is deleted by doc id instead, as before.
func TestBlockRangeDelete(t *testing.T) {
	ctx := context.Background()
	defer func(n int) { docSetMinBatch = n }(docSetMinBatch)
	docSetMinBatch = 0 // the first batch loads the set
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	doc := func(i int, extra string) Input {
		in := Input{Source: fmt.Sprintf("/d%02d.md", i), Data: []byte(fmt.Sprintf(
			"# Doc %d\n\nwords about apples %d %s\n\n## Part\n\ntext on pears %d\n\n## More\n\nplums %d\n", i, i, extra, i, i))}
		if i%2 == 1 {
			in.Language = "de"
		}
		if i%3 == 0 {
			in.Sensitivity = Internal
		}
		return in
	}
	var ins []Input
	for i := range 10 {
		ins = append(ins, doc(i, ""))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	s := ix.cur.Load()
	q := func(query string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := s.db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	docID := func(i int) string { return blobstore.DocID(fmt.Sprintf("/d%02d.md", i)) }
	// Every range is exactly its document's blocks, and every live block
	// has its vector and its full-text entry.
	consistent := func(stage string, wantDocs int64) {
		t.Helper()
		if n := q(`SELECT count(*) FROM documents`); n != wantDocs {
			t.Errorf("%s: %d documents, want %d", stage, n, wantDocs)
		}
		if n := q(`SELECT count(*) FROM documents d WHERE block_count >= 0 AND block_count <> (SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id
			AND b.block_id BETWEEN d.first_block AND d.first_block + d.block_count - 1)`); n != 0 {
			t.Errorf("%s: %d documents whose range is not their blocks", stage, n)
		}
		if n := q(`SELECT count(*) FROM documents d WHERE block_count >= 0 AND block_count <> (SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id)`); n != 0 {
			t.Errorf("%s: %d documents with blocks outside their range", stage, n)
		}
		blocks := q(`SELECT count(*) FROM blocks`)
		if n := q(`SELECT count(*) FROM blocks WHERE doc_id NOT IN (SELECT doc_id FROM documents)`); n != 0 {
			t.Errorf("%s: %d blocks of no document", stage, n)
		}
		if n := q(`SELECT count(*) FROM ` + s.vec.table); n != blocks {
			t.Errorf("%s: %d vectors, %d blocks", stage, n, blocks)
		}
		if n := int64(s.fts.Stats().Blocks); n != blocks {
			t.Errorf("%s: %d live full-text blocks, %d blocks", stage, n, blocks)
		}
		// The doc id set kept in step: loaded by the first ingest, it
		// counts exactly the documents.
		s.docs.mu.Lock()
		if !s.docs.loaded {
			t.Errorf("%s: doc id set not loaded", stage)
		}
		var held int64
		for _, c := range s.docs.n {
			held += int64(c)
		}
		rows, err := s.db.QueryContext(ctx, `SELECT doc_id FROM documents`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			rows.Scan(&id)
			if k, _ := docKey(id); s.docs.n[k] == 0 {
				t.Errorf("%s: document %s not in the doc id set", stage, id)
			}
		}
		rows.Close()
		s.docs.mu.Unlock()
		if held != wantDocs {
			t.Errorf("%s: doc id set counts %d documents, want %d", stage, held, wantDocs)
		}
		// The languages kept in step by each write are those counted.
		langs, err := s.countLanguages(ctx, s.db)
		if err != nil {
			t.Fatal(err)
		}
		s.langMu.RLock()
		if fmt.Sprint(langs) != fmt.Sprint(s.langs) {
			t.Errorf("%s: languages %v, counted %v", stage, s.langs, langs)
		}
		s.langMu.RUnlock()
		if n := q(`SELECT count(*) FROM blocks`); n != wantDocs*3 {
			t.Errorf("%s: %d blocks, want %d", stage, n, wantDocs*3)
		}
	}
	consistent("ingest", 10)
	if n := q(`SELECT count(*) FROM documents WHERE block_count = 3`); n != 10 {
		t.Fatalf("%d documents with a range of their 3 blocks, want 10", n)
	}

	// Replace two, delete two (one of them in a batch of its own).
	fr := doc(2, "changed")
	fr.Language, fr.Sensitivity = "fr", Restricted
	if _, _, err := ix.IngestBatch(ctx, []Input{fr, doc(7, "changed")}); err != nil {
		t.Fatal(err)
	}
	consistent("replace", 10)
	if _, err := ix.Delete(ctx, "/d03.md", "/d04.md"); err != nil {
		t.Fatal(err)
	}
	consistent("delete two", 8)
	hits, err := ix.Search(ctx, "apples", &SearchOptions{K: 100, Clearance: Restricted})
	if err != nil || len(hits) != 8 {
		t.Fatalf("apples after the delete: %d hits, %v", len(hits), err)
	}
	for _, h := range hits {
		if h.Source == "/d03.md" || h.Source == "/d04.md" {
			t.Errorf("deleted document found: %s", h.Source)
		}
	}

	// A range not known, and a wrong one (it names another document's
	// blocks): deleted by doc id, the other document untouched.
	if _, err := s.db.ExecContext(ctx, `UPDATE documents SET first_block = -1, block_count = -1 WHERE doc_id = ?`, docID(5)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE documents SET first_block = (SELECT first_block FROM documents WHERE doc_id = ?) WHERE doc_id = ?`, docID(8), docID(6)); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/d05.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/d06.md"); err != nil {
		t.Fatal(err)
	}
	consistent("fallback deletes", 6)
	if n := q(`SELECT count(*) FROM blocks WHERE doc_id = ?`, docID(8)); n != 3 {
		t.Errorf("document 8 has %d blocks after the delete of the document whose range named them, want 3", n)
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify: %+v %v", v, err)
	}
}
