package blobstore

import (
	"context"
	"errors"
	"testing"
)

// Two Stores that write to one bucket (two index directories on one
// blob store: nothing refuses it). nextSeq refreshes the pack list first
// (reviewer 5, finding 3): before, it loaded them on first use, so a Store that listed before the other wrote numbers its next
// pack below the other's: its later removal of a document loses to the
// other's earlier record, and a fresh Store reads the deleted document as
// present. (In the loose layout the later write wins.) The contract is
// still one writing index per blob store; this keeps the order sound
// for writes that follow each other.
func TestSecondWriterSeqAboveListedPacks(t *testing.T) {
	ctx := context.Background()
	a, _ := packedFileStore(t)
	b := reopen(t, a)
	put := func(s *Store, src, title string) {
		t.Helper()
		bt := s.NewBatch()
		id, err := bt.Put(ctx, []byte(src+title))
		if err != nil {
			t.Fatal(err)
		}
		if err := bt.PutRecord(ctx, testRecord(src, id, title)); err != nil {
			t.Fatal(err)
		}
		if err := bt.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put(a, "/other", "x")
	if _, err := b.GetRecord(ctx, DocID("/other")); err != nil { // b lists the packs now
		t.Fatal(err)
	}
	put(a, "/secret", "v1")
	put(a, "/secret", "v2")
	// b deletes /secret after a wrote it, without reading it first.
	if err := b.DeleteRecord(ctx, DocID("/secret")); err != nil {
		t.Fatal(err)
	}
	c := reopen(t, a)
	if rec, err := c.GetRecord(ctx, DocID("/secret")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a document deleted after its last write reads as present: %+v, %v", rec, err)
	}
}
