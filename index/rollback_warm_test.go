package index

import (
	"context"
	"testing"
)

// A live rollback warms the generation it goes back to as the live state
// was: what of its vectors, public ids and hits' documents the live state
// had loaded is loaded before it serves, not by the first search after it,
// and its posting cache holds the lists the live one had cached.
func TestRollbackWarms(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, src := range []string{"/a.md", "/b.md"} {
		if _, err := ix.Ingest(ctx, Input{Source: src, Data: []byte("# T\n\napples and pears " + src + "\n")}); err != nil {
			t.Fatal(err)
		}
		// A hybrid search loads the vectors, public ids and hits' documents.
		for range hitDocsLoadAfter {
			if _, err := ix.Search(ctx, "apples", &SearchOptions{Mode: ModeHybrid}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reloadCopy(t, ix)
	loaded := func() [4]bool {
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.unref()
		terms, _ := s.fts.CacheStats()
		return [4]bool{s.vec.isLoaded(), s.pub.isLoaded(), s.hitDocs.isLoaded(), terms > 0}
	}
	before := loaded()
	if !before[0] || !before[2] || !before[3] {
		t.Fatalf("before the rollback: vectors, public ids, hits' documents, posting lists loaded %v: the reload did not warm them", before)
	}
	if _, _, err := ix.Rollback(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if after := loaded(); after != before {
		t.Errorf("vectors, public ids, hits' documents, posting lists loaded %v after the rollback, %v before: want it as warm as the state it replaced", after, before)
	}
}

// Prewarm fills a cold generation's posting cache.
func TestPrewarm(t *testing.T) {
	ctx := context.Background()
	ix := openCold(t)
	defer ix.Close()
	cached := func() int {
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.unref()
		n, _ := s.fts.CacheStats()
		return n
	}
	if n := cached(); n != 0 {
		t.Fatalf("%d terms cached right after Open, want 0", n)
	}
	n, err := ix.Prewarm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || cached() != n {
		t.Errorf("Prewarm says %d terms, the cache holds %d: want the same, > 0", n, cached())
	}
	if s, _ := ix.acquire(); s != nil {
		if !s.hitDocs.isLoaded() {
			t.Error("Prewarm did not load the table of hits' documents")
		}
		if !s.pub.isLoaded() {
			t.Error("Prewarm did not load the map of public ids")
		}
		s.unref()
	}
}

// Prewarm stops warming a generation once a switch replaced it: a state
// retired by Reload warms nothing (its posting cache stays empty), and a
// state still live warms as before.
func TestPrewarmStopsOnceReplaced(t *testing.T) {
	ctx := context.Background()
	ix := openCold(t)
	defer ix.Close()
	old, err := ix.acquire() // cold: nothing searched since the open
	if err != nil {
		t.Fatal(err)
	}
	defer old.unref()
	reloadCopy(t, ix)
	if n, err := old.prewarm(ctx); n != 0 || err != nil {
		t.Errorf("prewarm of the replaced generation: %d terms, %v; want 0, nil", n, err)
	}
	if terms, _ := old.fts.CacheStats(); terms != 0 {
		t.Errorf("the replaced generation's posting cache holds %d terms after its prewarm: want none (it was retired)", terms)
	}
	if n, err := ix.Prewarm(ctx); n == 0 || err != nil {
		t.Errorf("prewarm of the live generation: %d terms, %v; want some", n, err)
	}
}

// openCold returns an index of three small documents, closed and opened
// again: nothing searched, so its posting cache is empty.
func openCold(t *testing.T) *Index {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"/a.md", "/b.md", "/c.md"} {
		if _, err := ix.Ingest(ctx, Input{Source: src, Data: []byte("# T\n\napples and pears " + src + "\n")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	return ix
}

// reloadCopy makes a second generation, a copy of the live one, live by
// Reload.
func reloadCopy(t *testing.T, ix *Index) {
	t.Helper()
	ctx := context.Background()
	gen, err := ix.layout.NewGeneration()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.snapshot(ctx, ix.layout.GenerationPath(gen), ""); err != nil {
		t.Fatal(err)
	}
	if err := ix.layout.Publish(gen); err != nil {
		t.Fatal(err)
	}
	if err := ix.Reload(ctx); err != nil || ix.Generation() != gen {
		t.Fatalf("reload to %s: serving %s, %v", gen, ix.Generation(), err)
	}
}
