package index

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/escurel/escurel/embed"
)

// A crash between a batch's Flush (packs/<random>.pack.tmp durable)
// and its Sync (the rename) leaves the batch's pack as a temporary file.
// GC removes it once it is old; Purge, which promises that no copy of the
// purged document is left in the blob store, removes it whatever its age
// (reviewer 5, finding 2).
func TestPurgeRemovesBlobStoreTempFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	secret := []byte("# Memo\n\nthe launch code is zebra-4471\n")
	if _, err := ix.Ingest(ctx, Input{Source: "/memo.md", Data: secret}); err != nil {
		t.Fatal(err)
	}
	// What the crash leaves: the batch's pack, not renamed.
	packs, _ := filepath.Glob(filepath.Join(dir, "blobs", "packs", "*.pack"))
	var leftover string
	for _, p := range packs {
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte("zebra-4471")) {
			leftover = filepath.Join(dir, "blobs", "packs", "0123456789abcdef.pack.tmp")
			// Fresh: no MinAge spares it.
			if err := os.WriteFile(leftover, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if leftover == "" {
		t.Fatal("no pack holds the memo: the test proves nothing")
	}
	res, err := ix.Purge(ctx, "/memo.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.BlobTempFiles) != 1 || res.BlobTempFiles[0] != leftover {
		t.Errorf("BlobTempFiles %q, want [%s]", res.BlobTempFiles, leftover)
	}
	if blobStored(t, dir, []byte("zebra-4471")) {
		t.Errorf("after Purge the purged document's bytes are still in the blob store (%s)", leftover)
	}
}
