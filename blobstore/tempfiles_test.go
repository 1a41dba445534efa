package blobstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TempFiles lists what a crash leaves (a batch's pack before its rename,
// a staged or driver's file, LAYOUT's) and never a temporary file of a
// batch under way in this process, which Purge and GC would otherwise
// remove before its Sync renames it (reviewer 5, finding 2). Nor another
// program's *.tmp in the store's root (finding 9).
func TestTempFilesLeavesLiveWritesAndOthersFiles(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	// A batch under way: flushed (its pack is packs/<hex>.pack.tmp), not
	// synced.
	b := s.NewBatch()
	id, err := b.Put(ctx, []byte("live"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutRecord(ctx, testRecord("/live", id, "t")); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	live, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack.tmp"))
	if len(live) != 1 {
		t.Fatalf("the flushed batch's pack: %q, want one", live)
	}
	crashed := []string{
		filepath.Join(dir, "packs", "0123456789abcdef.pack.tmp"),
		filepath.Join(dir, "packs", "multi-pack-index.18c2f3a4b5.tmp"),
		filepath.Join(dir, "documents", DocID("/x")+".json.1a2b.tmp"),
		filepath.Join(dir, "LAYOUT.0a1b2c3d4e5f6071.tmp"),
	}
	others := []string{
		filepath.Join(dir, "notes.tmp"),
		filepath.Join(dir, "LAYOUT.tmp"),
		filepath.Join(dir, "backup.LAYOUT.tmp"),
	}
	for _, p := range append(slices.Clone(crashed), others...) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmps, err := s.TempFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tmps {
		got = append(got, f.Path)
	}
	slices.Sort(got)
	slices.Sort(crashed)
	if !slices.Equal(got, crashed) {
		t.Errorf("TempFiles = %q, want %q", got, crashed)
	}
	if err := s.RemoveTemp(live[0]); err == nil {
		t.Error("RemoveTemp removed a live batch's pack")
	}
	if err := s.RemoveTemp(others[0]); err == nil {
		t.Error("RemoveTemp removed another program's file")
	}
	for _, p := range got {
		if err := s.RemoveTemp(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatalf("the batch's Sync after the temporary files' removal: %v", err)
	}
	if _, err := reopen(t, s).GetRecord(ctx, DocID("/live")); err != nil {
		t.Fatal(err)
	}
	for _, p := range others {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("another program's file: %v", err)
		}
	}
	// Once synced, nothing of the store is recorded as under way.
	liveTemps.Lock()
	n := 0
	for p := range liveTemps.m {
		if strings.HasPrefix(p, dir) {
			n++
		}
	}
	for p := range liveTemps.writes {
		if strings.HasPrefix(p, dir) {
			n++
		}
	}
	liveTemps.Unlock()
	if n != 0 {
		t.Errorf("%d temporary files still recorded as under way", n)
	}
}
