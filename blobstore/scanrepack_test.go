package blobstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A reader Store's ScanRecords (a rebuild's plan on another index
// of the bucket) while the writer's GC/Purge rewrites packs: the listing
// names a pack, the Repack removes it, and the read fails with "rewritten
// meanwhile?" instead of listing again (reviewer 5, finding 4): it lists
// again now.
func TestScanRecordsDuringRepack(t *testing.T) {
	ctx := context.Background()
	w, _ := packedFileStore(t)
	r := reopen(t, w)
	put := func(src, title string) {
		b := w.NewBatch()
		id, _ := b.Put(ctx, []byte(src+title))
		b.PutRecord(ctx, testRecord(src, id, title))
		if err := b.Sync(ctx); err != nil {
			t.Error(err)
		}
	}
	for i := range 20 {
		put(fmt.Sprintf("/d/%d", i), "v0")
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			put(fmt.Sprintf("/d/%d", i%20), fmt.Sprintf("v%d", i))
			if _, err := w.Repack(ctx, RepackOptions{MinDead: 0}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	fails := 0
	deadline := time.Now().Add(3 * time.Second)
	var first error
	n := 0
	for time.Now().Before(deadline) {
		n++
		if _, _, err := r.ScanRecords(ctx); err != nil {
			fails++
			if first == nil {
				first = err
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d scans", n)
	if fails > 0 {
		t.Errorf("%d of %d ScanRecords failed while the writer repacked: %v", fails, n, first)
	}
}
