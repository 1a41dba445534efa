package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
)

// Document finds its row through the doc_id key (an ART lookup, no scan
// of documents or blocks: its cost does not grow with the index), checks
// the clearance on the row found, and reports the blocks the row records;
// a row that records none (block_count -1: written before schema 13)
// has its blocks counted, by Document and by ListDocuments alike.
// DocumentSensitivity reads a row's level by the same key, at no
// clearance.
func TestDocumentByKey(t *testing.T) {
	ctx := context.Background()
	docID := func(i int) string { return blobstore.DocID(fmt.Sprintf("/k%02d.md", i)) }
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	for i := range 12 {
		in := Input{Source: fmt.Sprintf("/k%02d.md", i), Data: []byte(fmt.Sprintf("# K %d\n\nfirst %d\n\n## Two\n\nsecond %d\n", i, i, i))}
		if i%3 == 0 {
			in.Data = []byte(fmt.Sprintf("single %d\n", i))
		}
		if i%4 == 1 {
			in.Sensitivity = Restricted
		}
		ins = append(ins, in)
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	s := ix.cur.Load()
	for _, id := range []string{docID(5), docID(6)} {
		if _, err := s.db.ExecContext(ctx, `UPDATE documents SET first_block = -1, block_count = -1 WHERE doc_id = ?`, id); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[string]int64{}
	rows, err := s.db.QueryContext(ctx, `SELECT doc_id, count(*) FROM blocks GROUP BY doc_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int64
		rows.Scan(&id, &n)
		counts[id] = n
	}
	rows.Close()
	listed := 0
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Clearance: Restricted, PageSize: 5}) {
		if err != nil {
			t.Fatal(err)
		}
		listed++
		if d.Blocks != counts[d.DocID] {
			t.Errorf("listed %s: %d blocks, want %d", d.Source, d.Blocks, counts[d.DocID])
		}
	}
	if listed != 12 {
		t.Errorf("%d listed, want 12", listed)
	}
	for i := range 12 {
		id := docID(i)
		d, err := ix.Document(ctx, id, Restricted)
		if err != nil || d.Blocks != counts[id] || d.Source != fmt.Sprintf("/k%02d.md", i) {
			t.Errorf("Document %d: %+v %v, want %d blocks", i, d, err, counts[id])
		}
		_, err = ix.Document(ctx, id, Public)
		if above := i%4 == 1; above != errors.Is(err, ErrNotFound) {
			t.Errorf("Document %d at public: %v (restricted: %v)", i, err, above)
		}
	}
	if _, err := ix.Document(ctx, docID(99), Restricted); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing document: %v", err)
	}
	// DocumentSensitivity: the row's level, whatever the clearance.
	for i := range 12 {
		want := Public
		if i%4 == 1 {
			want = Restricted
		}
		if got, ok, err := ix.DocumentSensitivity(ctx, docID(i)); got != want || !ok || err != nil {
			t.Errorf("DocumentSensitivity %d: %q %v %v, want %q", i, got, ok, err, want)
		}
	}
	if got, ok, err := ix.DocumentSensitivity(ctx, docID(99)); ok || err != nil || got != "" {
		t.Errorf("DocumentSensitivity of a missing document: %q %v %v", got, ok, err)
	}

	// The plan: documents read by its key, blocks not at all.
	query, args := documentQuery(&ListOptions{Clearance: Public, PageSize: 1, docID: docID(4)}, "", true)
	prows, err := s.db.QueryContext(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for prows.Next() {
		var kind, text string
		if err := prows.Scan(&kind, &text); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(text)
	}
	prows.Close()
	if p := scanProblem(plan.String()); p != "" {
		t.Errorf("Document's query: %s\n%s", p, plan.String())
	}
}
