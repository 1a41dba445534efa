package index_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/rebuild"
)

// Index.Rollback switches the open index back to the previous generation
// without the directory's lock changing hands, refuses a generation that
// no longer matches the blob store unless forced, and refuses when there
// is nothing to roll back to.
func TestRollbackLive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, _, err := ix.Rollback(ctx, nil); err == nil || !strings.Contains(err.Error(), "nothing to roll back to") {
		t.Fatalf("rollback of the first generation: %v", err)
	}
	if _, err := ix.Ingest(ctx, index.Input{Source: "/a.md", Data: []byte("# A\n\nalpha apples\n")}); err != nil {
		t.Fatal(err)
	}
	first := ix.Generation()
	// A re-embed: the previous generation has another model, which the
	// rollback adopts.
	if _, err := rebuild.Reembed(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix, Index: index.Options{Embedder: embed.Spec{Model: "hash", Dim: 128}}}); err != nil {
		t.Fatal(err)
	}
	second := ix.Generation()
	if second == first {
		t.Fatal("the re-embed did not switch")
	}
	from, to, err := ix.Rollback(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if from != second || to != first || ix.Generation() != first {
		t.Errorf("rollback %s → %s, serving %s; want %s → %s", from, to, ix.Generation(), second, first)
	}
	if cur, _, _ := layout.Current(dir); cur != first {
		t.Errorf("CURRENT names %s, want %s", cur, first)
	}
	if dim := ix.Manifest().EmbedderDim; dim != 384 {
		t.Errorf("after the rollback the manifest has dimension %d, want the first generation's 384", dim)
	}
	hits, err := ix.Search(ctx, "apples", &index.SearchOptions{Mode: index.ModeHybrid})
	if err != nil || len(hits) != 1 {
		t.Fatalf("search after the rollback: %v %v", hits, err)
	}

	// A generation that lacks a document ingested since is stale.
	if _, err := rebuild.Run(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, index.Input{Source: "/b.md", Data: []byte("# B\n\nbeta bananas\n")}); err != nil {
		t.Fatal(err)
	}
	live := ix.Generation()
	_, _, err = ix.Rollback(ctx, nil)
	if !errors.Is(err, index.ErrStale) {
		t.Fatalf("rollback to a stale generation: %v, want ErrStale", err)
	}
	if ix.Generation() != live {
		t.Errorf("a refused rollback switched to %s", ix.Generation())
	}
	if _, to, err = ix.Rollback(ctx, &index.RollbackOptions{Force: true}); err != nil || ix.Generation() != to {
		t.Fatalf("forced rollback: %v, serving %s", err, ix.Generation())
	}
	if _, err := ix.Ingest(ctx, index.Input{Source: "/c.md", Data: []byte("# C\n\ncherries\n")}); err != nil {
		t.Fatalf("ingest after the rollback: %v", err)
	}
}

// A rollback, forced or not, live or by the package-level Rollback, never
// makes live a generation that ranks a document below the sensitivity its
// record has now: Force overrides staleness, never a downgrade.
func TestRollbackForceRefusesDowngrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	data := []byte("# Pay\n\nzqsalary figures\n")
	if _, err := ix.Ingest(ctx, index.Input{Source: "/pay.md", Data: data}); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Run(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix}); err != nil {
		t.Fatal(err)
	}
	// Raised since the previous generation was built.
	if _, err := ix.Ingest(ctx, index.Input{Source: "/pay.md", Data: data, Sensitivity: index.Restricted}); err != nil {
		t.Fatal(err)
	}
	live := ix.Generation()
	public := func() int {
		hits, err := ix.Search(ctx, "zqsalary", &index.SearchOptions{Clearance: index.Public})
		if err != nil {
			t.Fatal(err)
		}
		return len(hits)
	}
	for _, force := range []bool{false, true} {
		_, _, err := ix.Rollback(ctx, &index.RollbackOptions{Force: force})
		if !errors.Is(err, index.ErrDowngrade) || !strings.Contains(err.Error(), "/pay.md") {
			t.Fatalf("live rollback, force %v: %v, want ErrDowngrade naming /pay.md", force, err)
		}
		if ix.Generation() != live || public() != 0 {
			t.Fatalf("a refused rollback switched to %s (public hits %d)", ix.Generation(), public())
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		if _, _, err := index.Rollback(ctx, dir, &index.RollbackOptions{Force: force}); !errors.Is(err, index.ErrDowngrade) {
			t.Fatalf("package-level rollback, force %v: %v, want ErrDowngrade", force, err)
		}
	}
	if cur, _, _ := layout.Current(dir); cur != live {
		t.Errorf("CURRENT names %s after refused rollbacks, want %s", cur, live)
	}
	if ix, err = index.Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if public() != 0 {
		t.Errorf("restricted text public after the refused rollbacks")
	}
}

// A live re-embed's copy of the generation carries the full-text image
// (no full-text row changes), so the generation it switches to opens from
// the image, not from the tables.
func TestReembedCopiesImage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, index.Input{Source: "/a.md", Data: []byte("# A\n\nalpha apples\n")}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil { // saves the image
		t.Fatal(err)
	}
	if ix, err = index.Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := rebuild.Reembed(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix, Index: index.Options{Embedder: embed.Spec{Model: "hash", Dim: 128}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ix.Generation(), "index.duckdb.fts-image")); err != nil {
		t.Fatalf("the re-embedded generation %s has no full-text image: %v", ix.Generation(), err)
	}
}
