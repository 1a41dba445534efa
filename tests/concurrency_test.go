package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/escurel/escurel/index"
)

// Searches running during re-ingests, in every mode, see each version of a
// document whole: never blocks of two versions at once, never an error. The
// dense leg's in-memory vectors change with the transaction.
func TestSearchDuringIngest(t *testing.T) {
	e := newEnv(t, index.Options{})
	version := func(v int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "# Doc\n\n")
		for s := 0; s < 5; s++ {
			fmt.Fprintf(&b, "## Section %d\n\nmarker version%d section %d\n\n", s, v, s)
		}
		return b.String()
	}
	e.ingest("/doc.md", version(0))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for _, mode := range []string{index.ModeBM25, index.ModeDense, index.ModeHybrid} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				hits, err := e.ix.Search(ctx, "marker", &index.SearchOptions{K: 10, Mode: mode})
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				if len(hits) != 5 {
					errs <- fmt.Errorf("%s search %d: %d hits, want 5", mode, n, len(hits))
					return
				}
				v := strings.Fields(hits[0].Body)[1]
				for _, h := range hits {
					if got := strings.Fields(h.Body)[1]; got != v {
						errs <- fmt.Errorf("%s search %d mixes %s and %s", mode, n, v, got)
						return
					}
				}
			}
		}()
	}
	for v := 1; v <= 30; v++ {
		e.ingest("/doc.md", version(v))
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
