package blobstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A Repack (an Index's fold of small packs, under its writer lock) that
// runs while a batch publishes its pack without that lock, after the
// rename and before the batch indexes it, leaves that pack alone: listed
// then, it was folded away and then indexed again by its batch, a ghost
// in memory naming a file that no longer exists (review 14). And a pack
// Repack removes is not indexed again by a listing before its delete.
func TestNoGhostPacks(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	want := map[string]string{}
	for _, src := range putSmall(t, s, "/small", 5, "v1") { // small packs to fold
		want[DocID(src)] = "v1"
	}
	folded := 0
	packPublished = func(name string) {
		packPublished = nil
		res, err := s.Repack(ctx, RepackOptions{MinDead: 2, FoldBelow: 1 << 20})
		if err != nil {
			t.Error(err)
		}
		folded = res.Folded
	}
	defer func() { packPublished = nil }()
	b := s.NewBatch()
	id, err := b.Put(ctx, []byte("/late"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutRecord(ctx, testRecord("/late", id, "v1")); err != nil {
		t.Fatal(err)
	}
	want[DocID("/late")] = "v1"
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if folded == 0 {
		t.Fatal("the fold during the publication folded nothing")
	}
	s.px.mu.RLock()
	for _, p := range s.px.packs {
		if p.gone {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "packs", p.name)); err != nil {
			t.Errorf("pack %s indexed, but its file: %v", p.name, err)
		}
	}
	s.px.mu.RUnlock()
	checkAll(t, s, want)
	checkAll(t, reopen(t, s), want)
}
