package blobstore

import (
	"context"
	"errors"
	"os"
	"testing"
)

// Repack checks each entry's CRC before it copies it into the new pack:
// damage that came after the caller's Records check stops the rewrite
// with ErrCorrupt, and the damaged pack stays (reviewer 5, finding 10).
// Before, the damaged bytes were sealed with a fresh CRC.
func TestRepackRefusesDamagedEntry(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	b := s.NewBatch()
	id, _ := b.Put(ctx, []byte("kept"))
	for _, src := range []string{"/a", "/b"} {
		if err := b.PutRecord(ctx, testRecord(src, id, "v1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// /b again: the first pack now has a dead entry, so MinDead 0
	// rewrites it, copying /a's record.
	if err := s.PutRecord(ctx, testRecord("/b", id, "v2")); err != nil {
		t.Fatal(err)
	}
	packs := packFiles(t, dir)
	first := packs[0]
	k, _ := docKeyBytes(DocID("/a"))
	x := s.px
	x.mu.RLock()
	e, ok := x.recs.lookup(&k, x.packs)
	x.mu.RUnlock()
	if !ok {
		t.Fatal("no entry for /a")
	}
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	data[e.off+e.n/2] ^= 0x01 // a bit flipped inside /a's record
	if err := os.WriteFile(first, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Repack(ctx, RepackOptions{MinDead: 0})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Repack over a damaged entry: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(first); err != nil {
		t.Errorf("the damaged pack was removed: %v", err)
	}
	if len(packFiles(t, dir)) != len(packs) {
		t.Errorf("packs %q after the failed Repack, want %q", packFiles(t, dir), packs)
	}
	if _, err := reopen(t, s).GetRecord(ctx, DocID("/a")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetRecord of the damaged record: %v, want ErrCorrupt", err)
	}
}
