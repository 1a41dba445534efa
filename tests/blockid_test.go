package tests

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rebuild"
)

var blockIDQueries = []string{
	"path parameters", "dependency injection", "OAuth2 password bearer", "background tasks",
	"CORS middleware", "request body pydantic model", "query parameters validation", "response model",
	"websockets", "testing with TestClient", "async await concurrency", "JWT tokens security",
	"static files", "templates jinja2", "SQL databases", "upload files form data",
	"HTTPException error handling", "custom response headers", "mount sub applications", "deployment docker",
}

// Issue 14: a block id a caller stored names the same body after anything
// that keeps the document's bytes: re-ingest, rebuild, reembed, compaction,
// rollback, and a rebuild from the blob store alone into a fresh directory
// (which numbers the blocks in another order than the ingest did). The id
// of a changed or deleted document's block answers "no such block".
func TestBlockIDsAreStable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, index.Options{})
	pages := sharedData(t, "markdown/fastapi")
	if n := fastAPI(e); n < 100 {
		t.Fatalf("%d FastAPI pages ingested", n)
	}
	want := map[string]string{}     // block id → body
	sourceOf := map[string]string{} // block id → source
	for _, q := range blockIDQueries {
		hits := e.search(q, 10)
		if len(hits) == 0 {
			t.Fatalf("no hits for %q", q)
		}
		for _, h := range hits {
			if err := index.CheckBlockID(h.BlockID); err != nil {
				t.Fatal(err)
			}
			if body, ok := want[h.BlockID]; ok && body != h.Body {
				t.Fatalf("block %s has two bodies", h.BlockID)
			}
			want[h.BlockID], sourceOf[h.BlockID] = h.Body, h.Source
		}
	}
	t.Logf("%d distinct blocks from %d queries", len(want), len(blockIDQueries))
	check := func(ix *index.Index, stage string) {
		t.Helper()
		for id, body := range want {
			x, err := ix.Expand(ctx, id, &index.ExpandOptions{Before: -1, After: -1})
			if err != nil {
				t.Fatalf("%s: expand %s: %v", stage, id, err)
			}
			if x.Block.BlockID != id || x.Block.Body != body {
				t.Fatalf("%s: block %s names %q (id %s), want %q", stage, id, x.Block.Body, x.Block.BlockID, body)
			}
		}
		// And the searches give the same ids for the same bodies.
		for _, q := range blockIDQueries[:5] {
			hits, err := ix.Search(ctx, q, &index.SearchOptions{K: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hits {
				if body, ok := want[h.BlockID]; ok && body != h.Body {
					t.Fatalf("%s: search %q: block %s has body %q, want %q", stage, q, h.BlockID, h.Body, body)
				}
			}
		}
	}
	ingested := e.digest()

	// Re-ingest of the same bytes.
	sum, err := e.ix.IngestFiles(ctx, []string{pages}, index.IngestOptions{})
	if err != nil || sum.Added != 0 {
		t.Fatalf("re-ingest: %+v %v", sum, err)
	}
	check(e.ix, "re-ingest")

	// Rebuild: another processing order (doc id), so other internal numbers.
	if got := e.rebuild(index.Options{}); got.Verify.Digest != ingested {
		t.Errorf("rebuild digest %s, ingest %s", got.Verify.Digest, ingested)
	}
	check(e.ix, "rebuild")

	// Reembed with another dimension.
	e.ix.Close()
	if _, err := rebuild.Reembed(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e),
		Index: index.Options{Embedder: embed.Spec{Model: "hash", Dim: 64}}}); err != nil {
		t.Fatal(err)
	}
	e.open()
	check(e.ix, "reembed")

	// Compaction.
	if err := e.ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check(e.ix, "compact")

	// Rollback to the rebuilt generation (before the reembed).
	e.ix.Close()
	if _, _, err := index.Rollback(ctx, e.dir, nil); err != nil {
		t.Fatal(err)
	}
	e.open()
	check(e.ix, "rollback")

	// A rebuild from the blob store alone, into a fresh directory.
	e.ix.Close()
	store := blobsOf(e)
	fresh := t.TempDir()
	got, err := rebuild.Run(ctx, rebuild.Options{Dir: fresh, Blobs: store})
	if err != nil {
		t.Fatal(err)
	}
	if got.Verify.Digest != ingested {
		t.Errorf("fresh rebuild digest %s, ingest %s", got.Verify.Digest, ingested)
	}
	other, err := index.Open(ctx, fresh, &index.Options{Blobs: store})
	if err != nil {
		t.Fatal(err)
	}
	check(other, "fresh rebuild")
	other.Close()
	e.open()

	// A changed document: every old id of it names no block now.
	var changed, deleted string
	for _, src := range sourceOf {
		if changed == "" {
			changed = src
		} else if src != changed {
			deleted = src
			break
		}
	}
	data, err := os.ReadFile(changed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ix.Ingest(ctx, index.Input{Source: changed, Data: append([]byte("An added first line.\n\n"), data...)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ix.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	gone := 0
	for id, src := range sourceOf {
		if src != changed && src != deleted {
			continue
		}
		gone++
		_, err := e.ix.Expand(ctx, id, nil)
		if !errors.Is(err, index.ErrNotFound) || !strings.Contains(err.Error(), "no such block "+id+" (its document changed or was deleted)") {
			t.Errorf("block %s of %s after the change: %v", id, src, err)
		}
		delete(want, id)
	}
	if gone == 0 {
		t.Fatal("no block of the changed and deleted documents was among the hits")
	}
	check(e.ix, "after the change")
}
