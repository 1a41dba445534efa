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
