package index

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/escurel/escurel/index/fts"
)

// The full-text merges a batch calls for run after IngestBatch returns
// (mergeAfter): they still happen, searches see every document meanwhile,
// and Close waits for them or skips them.
func TestMergeAfterIngest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	const batches = 3 * fts.MergeFactor
	for i := range batches {
		_, errs, err := ix.IngestBatch(ctx, []Input{{Source: fmt.Sprintf("/d/%d.txt", i), Data: []byte(fmt.Sprintf("zebra number%d\n", i))}})
		if err != nil || errs[0] != nil {
			t.Fatalf("batch %d: %v %v", i, err, errs)
		}
		hits, err := ix.Search(ctx, "zebra", &SearchOptions{K: batches})
		if err != nil || len(hits) != i+1 {
			t.Fatalf("after batch %d: %d hits, %v", i, len(hits), err)
		}
	}
	// One segment per batch unless merged: the merges ran in the
	// background.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := ix.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.FullText.Segments < fts.MergeFactor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d segments after %d batches: no merge ran", st.FullText.Segments, batches)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A write right before Close: Close waits for its merge or skips it,
	// and reports no error.
	if _, _, err := ix.IngestBatch(ctx, []Input{{Source: "/d/last.txt", Data: []byte("zebra last\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err == nil {
		defer ix.Close()
		var hits []Hit
		hits, err = ix.Search(ctx, "zebra", &SearchOptions{K: 2 * batches})
		if err == nil && len(hits) != batches+1 {
			t.Errorf("reopened: %d hits, want %d", len(hits), batches+1)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}
