package index

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// Filtered search and MetaKeys after ordinary writes (no meta-only update):
// the metadata table follows ingests, replaces and deletes once built.
func TestMetaStoreFollowsWrites(t *testing.T) {
	ctx := context.Background()
	ix := openFixed(t)
	filterDocs(t, ix)
	// Build the store.
	if got := searchSources(t, ix, `product = "api"`, ModeBM25, Public, 10); len(got) == 0 {
		t.Fatal("no hits")
	}
	// 1. A new document after the store was built.
	if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: "/new/n.md", Data: []byte("---\nproduct: api\n---\nshared new\n")}}); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	if got := searchSources(t, ix, `product = "api"`, ModeBM25, Public, 10); !slices.Contains(got, "/new/n.md") {
		t.Errorf("new document missing from filtered search: %q", got)
	}
	// 2. Raise a public document with a telling key to restricted.
	if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: "/pub/p.md", Data: []byte("---\nacquisition_target: zeta\n---\nshared pub\n")}}); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	keys, _ := ix.MetaKeys(ctx, Public)
	t.Logf("public keys before raise: %v", keys)
	if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: "/pub/p.md", Data: []byte("---\nacquisition_target: zeta\n---\nshared pub\n"), Sensitivity: Restricted}}); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	keys, _ = ix.MetaKeys(ctx, Public)
	if _, ok := keys["acquisition_target"]; ok {
		t.Errorf("LEAK: public MetaKeys lists a key only a restricted document has: %v", keys)
	}
	// 3. Delete.
	if _, err := ix.Delete(ctx, "/docs/ref/c.md"); err != nil {
		t.Fatal(err)
	}
	keys, _ = ix.MetaKeys(ctx, Public)
	if keys["customer"] != 0 {
		t.Errorf("deleted document still counted: %v", keys)
	}
}

// A document raised to restricted after the metadata table was built no
// longer lends its keys to a public caller, in MetaKeys or any mode.
func TestMetaStoreRaiseDoesNotLeak(t *testing.T) {
	ctx := context.Background()
	ix := openFixed(t)
	filterDocs(t, ix)
	if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: "/pub/p.md", Data: []byte("---\nacquisition_target: zeta\n---\nshared pub\n")}}); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	keys, _ := ix.MetaKeys(ctx, Public) // builds the store
	t.Logf("public keys before raise: %v", keys)
	if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: "/pub/p.md", Data: []byte("---\nacquisition_target: zeta\n---\nshared pub\n"), Sensitivity: Restricted}}); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
	keys, _ = ix.MetaKeys(ctx, Public)
	if _, ok := keys["acquisition_target"]; ok {
		t.Errorf("LEAK: public MetaKeys lists a key only a restricted document has: %v", keys)
	}
	for _, mode := range []string{ModeBM25, ModeDense, ModeHybrid} {
		if got := searchSources(t, ix, `acquisition_target = "zeta"`, mode, Public, 10); len(got) != 0 {
			t.Errorf("LEAK %s: %q", mode, got)
		}
	}
}
