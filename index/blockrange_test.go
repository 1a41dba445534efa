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
	defer func(n, m int) { docSetMinBatch, docSetLoadAfter = n, m }(docSetMinBatch, docSetLoadAfter)
	docSetMinBatch, docSetLoadAfter = 0, 0 // the first batch loads the set
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

// A delete finds single-block documents by key (block_id =), longer ones
// by range, more than maxRanges ranges by doc id, and a document whose
// range names another document's blocks by doc id after giving those
// blocks back exactly (every column, their vectors and postings kept):
// each way deletes exactly the named documents' rows, vectors and
// postings, and searches and verify agree afterwards.
func TestDeleteRangeShapes(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// Even documents have one block, odd ones three.
	src := func(i int) string { return fmt.Sprintf("/s%02d.md", i) }
	var ins []Input
	for i := range 60 {
		text := fmt.Sprintf("kiwis %d\n", i)
		if i%2 == 1 {
			text = fmt.Sprintf("# T %d\n\nkiwis %d\n\n## A\n\nlimes %d\n\n## B\n\nfigs %d\n", i, i, i, i)
		}
		ins = append(ins, Input{Source: src(i), Data: []byte(text)})
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
	rowsOf := func(i int) string {
		t.Helper()
		rows, err := s.db.QueryContext(ctx, `SELECT b.*, v.vector FROM blocks b JOIN `+s.vec.table+` v USING (block_id)
			WHERE b.doc_id = ? ORDER BY b.block_id`, blobstore.DocID(src(i)))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		out := ""
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for k := range vals {
				ptrs[k] = &vals[k]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintln(vals...)
		}
		return out
	}
	live := map[int]bool{}
	for i := range 60 {
		live[i] = true
	}
	check := func(stage string) {
		t.Helper()
		var docs, blocks int64
		for i := range live {
			docs++
			blocks += int64(1 + 2*(i%2))
		}
		if n := q(`SELECT count(*) FROM documents`); n != docs {
			t.Errorf("%s: %d documents, want %d", stage, n, docs)
		}
		if n := q(`SELECT count(*) FROM blocks`); n != blocks {
			t.Errorf("%s: %d blocks, want %d", stage, n, blocks)
		}
		if n := q(`SELECT count(*) FROM ` + s.vec.table); n != blocks {
			t.Errorf("%s: %d vectors, want %d", stage, n, blocks)
		}
		if n := int64(s.fts.Stats().Blocks); n != blocks {
			t.Errorf("%s: %d live full-text blocks, want %d", stage, n, blocks)
		}
		hits, err := ix.Search(ctx, "kiwis", &SearchOptions{K: 100})
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, h := range hits {
			found[h.Source] = true
		}
		for i := range 60 {
			if found[src(i)] != live[i] {
				t.Errorf("%s: %s found %v, live %v", stage, src(i), found[src(i)], live[i])
			}
		}
		v, err := ix.Verify(ctx, nil)
		if err != nil || !v.OK() {
			t.Fatalf("%s: verify: %+v %v", stage, v, err)
		}
	}
	del := func(is ...int) {
		t.Helper()
		var names []string
		for _, i := range is {
			names = append(names, src(i))
			delete(live, i)
		}
		if done, err := ix.Delete(ctx, names...); err != nil || len(done) != len(is) {
			t.Fatalf("delete %v: %v, %v", names, done, err)
		}
	}
	del(10)     // one block
	del(11)     // three
	del(12, 13) // adjacent: one range
	check("by range")
	var many []int // 20 ranges apart: by doc id
	for i := 20; i < 60; i += 2 {
		many = append(many, i)
	}
	del(many...)
	check("by doc id")

	// Ranges that name other documents' blocks (a file written
	// otherwise): document 1's names document 3's three, document 5's
	// the last of 7's and 8's one, document 9's 14's one and the first
	// of 15's.
	for _, c := range [][2]int{{1, 3}, {5, 7}} {
		if _, err := s.db.ExecContext(ctx, `UPDATE documents SET first_block = (SELECT first_block FROM documents WHERE doc_id = ?) WHERE doc_id = ?`,
			blobstore.DocID(src(c[1])), blobstore.DocID(src(c[0]))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE documents SET first_block = first_block + 2, block_count = 2 WHERE doc_id = ?`, blobstore.DocID(src(5))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE documents SET first_block = (SELECT first_block FROM documents WHERE doc_id = ?) - 1, block_count = 2 WHERE doc_id = ?`,
		blobstore.DocID(src(15)), blobstore.DocID(src(9))); err != nil {
		t.Fatal(err)
	}
	before := map[int]string{}
	for _, i := range []int{3, 7, 8, 14, 15} {
		before[i] = rowsOf(i)
	}
	del(1)
	del(5, 9)
	for _, i := range []int{3, 7, 8, 14, 15} {
		if got := rowsOf(i); got != before[i] {
			t.Errorf("document %d's blocks changed by a delete through a wrong range:\n%s\nwant\n%s", i, got, before[i])
		}
	}
	check("wrong ranges")
}

// A delete skips document_text while the table is empty, and deletes a
// document's text row once any document keeps one: the count it goes by
// (textRows) follows every committed write, so no text row outlives its
// document (a re-ingest would then fail on the table's key).
func TestDeleteTextRows(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	texts := func() int64 {
		t.Helper()
		var n int64
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM document_text`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	md := func(i int) Input {
		return Input{Source: fmt.Sprintf("/m%d.md", i), Data: []byte(fmt.Sprintf("guavas %d\n", i))}
	}
	html := func(i int, word string) Input {
		return Input{Source: fmt.Sprintf("/h%d.html", i), Data: []byte(fmt.Sprintf("<html><body><p>%s guavas %d</p></body></html>", word, i))}
	}
	ingest := func(ins ...Input) {
		t.Helper()
		_, errs, err := ix.IngestBatch(ctx, ins)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(names ...string) {
		t.Helper()
		if _, err := ix.Delete(ctx, names...); err != nil {
			t.Fatal(err)
		}
	}
	ingest(md(1), md(2), md(3))
	del("/m1.md") // counts the table: empty
	if !s.texts.known || s.texts.n != 0 || texts() != 0 {
		t.Fatalf("after a Markdown delete: count %+v, %d rows", s.texts, texts())
	}
	ingest(html(1, "red"), html(2, "red"))
	if s.texts.n != 2 || texts() != 2 {
		t.Fatalf("after two HTML documents: count %d, %d rows", s.texts.n, texts())
	}
	del("/h1.html", "/m2.md")
	if s.texts.n != 1 || texts() != 1 {
		t.Fatalf("after an HTML delete: count %d, %d rows", s.texts.n, texts())
	}
	ingest(html(1, "blue"), html(2, "green")) // again, and a replace
	if s.texts.n != 2 || texts() != 2 {
		t.Fatalf("after a re-ingest and a replace: count %d, %d rows", s.texts.n, texts())
	}
	del("/h1.html", "/h2.html")
	if s.texts.n != 0 || texts() != 0 {
		t.Fatalf("after deleting the HTML documents: count %d, %d rows", s.texts.n, texts())
	}
	ingest(html(2, "green"))
	if hits, err := ix.Search(ctx, "green guavas", &SearchOptions{K: 10}); err != nil || len(hits) == 0 || hits[0].Source != "/h2.html" {
		t.Fatalf("search after the re-ingest: %v, %v", hits, err)
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify: %+v %v", v, err)
	}
}
