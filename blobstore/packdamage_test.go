package blobstore

import (
	"context"
	"errors"
	"os"
	"testing"
)

// A pack that could not be read (a short read) and reads at a later
// listing stops failing every GetRecord, in the same Store.
func TestPackDamageClearsWhenThePackReadsAgain(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	bid, _ := s.Put(ctx, []byte("x"))
	rec := testRecord("/doc", bid, "")
	if err := s.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	packs := packFiles(t, dir)
	last := packs[len(packs)-1]
	good, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(last, good[:len(good)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	r := reopen(t, s)
	if _, err := r.GetRecord(ctx, rec.DocID); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetRecord with its pack damaged: %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(last, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, damaged, err := r.ScanRecords(ctx); err != nil || len(damaged) != 0 {
		t.Fatalf("ScanRecords once the pack reads again: damaged %+v, %v", damaged, err)
	}
	if got, err := r.GetRecord(ctx, rec.DocID); err != nil || got.Source != "/doc" {
		t.Errorf("GetRecord once the pack reads again: %+v, %v", got, err)
	}
}

// A Repack (GC, Purge, DeleteBlob) between RemoveRecord and SyncRemovals
// rewrites the record's pack with the still-live record: that copy is no
// newer write, and must not cancel the pending removal.
func TestPackRepackKeepsPendingRemoval(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	b := s.NewBatch()
	keep, _ := b.Put(ctx, []byte("kept"))
	gone, _ := b.Put(ctx, []byte("orphan"))
	rec := testRecord("/doc", keep, "")
	if err := b.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRecord(ctx, rec.DocID); err != nil {
		t.Fatal(err)
	}
	res, err := s.Repack(ctx, RepackOptions{DropBlobs: []string{gone}, MinDead: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rewritten != 1 {
		t.Fatalf("Repack = %+v: the record's pack was not rewritten, the test proves nothing", res)
	}
	if _, err := s.GetRecord(ctx, rec.DocID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRecord between RemoveRecord and SyncRemovals, after a Repack: %v, want ErrNotFound", err)
	}
	if err := s.SyncRemovals(); err != nil {
		t.Fatal(err)
	}
	if _, err := reopen(t, s).GetRecord(ctx, rec.DocID); err == nil {
		t.Errorf("RemoveRecord + SyncRemovals returned nil, a Repack ran between them, and the record is still stored")
	}
}
