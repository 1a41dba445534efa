package blobstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// A pack stored by storePackFile whose rename succeeded and whose fsync
// of packs/ failed is not left hidden from this Store's listings: the file
// is in packs/, every other Store (and this one reopened) reads it, so
// this one's next listing indexes it too (review 14c, found with this
// test: it stayed hidden for good, and this Store read an older record
// than a reopened one, and folded that older record above the newer).
func TestHiddenNotLeakedOnSyncDirError(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	src := "/doc"
	id, err := s.Put(ctx, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutRecord(ctx, testRecord(src, id, "v1")); err != nil {
		t.Fatal(err)
	}
	packs := filepath.Join(dir, "packs")
	failOnce := func() {
		syncDirFault = func(d string) error {
			if d != packs {
				return nil
			}
			syncDirFault = nil
			return errors.New("injected: fsync packs/")
		}
	}
	defer func() { syncDirFault = nil }()

	// writePack (PutRecord): the pack is renamed into packs/, then fails.
	failOnce()
	if err := s.PutRecord(ctx, testRecord(src, id, "v2")); err == nil {
		t.Fatal("PutRecord with a failing fsync of packs/ succeeded")
	}
	// The next listing of this Store must index what is on disk: the
	// record as a reopened Store (another process) reads it.
	if err := s.loadPacks(ctx, true); err != nil {
		t.Fatal(err)
	}
	other := reopen(t, s)
	r1, err1 := s.GetRecord(ctx, DocID(src))
	r2, err2 := other.GetRecord(ctx, DocID(src))
	if err1 != nil || err2 != nil || r1.Title != r2.Title {
		t.Errorf("this Store reads %+v, %v; a reopened one %+v, %v", r1, err1, r2, err2)
	}
	// A Repack of this Store folds the record it reads (v1) into a pack of
	// a higher sequence number than the hidden one: every other Store
	// read v2 before, and reads v1 after.
	putSmall(t, s, "/small", 3, "v1")
	if _, err := s.Repack(ctx, RepackOptions{MinDead: 2, FoldBelow: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	r3, err3 := reopen(t, s).GetRecord(ctx, DocID(src))
	if err2 == nil && (err3 != nil || r3.Title != r2.Title) {
		t.Errorf("another Store read %s before this Store's Repack, %+v, %v after", r2.Title, r3, err3)
	}
	// rewritePacks (Repack): its replacement pack is hidden likewise.
	putSmall(t, s, "/more", 3, "v1")
	failOnce()
	if _, err := s.Repack(ctx, RepackOptions{MinDead: 2, FoldBelow: 1 << 20}); err == nil {
		t.Fatal("Repack with a failing fsync of packs/ succeeded")
	}
	if err := s.loadPacks(ctx, true); err != nil {
		t.Fatal(err)
	}
	s.px.mu.RLock()
	var leaked []string
	for name := range s.px.hidden {
		leaked = append(leaked, name)
	}
	s.px.mu.RUnlock()
	if len(leaked) > 0 {
		t.Errorf("names hidden after the failed publications, never to be indexed by this Store: %v", leaked)
	}
}
