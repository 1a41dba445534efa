package index

import (
	"context"
	"errors"
	"testing"

	"github.com/escurel/escurel/blobstore"
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
