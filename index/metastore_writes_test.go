package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// metaCanon is a metadata table in a form that does not depend on the
// order of its documents: by doc id, the level, each key's values and the
// blocks.
func metaCanon(st *metaStore) map[string]string {
	out := map[string]string{}
	for i := 0; i < st.n; i++ {
		var keys []string
		for k, c := range st.cols {
			if vs := c.vals[c.off[i]:c.off[i+1]]; len(vs) > 0 {
				keys = append(keys, fmt.Sprintf("%s=%v", k, vs))
			}
		}
		slices.Sort(keys)
		blocks := slices.Clone(st.blocks[st.boff[i]:st.boff[i+1]])
		slices.Sort(blocks)
		if _, dup := out[st.ids[i]]; dup {
			out[st.ids[i]+" (again)"] = ""
		}
		out[st.ids[i]] = fmt.Sprint(st.levels[i], keys, blocks)
	}
	return out
}

// After each of a run of random writes (new documents, replacements with
// other metadata or sensitivity, metadata-only updates, deletes), the
// metadata table a filtered search brings up to date by re-reading the
// changed documents equals one read whole from the same snapshot, and
// filters select the same blocks from both at every clearance.
func TestMetaStorePatchEqualsWhole(t *testing.T) {
	ctx := context.Background()
	ix := openFixed(t)
	filterDocs(t, ix)
	rng := rand.New(rand.NewPCG(7, 8))
	products := []string{"api", "cli", "web"}
	sens := []string{Public, Internal, Restricted}
	filters := []string{`product = "api"`, `tier exists`, `not (product = "cli") and n > 3`, `tags = "b"`}
	patched := 0
	for round := 0; round < 40; round++ {
		src := fmt.Sprintf("/r/%02d.md", rng.IntN(12))
		switch op := rng.IntN(10); {
		case op < 6: // a new or replaced document
			body := fmt.Sprintf("shared %d\n\n## two\n\nmore %d\n", rng.IntN(3), rng.IntN(3))
			in := Input{Source: src, Data: []byte(body), Sensitivity: sens[rng.IntN(3)],
				Meta: map[string]any{"product": products[rng.IntN(3)], "n": rng.IntN(8), "tags": []any{"a", products[rng.IntN(3)][:1]}}}
			if rng.IntN(2) == 0 {
				in.Meta["tier"] = "gold"
			}
			if _, err := ix.Ingest(ctx, in); err != nil {
				t.Fatal(err)
			}
		case op < 8: // the same bytes again with other metadata
			sv := sens[rng.IntN(3)]
			if _, err := ix.Ingest(ctx, Input{Source: src, Data: []byte("meta only\n"), Sensitivity: sv, Meta: map[string]any{"product": "web"}}); err != nil {
				t.Fatal(err)
			}
			// Build the table between the two writes, so that the second
			// (a metadata-only update) is patched in on its own.
			searchSources(t, ix, `product = "web"`, ModeBM25, Restricted, 10)
			if res, err := ix.Ingest(ctx, Input{Source: src, Data: []byte("meta only\n"), Sensitivity: sv, Meta: map[string]any{"product": "api", "n": 5}}); err != nil || res.Status != MetaUpdated {
				t.Fatalf("metadata-only update: %+v, %v", res, err)
			}
		default:
			if _, err := ix.Delete(ctx, src); err != nil && !errors.Is(err, errNoDocument) {
				t.Fatal(err)
			}
		}
		if comparePatched(t, ix, round, filters) {
			patched++
		}
	}
	if patched < 20 {
		t.Errorf("only %d of 40 tables were patched: the test did not exercise the patch", patched)
	}
}

// comparePatched brings ix's metadata table up to date and checks it
// against one read whole from the same snapshot; it reports whether the
// table was patched.
func comparePatched(t *testing.T, ix *Index, round int, filters []string) (patched bool) {
	t.Helper()
	ctx := context.Background()
	s, err := ix.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.unref() // before Close, which waits for it, even on a failure
	tx := &lazyTx{db: s.db}
	defer tx.rollback()
	got, err := s.metaStore(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := buildMetaStore(ctx, tx, got.ver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(metaCanon(want), metaCanon(got)); diff != "" {
		t.Fatalf("round %d: patched table differs from one read whole (-whole +patched):\n%s", round, diff)
	}
	for _, fs := range filters {
		f, err := ParseFilter(fs)
		if err != nil {
			t.Fatal(err)
		}
		for lvl := uint8(0); lvl < 3; lvl++ {
			a, b := want.allowed(f, lvl), got.allowed(f, lvl)
			if a.n != b.n || !slices.Equal(trimZero(a.bits), trimZero(b.bits)) {
				t.Fatalf("round %d: %s at level %d: %d blocks from the whole table, %d from the patched one", round, fs, lvl, a.n, b.n)
			}
		}
	}
	return !got.whole
}

func trimZero(w []uint64) []uint64 {
	for len(w) > 0 && w[len(w)-1] == 0 {
		w = w[:len(w)-1]
	}
	return w
}

// Writes past maxMetaLog documents, or one that does not name its
// documents, make the next build read the whole table.
func TestMetaLogOverflow(t *testing.T) {
	var c metaCache
	c.bump([]string{"a"})
	if ids, whole := c.changedSince(0, 1); whole || !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("got %v %v", ids, whole)
	}
	c.bump(make([]string, maxMetaLog))
	if _, whole := c.changedSince(1, 2); !whole {
		t.Error("an overflowing log did not ask for a whole build")
	}
	c.bump([]string{"b"})
	if ids, whole := c.changedSince(2, 3); whole || !slices.Equal(ids, []string{"b"}) {
		t.Errorf("after a whole build at 2: %v %v", ids, whole)
	}
	c.bump(nil)
	c.bump([]string{"c"})
	if _, whole := c.changedSince(3, 5); !whole {
		t.Error("an unknown change did not ask for a whole build")
	}
	if ids, whole := c.changedSince(5, 5); whole || len(ids) != 0 || len(c.log) != 0 {
		t.Errorf("nothing after 5: %v %v, log %v", ids, whole, c.log)
	}
}
