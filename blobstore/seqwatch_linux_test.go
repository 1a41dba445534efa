//go:build linux

package blobstore

import (
	"context"
	"errors"
	"testing"
)

// A Store that has written (its watch of packs/ set up, seqWatch) numbers
// its next pack above the packs another Store wrote since, which it never
// lists: their renames reach it through the watch. Else b's removal of
// /secret would take the number of a's first write of it, or one below
// a's second, and a fresh Store would read the deleted document as
// present (TestSecondWriterSeqAboveListedPacks is the same before b's
// first write). It also checks that the watch, not a listing, gave b's
// number (no directory read: seqListed), and that a dropped watch (an
// overflowed queue) is replaced, with one listing.
func TestSecondWriterSeqAboveWatchedPacks(t *testing.T) {
	ctx := context.Background()
	a, _ := packedFileStore(t)
	b := reopen(t, a)
	put := func(s *Store, src, title string) {
		t.Helper()
		if err := s.PutRecord(ctx, testRecord(src, BlobID([]byte(src)), title)); err != nil {
			t.Fatal(err)
		}
	}
	put(b, "/first", "b") // b's watch set up, packs/ listed once
	if b.seqw.fd < 0 {
		t.Skip("no inotify watch of packs/ here (not a local file system, or inotify unavailable)")
	}
	put(a, "/secret", "v1")
	put(a, "/secret", "v2")
	listed := 0
	seqListed = func() { listed++ }
	defer func() { seqListed = nil }()
	if err := b.RemoveRecord(ctx, DocID("/secret")); err != nil {
		t.Fatal(err)
	}
	seqw := b.seqw
	if err := b.SyncRemovals(); err != nil {
		t.Fatal(err)
	}
	if seqw.fd < 0 || listed != 0 {
		t.Fatalf("b's number not from its watch: watch %d, %d listings", seqw.fd, listed)
	}
	c := reopen(t, a)
	if rec, err := c.GetRecord(ctx, DocID("/secret")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a document deleted after its last write reads as present: %+v, %v", rec, err)
	}
	// Overflow or a removed watch: dropped, and the next number comes
	// from a listing again.
	seqw.mu.Lock()
	seqw.stop()
	seqw.mu.Unlock()
	put(a, "/secret", "v3")
	if err := b.DeleteRecord(ctx, DocID("/secret")); err != nil {
		t.Fatal(err)
	}
	if seqw.fd < 0 || listed != 1 {
		t.Errorf("after a dropped watch: watch %d, %d listings (want a new watch, one listing)", seqw.fd, listed)
	}
	d := reopen(t, a)
	if rec, err := d.GetRecord(ctx, DocID("/secret")); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a dropped watch, a deleted document reads as present: %+v, %v", rec, err)
	}
}
