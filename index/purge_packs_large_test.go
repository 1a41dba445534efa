package index

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
)

// In the pack layout a blob of 4 MiB or more is written loose by the
// running process; purging its document must erase it from the blob store.
func TestPurgeErasesLargeLooseBlobInPackLayout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := blobstore.UsePacks(ctx, "file://"+filepath.Join(dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	big := []byte("# Secret\n\n" + strings.Repeat("the secret plan in detail. ", (5<<20)/27) + "\n")
	if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: "/big.md", Data: big}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if !blobStored(t, dir, big) {
		t.Fatal("not stored: the test proves nothing")
	}
	res, err := ix.Purge(ctx, "/big.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Blobs) == 0 {
		t.Errorf("Purge reports no blob erased")
	}
	if blobStored(t, dir, big) {
		t.Errorf("purged (result %+v), but the %d-byte blob is still in the blob store", res.Blobs, len(big))
	}
}
