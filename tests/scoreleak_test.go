package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/escurel/escurel/index"
)

// Public documents shared by the indexes of the score side-channel tests.
var scorePublic = []string{
	"# Lentil soup\n\nRed lentil soup with cumin and lemon. A lentil stew for winter.\n",
	"# Pulses\n\nChickpeas, beans and the odd lentil.\n",
	"# Bread\n\nSourdough bread needs flour, water, salt and time. Soup goes with bread.\n",
	"# Market\n\nThe market sells lentil flour, rice, beans and spices from many places and farms.\n",
	"# Cumin\n\nCumin seeds, toasted, lift a soup of beans.\n",
}

// Documents above public: each holds the query terms, so that they would
// move document frequencies and average lengths if counted.
var scoreInternal = []string{
	"# Canteen plan\n\nLentil soup on Mondays, lentil salad on Tuesdays, lentil curry on Fridays.\n",
	"# Supplier memo\n\nOur lentil supplier raises prices for lentil and bean deliveries next quarter, with a long explanation of why that happened.\n",
}

var scoreRestricted = []string{
	"# Recall\n\nLentil batch 42 is contaminated. Lentil soup recall.\n",
	"# Lawsuit\n\nLentil lentil lentil: the cumin importer sues about lentil soup.\n",
	"# Board\n\nBoard minutes: lentil.\n",
	"# Audit\n\nThe audit found soup, bread and lentil invoices missing.\n",
}

// scoreEnv builds an index with the public documents first (so their
// relative block order is the same in every index), then the documents of
// the given extra levels.
func scoreEnv(t *testing.T, internal, restricted bool) *env {
	t.Helper()
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	add := func(dir string, docs []string, sens string) {
		for i, d := range docs {
			if _, err := e.ix.Ingest(ctx, index.Input{Source: fmt.Sprintf("/%s/%d.md", dir, i), Data: []byte(d), Sensitivity: sens}); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("pub", scorePublic, index.Public)
	if internal {
		add("int", scoreInternal, index.Internal)
	}
	if restricted {
		add("res", scoreRestricted, index.Restricted)
	}
	return e
}

// scoresOf maps each hit, by source and body (block ids differ between
// indexes), to its score.
func scoresOf(hits []index.Hit) map[string]float64 {
	out := map[string]float64{}
	for _, h := range hits {
		out[h.Source+"\x00"+h.Body] = h.Score
	}
	return out
}

// The side channel of issue 15: a hit's score for a caller is exactly what
// it would be if the documents above the caller's clearance did not exist,
// bit for bit, in bm25 and in hybrid (RRF and convex), before and after a
// compaction.
func TestScoresIgnoreDocumentsAboveClearance(t *testing.T) {
	pubOnly := scoreEnv(t, false, false)
	pubInt := scoreEnv(t, true, false)
	all := scoreEnv(t, true, true)
	type variant struct {
		name string
		opts index.SearchOptions
	}
	variants := []variant{
		{"bm25", index.SearchOptions{Mode: index.ModeBM25}},
		{"bm25 conjunctive", index.SearchOptions{Mode: index.ModeBM25, Conjunctive: true}},
		{"hybrid rrf", index.SearchOptions{Mode: index.ModeHybrid, Fusion: index.FusionRRF}},
		{"hybrid convex", index.SearchOptions{Mode: index.ModeHybrid, Fusion: index.FusionConvex, Alpha: 0.3}},
		{"dense", index.SearchOptions{Mode: index.ModeDense}},
	}
	check := func(stage string) {
		for _, q := range []string{"lentil", "lentil soup", "cumin soup", "soup bread"} {
			for _, v := range variants {
				for _, tc := range []struct {
					clearance string
					ref, got  *env
				}{
					{index.Public, pubOnly, all},
					{index.Public, pubOnly, pubInt},
					{index.Internal, pubInt, all},
				} {
					opts := v.opts
					opts.K, opts.Clearance = 20, tc.clearance
					want := searchWith(t, tc.ref.ix, q, opts)
					got := searchWith(t, tc.got.ix, q, opts)
					if len(want) == 0 {
						t.Fatalf("%s %q %s: no hits in the reference index", stage, q, v.name)
					}
					ws, gs := scoresOf(want), scoresOf(got)
					if len(ws) != len(gs) {
						t.Errorf("%s %q %s at %s: %d hits, want %d", stage, q, v.name, tc.clearance, len(gs), len(ws))
					}
					for key, w := range ws {
						if g, ok := gs[key]; !ok || g != w {
							t.Errorf("%s %q %s at %s: %q scores %v, want %v exactly", stage, q, v.name, tc.clearance, key, g, w)
						}
					}
					for i := range min(len(want), len(got)) {
						if want[i].Source != got[i].Source || want[i].Body != got[i].Body {
							t.Errorf("%s %q %s at %s: rank %d is %s, want %s", stage, q, v.name, tc.clearance, i+1, got[i].Source, want[i].Source)
						}
					}
				}
			}
		}
	}
	one := searchWith(t, pubOnly.ix, "lentil", index.SearchOptions{K: 1})[0].Score
	mixed := searchWith(t, all.ix, "lentil", index.SearchOptions{K: 1})[0].Score
	t.Logf("public caller, best score for lentil: %.6f without documents above public, %.6f with them", one, mixed)
	check("fresh")
	// Deleting a restricted document and compacting changes no score.
	ctx := context.Background()
	if _, err := all.ix.Delete(ctx, "/res/0.md"); err != nil {
		t.Fatal(err)
	}
	check("after a delete")
	if err := all.ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
	all.reopen()
	check("after reopening")
}

// A query is analyzed in the languages of the documents the caller may
// see, not of all documents: a restricted German document must not make a
// public caller's "Häuser" find a public page about a "haus" (German
// stemming), which it would not find without that document.
func TestQueryLanguagesIgnoreDocumentsAboveClearance(t *testing.T) {
	build := func(restricted bool) *env {
		e := newEnv(t, index.Options{})
		e.ingest("/pub/haus.md", "# Bauhaus\n\nThe haus in Dessau, and its workshops.\n")
		if restricted {
			if _, err := e.ix.Ingest(context.Background(), index.Input{Source: "/res/de.md", Language: "de", Sensitivity: index.Restricted,
				Data: []byte("# Geheim\n\nDie Häuser der Stiftung.\n")}); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	without, with := build(false), build(true)
	for _, stage := range []string{"fresh", "reopened"} {
		for _, mode := range []string{index.ModeBM25, index.ModeHybrid} {
			opts := index.SearchOptions{Mode: mode, Clearance: index.Public}
			want, got := scoresOf(searchWith(t, without.ix, "Häuser", opts)), scoresOf(searchWith(t, with.ix, "Häuser", opts))
			if len(got) != len(want) {
				t.Errorf("%s %s: %d public hits with a restricted German document, %d without", stage, mode, len(got), len(want))
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s %s: %q scores %v, want %v", stage, mode, k, got[k], w)
				}
			}
		}
		without.reopen()
		with.reopen()
	}
	// At restricted clearance the German analysis applies.
	if hits := searchWith(t, with.ix, "Häuser", index.SearchOptions{Mode: index.ModeBM25, Clearance: index.Restricted}); len(hits) < 2 {
		t.Errorf("at restricted clearance: %d hits, want the German document and the haus page", len(hits))
	}
}
