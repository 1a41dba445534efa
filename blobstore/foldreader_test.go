package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
)

// A second Store (another process: a CLI verify, a rebuild into another
// directory) that lists packs/ while the writer's Repack folds the small
// packs. Its listing can come before the folded pack is renamed into
// place, and its read of a listed small pack after that pack was
// removed: it lists again, and so finds the folded pack (review 14,
// found with this test: it dropped the vanished pack and knew neither,
// so the small packs' tombstones were missed and deleted documents read
// as present, without an error).
func TestFoldWhileSecondStoreLoads(t *testing.T) {
	ctx := context.Background()
	const docs = 300
	bad := 0
	iters := 20
	for it := range iters {
		dir := filepath.Join(t.TempDir(), "blobs")
		u := (&url.URL{Scheme: "file", Path: dir}).String()
		if err := UsePacks(ctx, u); err != nil {
			t.Fatal(err)
		}
		w, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		id, err := w.Put(ctx, []byte("shared blob"))
		if err != nil {
			t.Fatal(err)
		}
		b := w.NewBatch()
		for i := range docs {
			if err := b.PutRecord(ctx, testRecord(fmt.Sprintf("/doc/%d", i), id, "v1")); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range docs { // a pack of one tombstone each
			if err := w.DeleteRecord(ctx, DocID(fmt.Sprintf("/doc/%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var repackErr error
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			_, repackErr = w.Repack(ctx, RepackOptions{MinDead: 2, FoldBelow: 4096})
		}()
		// Fresh Stores (a process opening the store) list and load the
		// packs, again and again while the fold runs.
		for reading := true; reading; {
			select {
			case <-done:
				reading = false
			default:
			}
			r, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := r.Records(ctx)
			r.Close()
			if err == nil && len(recs) != 0 {
				bad++
				t.Logf("iteration %d: a second Store listed %d records of %d deleted documents while the writer folded", it, len(recs), docs)
			}
		}
		wg.Wait()
		if repackErr != nil {
			t.Fatal(repackErr)
		}
		w.Close()
	}
	if bad > 0 {
		t.Errorf("%d of %d iterations: deleted documents read as present by a second Store during a fold", bad, iters)
	}
}
