package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// A delete removes each record before its rows, and stops at a record it
// cannot remove: the documents named before it are gone (record and rows,
// committed), the one whose record stays keeps its rows and is named in
// the error, and the blob store still describes what the index serves.
// Names given twice, and names that match nothing, are handled as before.
func TestDeleteStopsAtRecordItCannotRemove(t *testing.T) {
	// Its fault (a directory where the record's file goes) is the loose
	// layout's; blobstore's TestSyncRemovalsFailure and the crash tests
	// cover the pack layout.
	e := newEnvLayout(t, index.Options{}, false)
	ctx := context.Background()
	e.ingest("/docs/a.md", "Alpha quokka.\n")
	e.ingest("/docs/b.md", "Beta quokka.\n")
	e.ingest("/docs/c.md", "Gamma quokka.\n")
	// b's record cannot be removed: a non-empty directory in its place.
	bRec := filepath.Join(e.dir, "blobs", "documents", blobstore.DocID("/docs/b.md")+".json")
	saved, err := os.ReadFile(bRec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bRec); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(bRec, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	done, err := e.ix.Delete(ctx, "/docs/a.md", "/docs/a.md", "/docs/b.md", "/docs/c.md")
	if err == nil || !strings.Contains(err.Error(), "/docs/b.md") {
		t.Fatalf("delete: %v; want an error naming /docs/b.md", err)
	}
	if len(done) != 1 || done[0] != blobstore.DocID("/docs/a.md") {
		t.Fatalf("done %v, want a's doc id once", done)
	}
	hits := e.search("quokka", 10)
	var titles []string
	for _, h := range hits {
		titles = append(titles, h.Source)
	}
	if got := strings.Join(titles, " "); len(hits) != 2 || strings.Contains(got, "/docs/a.md") {
		t.Fatalf("hits after the failed delete: %s; want b and c", got)
	}
	if _, err := e.ix.Blobs().GetRecord(ctx, blobstore.DocID("/docs/a.md")); err == nil {
		t.Error("a's record is still stored")
	}
	// Put b's record back: the index and the blob store agree again, and
	// the delete can finish.
	if err := os.RemoveAll(bRec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bRec, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := e.ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify after the failed delete: %+v, %v", v, err)
	}
	done, err = e.ix.Delete(ctx, "/docs/b.md", "/docs/nothing.md", "/docs/c.md")
	if err == nil || !strings.Contains(err.Error(), "no document /docs/nothing.md") || len(done) != 2 {
		t.Fatalf("delete: %v, %v; want b and c done and /docs/nothing.md named", done, err)
	}
	if hits := e.search("quokka", 10); len(hits) != 0 {
		t.Fatalf("%d hits after deleting everything", len(hits))
	}
	if recs, err := e.ix.Blobs().Records(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("%d records (%v) after deleting everything", len(recs), err)
	}
	if v, err := e.ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify at the end: %+v, %v", v, err)
	}
}

// A batch's rows commit only once its records are published: the records
// are renamed into place while the transaction writes the rows, and a
// record that cannot be published fails the batch with no row of it
// committed, and nothing of it left but its blob (content-addressed).
func TestIngestCommitsOnlyPublishedRecords(t *testing.T) {
	// Its fault (a directory where the record's file goes) is the loose
	// layout's; blobstore's TestSyncRemovalsFailure and the crash tests
	// cover the pack layout.
	e := newEnvLayout(t, index.Options{}, false)
	ctx := context.Background()
	e.ingest("/docs/a.md", "Alpha quokka.\n")
	// b's record cannot be renamed into place: a non-empty directory there.
	bRec := filepath.Join(e.dir, "blobs", "documents", blobstore.DocID("/docs/b.md")+".json")
	if err := os.MkdirAll(filepath.Join(bRec, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, errs, err := e.ix.IngestBatch(ctx, []index.Input{
		{Source: "/docs/b.md", Data: []byte("Beta quokka.\n")},
		{Source: "/docs/c.md", Data: []byte("Gamma quokka.\n")},
	})
	if err == nil {
		t.Fatalf("ingest with a record that cannot be stored: no error (%v)", errs)
	}
	if hits := e.search("quokka", 10); len(hits) != 1 || hits[0].Source != "/docs/a.md" {
		t.Fatalf("%d hits after the failed batch; want a alone", len(hits))
	}
	if err := os.RemoveAll(bRec); err != nil {
		t.Fatal(err)
	}
	if recs, err := e.ix.Blobs().Records(ctx); err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v) after the failed batch; want a's", len(recs), err)
	}
	if left, _ := filepath.Glob(filepath.Join(e.dir, "blobs", "documents", "*.tmp")); len(left) > 0 {
		t.Errorf("temporary records left: %v", left)
	}
	_, errs, err = e.ix.IngestBatch(ctx, []index.Input{
		{Source: "/docs/b.md", Data: []byte("Beta quokka.\n")},
		{Source: "/docs/c.md", Data: []byte("Gamma quokka.\n")},
	})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("ingest again: %v %v", err, errs)
	}
	if hits := e.search("quokka", 10); len(hits) != 3 {
		t.Fatalf("%d hits, want 3", len(hits))
	}
	if v, err := e.ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}
