package tests

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
)

// A purge on an index of the FastAPI pages, after a rebuild (two
// generations): one document erased, the others served, verify passes,
// one generation left; the time and the bytes are logged (the figures of
// the purge's report).
func TestPurgeFastAPI(t *testing.T) {
	e := newEnv(t, index.Options{})
	n := fastAPI(e)
	e.rebuild(index.Options{})
	src, err := filepath.EvalSymlinks(filepath.Join(sharedData(t, "markdown/fastapi"), "tutorial", "path-params.md"))
	if err != nil {
		t.Skipf("path-params.md: %v", err)
	}
	before := len(e.search("path parameters", 10))
	res, err := e.ix.Purge(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Documents) != 1 || len(res.Blobs) != 1 || len(res.Dropped) != 2 {
		t.Fatalf("purge: %+v", res)
	}
	t.Logf("purge of 1 of %d documents: %s; blob %d B, new generation %s %.1f MB, dropped %v %.1f MB, reclaimed %.1f MB",
		n, res.Elapsed, res.BlobBytes, res.Generation, float64(res.FileBytes)/1e6, res.Dropped, float64(res.DroppedBytes)/1e6, float64(res.Reclaimed())/1e6)
	if gens, _ := layout.Generations(e.dir); len(gens) != 1 || gens[0] != res.Generation {
		t.Errorf("generations after the purge: %v", gens)
	}
	for _, h := range e.search("path parameters", 10) {
		if h.Source == src {
			t.Errorf("the purged document is still found: %+v", h)
		}
	}
	if before == 0 || len(e.search("path parameters", 10)) == 0 {
		t.Errorf("the other documents: %d hits before, none after", before)
	}
	e.digest() // verify passes
	e.reopen()
	if got := e.ix.Generation(); got != res.Generation {
		t.Errorf("reopened on %s, want %s", got, res.Generation)
	}
}
