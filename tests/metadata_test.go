package tests

import (
	"context"
	"sort"
	"testing"

	"github.com/escurel/escurel/index"
)

// TestRebuildKeepsMetadata: front-matter and given metadata survive a
// rebuild (the digest, which covers both columns, is equal) and a filter
// finds the same documents after it.
func TestRebuildKeepsMetadata(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, index.Options{})
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/a.md", Data: []byte("---\nproduct: api\nversion: 2\n---\n# A\n\nthe shared words\n"),
		Meta: map[string]any{"customer": "acme", "tags": []string{"x", "y"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/b.md", Data: []byte("# B\n\nthe shared words again\n")}); err != nil {
		t.Fatal(err)
	}
	// A metadata-only update, then the state a rebuild must reproduce.
	if r, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/b.md", Data: []byte("# B\n\nthe shared words again\n"),
		Meta: map[string]any{"customer": "globex"}}); err != nil || r.Status != index.MetaUpdated {
		t.Fatalf("%+v %v", r, err)
	}
	search := func() []string {
		f, err := index.ParseFilter(`customer in ["acme", "globex"] and (product = "api" or not version exists)`)
		if err != nil {
			t.Fatal(err)
		}
		hits, err := e.ix.Search(ctx, "shared words", &index.SearchOptions{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.Source)
		}
		sort.Strings(out) // equal scores are ordered by internal number, which a rebuild renumbers
		return out
	}
	digest := func() string {
		v, err := e.ix.Verify(ctx, nil)
		if err != nil || !v.OK() {
			t.Fatalf("verify: %+v %v", v, err)
		}
		return v.Digest
	}
	before, found := digest(), search()
	if len(found) != 2 {
		t.Fatalf("before the rebuild: %q", found)
	}
	e.rebuild(index.Options{})
	if after := digest(); after != before {
		t.Errorf("digest changed by a rebuild: %s → %s", before, after)
	}
	if got := search(); len(got) != 2 || got[0] != found[0] || got[1] != found[1] {
		t.Errorf("after the rebuild: %q, before %q", got, found)
	}
}
