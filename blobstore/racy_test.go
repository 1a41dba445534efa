package blobstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A directory time with no sub-second part (a file system that keeps
// whole seconds, or two: FAT, exFAT, SMB, NFS of ext3) does not vouch for
// a listing that started less than two seconds after it: a pack added
// later in the same tick leaves it unchanged (reviewer 5, finding 7).
func TestVouchesCoarseTimes(t *testing.T) {
	fine := time.Date(2026, 12, 2, 1, 0, 0, 123456789, time.UTC)
	coarse := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		mod   time.Time
		after time.Duration
		want  bool
	}{
		{fine, 10 * time.Millisecond, false},
		{fine, 60 * time.Millisecond, true},
		{coarse, 60 * time.Millisecond, false},
		{coarse, 1500 * time.Millisecond, false},
		{coarse, 2100 * time.Millisecond, true},
	} {
		if got := vouches(c.mod, c.mod.Add(c.after)); got != c.want {
			t.Errorf("vouches(%v, +%v) = %v, want %v", c.mod, c.after, got, c.want)
		}
	}
}

// The same on a store: packs/ given a whole-second time, as a coarse file
// system would keep it, and a second Store's pack added within that
// second with the time put back; a reader that listed 1 s after that time
// still sees the new pack at its next point read.
func TestSecondStoreSeesPackOnCoarseClock(t *testing.T) {
	ctx := context.Background()
	w, dir := packedFileStore(t)
	id, err := w.Put(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.PutRecord(ctx, testRecord("/one", id, "t")); err != nil {
		t.Fatal(err)
	}
	packs := filepath.Join(dir, "packs")
	tick := time.Now().Truncate(time.Second).Add(-time.Second)
	if err := os.Chtimes(packs, tick, tick); err != nil {
		t.Fatal(err)
	}
	r := reopen(t, w)
	if _, err := r.GetRecord(ctx, DocID("/one")); err != nil { // r lists now, about 1 s after the tick
		t.Fatal(err)
	}
	if err := w.PutRecord(ctx, testRecord("/two", id, "t")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(packs, tick, tick); err != nil { // the same tick
		t.Fatal(err)
	}
	if _, err := r.GetRecord(ctx, DocID("/two")); err != nil {
		t.Errorf("a pack added in the directory time's tick is not seen: %v", err)
	}
}
