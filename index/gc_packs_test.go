package index

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/escurel/escurel/embed"
)

// In the pack layout (a new store's) every single ingest and delete
// writes a small pack; Reclaimable counts the dead bytes they leave, and
// GC folds the small packs into one: fewer packs, no dead byte, the same
// digest.
func TestGCFoldsSmallPacks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if !ix.Blobs().Packed() {
		t.Fatal("a new index's blob store is not packed")
	}
	for i := range 12 {
		if _, err := ix.Ingest(ctx, Input{Source: fmt.Sprintf("/d/%d.md", i), Data: []byte(fmt.Sprintf("# Doc %d\n\nwombat number %d\n", i, i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := ix.Delete(ctx, fmt.Sprintf("/d/%d.md", i)); err != nil {
			t.Fatal(err)
		}
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify: %+v, %v", v, err)
	}
	packs := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "blobs", "packs", "*.pack"))
		return len(m)
	}
	r, err := ix.Reclaimable(ctx)
	if err != nil || r.PackDeadBytes == 0 {
		t.Fatalf("Reclaimable before gc: %+v, %v; want the deleted records' bytes dead", r, err)
	}
	before := packs()
	res, err := ix.GC(ctx, &GCOptions{MinAge: -1})
	if err != nil || res.Repacked == nil || res.Repacked.Folded != before {
		t.Fatalf("gc: %+v (%+v), %v; want the %d packs folded", res, res.Repacked, err, before)
	}
	if n := packs(); n != 1 {
		t.Errorf("%d packs → %d after gc, want 1", before, n)
	}
	if r, err := ix.Reclaimable(ctx); err != nil || r.PackDeadBytes != 0 {
		t.Errorf("Reclaimable after gc: %+v, %v; want no dead byte", r, err)
	}
	after, err := ix.Verify(ctx, &VerifyOptions{Deep: true})
	if err != nil || !after.OK() || after.Digest != v.Digest {
		t.Fatalf("verify after gc: %+v, %v; want the digest %s", after, err, v.Digest)
	}
	hits, err := ix.Search(ctx, "wombat", &SearchOptions{K: 20})
	if err != nil || len(hits) != 9 {
		t.Fatalf("search after gc: %d hits, %v; want 9", len(hits), err)
	}
}
