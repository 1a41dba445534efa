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
	e := newEnv(t, index.Options{})
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
