package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
)

// packFiles counts the blob store's published packs.
func packFiles(t testing.TB, dir string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "blobs", "packs", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// A batch whose transaction fails before its records are published
// publishes none (the blobs and the records are stored beside the
// transaction, and the records wait for it): no record to take back, no
// pack written for them nor for their removal, and the index and the
// blob store still describe what was served.
func TestIngestFailedTransactionPublishesNoRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	defer func() { blockIDOf = blockID }()
	// An id by body alone: the same body in two documents collides when
	// the transaction appends the second one's blocks.
	blockIDOf = func(_, _ string, _, _ int64, body string) string { return blockID("", "", 0, 0, body) }
	if _, err := ix.Ingest(ctx, Input{Source: "/a.txt", Data: []byte("the same words")}); err != nil {
		t.Fatal(err)
	}
	packs := packFiles(t, dir)
	_, err = ix.Ingest(ctx, Input{Source: "/b.txt", Data: []byte("the same words")}) // the blob is stored already
	var ce *CollisionError
	if !errors.As(err, &ce) || ce.Source != "/b.txt" {
		t.Fatalf("collision: %v", err)
	}
	if n := packFiles(t, dir); n != packs {
		t.Errorf("the failed batch published %d packs (its records, or their removal)", n-packs)
	}
	if _, err := ix.Blobs().GetRecord(ctx, blobstore.DocID("/b.txt")); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("record of /b.txt: %v, want not found", err)
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() || v.Documents != 1 {
		t.Errorf("after the failed batch: %+v, %v", v, err)
	}
}

// A batch whose blobs cannot be stored fails whole: its records are not
// published, the index serves the previous version of each document, and
// the next batch, once the store works again, is ingested.
func TestIngestStoreFailurePublishesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	v1 := Input{Source: "/a.md", Data: []byte("# A\n\nfirst version quokka\n")}
	if _, err := ix.Ingest(ctx, v1); err != nil {
		t.Fatal(err)
	}
	was, err := ix.Blobs().GetRecord(ctx, blobstore.DocID("/a.md"))
	if err != nil {
		t.Fatal(err)
	}
	// packs/ a file: no pack can be written.
	packsDir := filepath.Join(dir, "blobs", "packs")
	if err := os.Rename(packsDir, packsDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packsDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = ix.IngestBatch(ctx, []Input{
		{Source: "/a.md", Data: []byte("# A\n\nsecond version numbat\n")},
		{Source: "/b.md", Data: []byte("# B\n\nnew wombat\n")},
	})
	if err == nil || !strings.HasPrefix(err.Error(), "ingest: ") || strings.HasPrefix(err.Error(), "ingest: ingest:") {
		t.Fatalf("ingest with no place for packs: %v", err)
	}
	if err := os.Remove(packsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(packsDir+".away", packsDir); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{"quokka": 1, "numbat": 0, "wombat": 0} {
		hits, err := ix.Search(ctx, q, nil)
		if err != nil || len(hits) != want {
			t.Errorf("search %s: %d hits (%v), want %d", q, len(hits), err, want)
		}
	}
	if got, err := ix.Blobs().GetRecord(ctx, blobstore.DocID("/a.md")); err != nil || *got != *was {
		t.Errorf("record of /a.md: %+v, %v; want the first version's", got, err)
	}
	if _, err := ix.Blobs().GetRecord(ctx, blobstore.DocID("/b.md")); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("record of /b.md: %v, want not found", err)
	}
	if _, err := ix.Ingest(ctx, Input{Source: "/b.md", Data: []byte("# B\n\nnew wombat\n")}); err != nil {
		t.Fatalf("after the store works again: %v", err)
	}
	v, err := ix.Verify(ctx, &VerifyOptions{Deep: true})
	if err != nil || !v.OK() || v.Documents != 2 {
		t.Errorf("verify: %+v, %v", v, err)
	}
}
