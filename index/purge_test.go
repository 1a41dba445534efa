package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/layout"
)

// Searches run while a purge rewrites and switches the generation: none
// fails or sees the purged document after Purge returns, and the old
// generation is removed once they have left it. Run with -race.
func TestPurgeWhileSearching(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://", Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i := range 20 {
		if _, err := ix.Ingest(ctx, Input{Source: fmt.Sprintf("/d%02d.md", i), Data: []byte(fmt.Sprintf("# D%d\n\ncommon words and unique%d\n", i, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.Ingest(ctx, Input{Source: "/gone.md", Data: []byte("# Gone\n\ncommon words and vanishing\n")}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := ix.Search(ctx, "common words", &SearchOptions{K: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	res, err := ix.Purge(ctx, "/gone.md")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("search during the purge: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if hits, _ := ix.Search(ctx, "vanishing", nil); len(hits) != 0 {
		t.Errorf("the purged document is found: %+v", hits)
	}
	if gens, _ := layout.Generations(dir); len(gens) != 1 || gens[0] != res.Generation || ix.Generation() != res.Generation {
		t.Errorf("generations %v, live %s, purge %+v", gens, ix.Generation(), res)
	}
	// The index takes writes on the new generation.
	if _, err := ix.Ingest(ctx, Input{Source: "/new.md", Data: []byte("# New\n\nfresh text\n")}); err != nil {
		t.Fatal(err)
	}
	// A name that matches nothing: an error, after the erasure ran.
	res, err = ix.Purge(ctx, "/never.md")
	if !errors.Is(err, errNoDocument) || res.Generation == "" {
		t.Errorf("purge of an unknown name: %+v, %v", res, err)
	}
}
