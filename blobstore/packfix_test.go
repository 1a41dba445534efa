package blobstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packFiles lists the pack files under dir, in name (sequence) order.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range files(t, dir) {
		if strings.HasPrefix(f, "packs/") && strings.HasSuffix(f, ".pack") {
			out = append(out, filepath.Join(dir, f))
		}
	}
	return out
}

// A blob of packLooseMin bytes or more is written loose even by a store
// that had no loose blobs when it was opened; Repack(DropBlobs), the path
// of DeleteBlob, GC and Purge, must still erase it and count it.
func TestPackRepackErasesLargeLooseBlob(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	big := bytes.Repeat([]byte("secret pdf "), packLooseMin/10)
	b := s.NewBatch()
	id, err := b.Put(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	key, _ := BlobKey(id)
	if _, err := os.Stat(filepath.Join(dir, key)); err != nil {
		t.Fatalf("the large blob is not loose (%v): the test proves nothing", err)
	}
	res, err := s.Repack(ctx, RepackOptions{DropBlobs: []string{id}, MinDead: 0})
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsDropped != 1 {
		t.Errorf("BlobsDropped = %d, want 1", res.BlobsDropped)
	}
	if _, err := s.Get(ctx, id); err == nil {
		t.Errorf("Repack(DropBlobs) = %+v, nil; the %d-byte blob still reads; files: %v", res, len(big), files(t, dir))
	}
	if _, err := os.Stat(filepath.Join(dir, key)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the loose file %s is still on disk (%v)", key, err)
	}
	// The same through DeleteBlob, on a second large blob.
	big2 := append(big, '!')
	id2, err := s.Put(ctx, big2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBlob(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if _, err := reopen(t, s).Get(ctx, id2); err == nil {
		t.Errorf("DeleteBlob returned nil, and a reopened store still reads the %d-byte blob", len(big2))
	}
}

// A removal while the pack holding the record cannot be read must still
// write a tombstone (fail closed): when the pack reads again, the removed
// record stays removed.
func TestPackRemoveWhilePackDamagedStaysRemoved(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	bid, _ := s.Put(ctx, []byte("x"))
	rec := testRecord("/secret", bid, "")
	rec.Sensitivity = "restricted"
	if err := s.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	packs := packFiles(t, dir)
	last := packs[len(packs)-1] // the record's pack
	good, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(last, good[:len(good)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, s)
	if _, err := s2.GetRecord(ctx, rec.DocID); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetRecord with its pack damaged: %v, want ErrCorrupt", err)
	}
	if err := s2.RemoveRecord(ctx, rec.DocID); err != nil {
		t.Fatalf("RemoveRecord: %v", err)
	}
	if err := s2.SyncRemovals(); err != nil {
		t.Fatalf("SyncRemovals: %v", err)
	}
	if err := os.WriteFile(last, good, 0o600); err != nil { // the pack reads again
		t.Fatal(err)
	}
	if got, err := reopen(t, s).GetRecord(ctx, rec.DocID); err == nil {
		t.Errorf("a record removed (RemoveRecord+SyncRemovals returned nil) is back once its pack reads again: %+v", got)
	}
}

// A blob packed twice (two batches prepared before either synced, as
// concurrent ingests do): DeleteBlob must rewrite both packs, or the
// other copy reads again, in this process or after a reopen.
func TestPackDeleteBlobErasesEveryCopy(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	a, b := s.NewBatch(), s.NewBatch()
	data := []byte("one blob, two batches")
	id, err := a.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, data); err != nil {
		t.Fatal(err)
	}
	// Each pack also holds a live record, so neither is all dead.
	if err := a.PutRecord(ctx, testRecord("/a", id, "")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutRecord(ctx, testRecord("/b", id, "")); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Repack(ctx, RepackOptions{DropBlobs: []string{id}, MinDead: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsDropped != 1 || res.Rewritten != 2 {
		t.Errorf("Repack = %+v: want 1 blob dropped (one id, two copies), 2 packs rewritten", res)
	}
	if _, err := s.Get(ctx, id); err == nil {
		t.Errorf("Repack(DropBlobs) returned nil but Get still reads the blob")
	}
	r := reopen(t, s)
	if _, err := r.Get(ctx, id); err == nil {
		t.Errorf("reopened: the blob's second copy is still there")
	}
	for _, src := range []string{"/a", "/b"} {
		if _, err := r.GetRecord(ctx, DocID(src)); err != nil {
			t.Errorf("record %s lost by the rewrite: %v", src, err)
		}
	}
}

// A record staged twice in one batch: the pack holds only the last
// version's bytes, not the first's as unindexed garbage that no Repack
// (nor Purge) could see.
func TestPackBatchRestagedRecordLeavesNoGarbage(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	b := s.NewBatch()
	bid, err := b.Put(ctx, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	first := testRecord("/doc", bid, "first title zebra-secret")
	if err := b.PutRecord(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := b.PutRecord(ctx, testRecord("/other", bid, "other")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutRecord(ctx, testRecord("/doc", bid, "second title")); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	packs := packFiles(t, dir)
	if len(packs) != 1 {
		t.Fatalf("packs %v: want the batch's one", packs)
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("zebra-secret")) {
		t.Errorf("the pack still holds the replaced record version's bytes")
	}
	r := reopen(t, s)
	for src, title := range map[string]string{"/doc": "second title", "/other": "other"} {
		got, err := r.GetRecord(ctx, DocID(src))
		if err != nil || got.Title != title {
			t.Errorf("GetRecord(%s) = %+v, %v; want title %q", src, got, err, title)
		}
	}
	if got, err := r.Get(ctx, bid); err != nil || string(got) != "body" {
		t.Errorf("Get(blob) = %q, %v", got, err)
	}
}
