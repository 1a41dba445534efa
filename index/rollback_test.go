package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/duck"
)

// A batch whose transaction fails after its records were stored takes
// them back: a new document's record is deleted, a replaced document's
// record is the old one again, so the blob store still describes exactly
// what the index serves.
func TestFailedTransactionRestoresRecords(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: []byte("# A\n\nalpha\n")}); err != nil {
		t.Fatal(err)
	}
	old, err := ix.blobs.GetRecord(ctx, blobstore.DocID("/a.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Make the transaction fail: every batch writes document_text.
	if _, err := ix.cur.Load().db.ExecContext(ctx, `DROP TABLE document_text`); err != nil {
		t.Fatal(err)
	}
	_, errs, err := ix.IngestBatch(ctx, []Input{
		{Source: "/a.md", Data: []byte("# A\n\nalpha, changed\n")},
		{Source: "/b.md", Data: []byte("# B\n\nbeta\n")},
	})
	if err == nil {
		t.Fatalf("the batch succeeded (%v); want a storage error", errs)
	}
	if _, err := ix.blobs.GetRecord(ctx, blobstore.DocID("/b.md")); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("the new document's record stayed (%v)", err)
	}
	got, err := ix.blobs.GetRecord(ctx, blobstore.DocID("/a.md"))
	if err != nil || *got != *old {
		t.Errorf("the replaced document's record is %+v (%v), want %+v", got, err, old)
	}
}

// A delete whose transaction fails after the record's removal was made
// durable (the removal goes first) puts the record back: the rows stay
// served, so the blob store must still describe them, also for a store
// opened afresh (the restore is durable); and a delete after that
// succeeds. The failure is injected through seeDelete: an error inside
// the transaction aborts it, and the documents' or the blocks' DELETE
// then fails; cold (the documents rows read as they are deleted, before
// the removal) and warm (a search loaded the in-memory table: the
// documents rows deleted by key after the removal).
func TestFailedDeleteRestoresRecord(t *testing.T) {
	for _, warm := range []bool{false, true} {
		for _, table := range []string{"documents", "blocks"} {
			t.Run(fmt.Sprintf("warm=%v/%s", warm, table), func(t *testing.T) { testFailedDeleteRestoresRecord(t, warm, table) })
		}
	}
}

func testFailedDeleteRestoresRecord(t *testing.T, warm bool, table string) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: []byte("# A\n\nalpha quokka\n")}); err != nil {
		t.Fatal(err)
	}
	id := blobstore.DocID("/a.md")
	old, err := ix.blobs.GetRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if warm {
		if _, err := ix.Search(ctx, "quokka", nil); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { seeDelete = nil }()
	seeDelete = func(ctx context.Context, tx *duck.Tx, query string, args []any) {
		if strings.HasPrefix(query, "DELETE FROM "+table) {
			tx.ExecContext(ctx, `SELECT error('injected failure')`)
		}
	}
	if _, err := ix.Delete(ctx, "/a.md"); err == nil {
		t.Fatal("the delete succeeded; want the injected failure")
	}
	seeDelete = nil
	got, err := ix.blobs.GetRecord(ctx, id)
	if err != nil || *got != *old {
		t.Errorf("after a failed delete the record is %+v (%v), want %+v", got, err, old)
	}
	fresh, err := blobstore.Open(ctx, ix.blobs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, err := fresh.GetRecord(ctx, id); err != nil || *got != *old {
		t.Errorf("a fresh store reads the record as %+v (%v), want %+v", got, err, old)
	}
	if hits, err := ix.Search(ctx, "quokka", nil); err != nil || len(hits) != 1 {
		t.Errorf("the rows are not served after the failed delete: %+v, %v", hits, err)
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Errorf("verify after the failed delete: %+v, %v", v, err)
	}
	if _, err := ix.Delete(ctx, "/a.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.blobs.GetRecord(ctx, id); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("after the delete: %v, want not found", err)
	}
}
