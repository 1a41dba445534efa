package index

import (
	"context"
	"fmt"
	"testing"
)

// The doc id set is not read by the first large batch (which looks its
// ids up in the database) but by the second; the statuses are right
// either way, and the set, once read, counts every document.
func TestDocSetLoadedBySecondLargeBatch(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	n := docSetMinBatch + 6
	batch := func(from int, version string) []Input {
		var ins []Input
		for i := from; i < from+n; i++ {
			ins = append(ins, Input{Source: fmt.Sprintf("/d%03d.txt", i), Data: []byte(fmt.Sprintf("document %d %s", i, version))})
		}
		return ins
	}
	loaded := func() bool {
		s := ix.cur.Load()
		s.docs.mu.Lock()
		defer s.docs.mu.Unlock()
		return s.docs.loaded
	}
	check := func(stage string, res []Result, errs []error, err error, want func(i int) Status) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		for i, r := range res {
			if errs[i] != nil || r.Status != want(i) {
				t.Fatalf("%s: %s %s (%v), want %s", stage, r.Source, r.Status, errs[i], want(i))
			}
		}
	}
	res, errs, err := ix.IngestBatch(ctx, batch(0, "v1"))
	check("first batch", res, errs, err, func(int) Status { return Added })
	if loaded() {
		t.Fatal("the first large batch read the doc id set")
	}
	// Half of these are new, half replace the first batch's.
	res, errs, err = ix.IngestBatch(ctx, batch(n/2, "v2"))
	check("second batch", res, errs, err, func(i int) Status {
		if i < n-n/2 {
			return Replaced
		}
		return Added
	})
	if !loaded() {
		t.Fatal("the second large batch did not read the doc id set")
	}
	res, errs, err = ix.IngestBatch(ctx, batch(0, "v3"))
	check("third batch", res, errs, err, func(int) Status { return Replaced })
	s := ix.cur.Load()
	s.docs.mu.Lock()
	held := 0
	for _, c := range s.docs.n {
		held += int(c)
	}
	s.docs.mu.Unlock()
	if want := n + n/2; held != want {
		t.Errorf("doc id set counts %d documents, want %d", held, want)
	}
}
