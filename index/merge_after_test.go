package index

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/escurel/escurel/index/fts"
)

// The full-text merges a batch calls for run after IngestBatch returns
// (mergeAfter): they still happen, searches see every document meanwhile,
// and Close runs one still pending.
func TestMergeAfterIngest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Index {
		ix, err := Open(ctx, dir, &Options{BlobURL: "mem://"})
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	segments := func(ix *Index) int {
		st, err := ix.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.FullText.Segments
	}
	n := 0
	ingest := func(ix *Index, batches int) {
		for range batches {
			_, errs, err := ix.IngestBatch(ctx, []Input{{Source: fmt.Sprintf("/d/%d.txt", n), Data: []byte(fmt.Sprintf("zebra number%d\n", n))}})
			if err != nil || errs[0] != nil {
				t.Fatalf("batch %d: %v %v", n, err, errs)
			}
			n++
			hits, err := ix.Search(ctx, "zebra", &SearchOptions{K: 100})
			if err != nil || len(hits) != n {
				t.Fatalf("after batch %d: %d hits, %v", n, len(hits), err)
			}
		}
	}

	// One block a batch, so one tier-0 segment a batch: the 30th batch
	// calls for a merge of ten, which Close runs if the background has
	// not.
	ix := open()
	ingest(ix, 3*fts.MergeFactor)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = open()
	defer ix.Close()
	if got := segments(ix); got >= fts.MergeFactor {
		t.Errorf("reopened: %d segments after %d batches: the last merge did not run", got, n)
	}

	// Without Close, the merges run in the background.
	ingest(ix, fts.MergeFactor)
	deadline := time.Now().Add(20 * time.Second)
	for segments(ix) >= fts.MergeFactor {
		if time.Now().After(deadline) {
			t.Fatalf("%d segments after %d batches: no merge ran", segments(ix), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitForMerges leaves no merge pending: the segments a batch's merge
// would leave are there when it returns, without waiting on the
// background, and it reports ErrClosed after Close.
func TestWaitForMerges(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitForMerges(ctx); err != nil {
		t.Fatalf("nothing pending: %v", err)
	}
	for n := range fts.MergeFactor {
		if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: fmt.Sprintf("/d/%d.txt", n), Data: []byte(fmt.Sprintf("zebra number%d\n", n))}}); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
	if err := ix.WaitForMerges(ctx); err != nil {
		t.Fatal(err)
	}
	ix.writeMu.Lock()
	pending := ix.mergePending
	ix.writeMu.Unlock()
	st, err := ix.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pending || st.FullText.Segments >= fts.MergeFactor {
		t.Errorf("after WaitForMerges: pending %v, %d segments", pending, st.FullText.Segments)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitForMerges(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
