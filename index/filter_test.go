package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseFilterErrors(t *testing.T) {
	for _, c := range []struct {
		in   string
		col  int
		want string
	}{
		{`product = `, 11, "expected a value"},
		{`product ~ "a"`, 9, `unknown operator "~"`},
		{`product == "a"`, 9, "equality is ="},
		{`version >= "abc"`, 12, "takes a number or a date, got a string"},
		{`folder ^= 3`, 11, "takes a string, got a number"},
		{`draft < true`, 9, "takes a number or a date, got a boolean"},
		{`(a = 1`, 7, "expected ) to close the ( of column 1"},
		{`a = 1 b = 2`, 7, "expected and, or or the end"},
		{`a in [1, 2`, 11, "expected , or ] in the list"},
		{`a = "open`, 5, "never closed"},
		{`a = api`, 5, "a string is in double quotes"},
		{`and = 1`, 1, "the keyword and"},
		{`a = 12abc`, 5, "malformed value"},
		{strings.Repeat("not ", 40) + "a", 129, "nested deeper"},
	} {
		_, err := ParseFilter(c.in)
		var fe *FilterError
		if !errors.As(err, &fe) || fe.Column != c.col || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFilter(%q) = %v; want column %d, %q", c.in, err, c.col, c.want)
		}
	}
	if f, err := ParseFilter("  "); f != nil || err != nil {
		t.Errorf("empty filter: %v, %v", f, err)
	}
}

// filterDocs is a small corpus whose every document holds the word
// "shared", so that a query for it finds each document's block.
func filterDocs(t *testing.T, ix *Index) {
	t.Helper()
	docs := []Input{
		{Source: "/docs/guide/a.md", Data: []byte("---\nproduct: api\nversion: 2\ndraft: false\nreleased: 2024-03-01\ntags: [x, y]\n---\nshared alpha\n")},
		{Source: "/docs/guide/b.md", Data: []byte("---\nproduct: api\nversion: 3\ndraft: true\nreleased: 2024-06-01\n---\nshared beta\n")},
		{Source: "/docs/ref/c.md", Data: []byte("---\nproduct: cli\nversion: 1.5\ntags: [y]\n---\nshared gamma\n"), Meta: map[string]any{"customer": "acme"}},
		{Source: "/other/d.txt", Data: []byte("shared delta\n"), Meta: map[string]any{"product": "api", "version": 10}},
		{Source: "/secret/e.md", Data: []byte("---\nproduct: api\nproject: falcon\nversion: 2\n---\nshared epsilon\n"), Sensitivity: Restricted},
	}
	if _, errs, err := ix.IngestBatch(context.Background(), docs); err != nil || errors.Join(errs...) != nil {
		t.Fatal(err, errs)
	}
}

// sources returns the sources of a search's hits, in order.
func searchSources(t *testing.T, ix *Index, filter, mode, clearance string, k int) []string {
	t.Helper()
	f, err := ParseFilter(filter)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search(context.Background(), "shared", &SearchOptions{K: k, Mode: mode, Filter: f, Clearance: clearance})
	if err != nil {
		t.Fatalf("filter %q mode %s: %v", filter, mode, err)
	}
	out := []string{}
	for _, h := range hits {
		out = append(out, h.Source)
	}
	return out
}

func TestFilterOperators(t *testing.T) {
	ix := openFixed(t)
	filterDocs(t, ix)
	a, b, c, d := "/docs/guide/a.md", "/docs/guide/b.md", "/docs/ref/c.md", "/other/d.txt"
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{`product = "api"`, []string{a, b, d}},
		{`product != "api"`, []string{c}},
		{`product in ["cli", "nope"]`, []string{c}},
		{`version >= 2`, []string{a, b, d}},
		{`version > 2 and version < 10`, []string{b}},
		{`version <= 1.5`, []string{c}},
		{`folder ^= "/docs/guide/"`, []string{a, b}},
		{`source ^= "/docs/"`, []string{a, b, c}},
		{`folder = "/other/"`, []string{d}},
		{`released >= 2024-04-01`, []string{b}},
		{`released < "2024-04-01"`, []string{a}},
		{`released exists`, []string{a, b}},
		{`not released exists`, []string{c, d}},
		{`draft`, []string{b}},
		{`not draft`, []string{a, c, d}},
		{`draft = false`, []string{a}},
		{`tags = "y"`, []string{a, c}},
		{`tags in ["x"]`, []string{a}},
		{`customer = "acme" or (product = "api" and version = 10)`, []string{c, d}},
		{`NOT (product = "api") AND version exists`, []string{c}},
		{`media_type = "text/plain"`, []string{d}},
		{`language = "en" and title ^= "a"`, []string{a}},
		{`ingested_at >= 2025-01-01 and ingested_at < 2025-12-31T00:00:00Z`, []string{a, b, c, d}},
		{`nosuchkey = 1`, nil},
		{`not nosuchkey exists`, []string{a, b, c, d}},
		{`version = "2"`, nil}, // a string never equals a number
		{`project = "falcon"`, nil},
	} {
		for _, mode := range []string{ModeBM25, ModeDense, ModeHybrid} {
			got := searchSources(t, ix, tc.filter, mode, "", 10)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("%s: filter %q: got %q, want %q", mode, tc.filter, got, tc.want)
			}
		}
	}
	// A filter keeps the unfiltered order and scores, and k hits come
	// back when k match.
	for _, mode := range []string{ModeBM25, ModeDense, ModeHybrid} {
		all := searchSources(t, ix, "", mode, "", 10)
		var want []string
		for _, s := range all {
			if s != c {
				want = append(want, s)
			}
		}
		if got := searchSources(t, ix, `source != "/docs/ref/c.md"`, mode, "", 10); !slices.Equal(got, want) {
			t.Errorf("%s: filtered order %q, want %q", mode, got, want)
		}
		if got := searchSources(t, ix, `product = "api"`, mode, "", 2); len(got) != 2 {
			t.Errorf("%s: k = 2 with 3 matching: %d hits", mode, len(got))
		}
	}
	// Hits and documents carry the metadata.
	f, _ := ParseFilter(`customer = "acme"`)
	hits, err := ix.Search(context.Background(), "shared", &SearchOptions{Filter: f})
	if err != nil || len(hits) != 1 {
		t.Fatal(hits, err)
	}
	if got := fmt.Sprint(hits[0].Meta); got != "map[customer:acme product:cli tags:[y] version:1.5]" {
		t.Errorf("hit meta %s", got)
	}
}

// TestFilterClearance: a filter never widens what a clearance allows, and
// a key only restricted documents have tells a public caller nothing.
func TestFilterClearance(t *testing.T) {
	ix := openFixed(t)
	filterDocs(t, ix)
	for _, mode := range []string{ModeBM25, ModeDense, ModeHybrid} {
		for _, filter := range []string{`project = "falcon"`, `project exists`, `source ^= "/secret/"`, `not draft`, `version = 2`, `product = "api" or not product exists`} {
			for _, s := range searchSources(t, ix, filter, mode, Public, 10) {
				if strings.HasPrefix(s, "/secret/") {
					t.Errorf("%s: filter %q revealed %s", mode, filter, s)
				}
			}
		}
		none := searchSources(t, ix, `nosuchkey exists`, mode, Public, 10)
		if got := searchSources(t, ix, `project exists`, mode, Public, 10); len(got) != len(none) {
			t.Errorf("%s: a key of restricted documents alone: %d hits, an unknown key %d", mode, len(got), len(none))
		}
		all := searchSources(t, ix, "", mode, Public, 10)
		if got := searchSources(t, ix, `not project exists`, mode, Public, 10); !slices.Equal(got, all) {
			t.Errorf("%s: not project exists: %q, want all public %q", mode, got, all)
		}
		if got := searchSources(t, ix, `project = "falcon"`, mode, Restricted, 10); !slices.Equal(got, []string{"/secret/e.md"}) {
			t.Errorf("%s: restricted caller: %q", mode, got)
		}
	}
	keys, err := ix.MetaKeys(context.Background(), Public)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["project"]; ok || keys["product"] != 4 || keys[MetaSource] != 4 {
		t.Errorf("public keys %v", keys)
	}
	if keys, _ = ix.MetaKeys(context.Background(), Restricted); keys["project"] != 1 || keys["product"] != 5 {
		t.Errorf("restricted keys %v", keys)
	}
}

// TestMetaOnlyUpdate: the same bytes with other metadata update the record
// and the row, and touch no block, posting or vector.
func TestMetaOnlyUpdate(t *testing.T) {
	ctx := context.Background()
	ix := openFixed(t)
	filterDocs(t, ix)
	s := ix.cur.Load()
	vecs := func() string {
		var out string
		if err := s.db.QueryRowContext(ctx, `SELECT string_agg(block_id::VARCHAR || ':' || vector::VARCHAR, ';' ORDER BY block_id) FROM `+s.vec.table).Scan(&out); err != nil {
			t.Fatal(err)
		}
		var segs int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM fts_segments`).Scan(&segs); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(out, segs)
	}
	before := vecs()
	res, err := ix.Ingest(ctx, Input{Source: "/other/d.txt", Data: []byte("shared delta\n"), Meta: map[string]any{"product": "cli", "tier": "gold"}})
	if err != nil || res.Status != MetaUpdated {
		t.Fatalf("re-ingest with other meta: %+v, %v", res, err)
	}
	if after := vecs(); after != before {
		t.Errorf("a metadata-only update changed vectors or segments")
	}
	if got := searchSources(t, ix, `tier = "gold" and product = "cli"`, ModeHybrid, "", 10); !slices.Equal(got, []string{"/other/d.txt"}) {
		t.Errorf("after the update: %q", got)
	}
	rec, err := s.blobs.GetRecord(ctx, res.DocID)
	if err != nil || rec.Meta != `{"product":"cli","tier":"gold"}` {
		t.Errorf("record meta %q, %v", rec.Meta, err)
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Errorf("verify: %+v, %v", v, err)
	}
	if res, err = ix.Ingest(ctx, Input{Source: "/other/d.txt", Data: []byte("shared delta\n"), Meta: map[string]any{"product": "cli", "tier": "gold"}}); err != nil || res.Status != Unchanged {
		t.Errorf("same meta again: %+v, %v", res, err)
	}
	if _, err := ix.Ingest(ctx, Input{Source: "/x.txt", Data: []byte("x"), Meta: map[string]any{"Title": "x"}}); err == nil || !strings.Contains(err.Error(), `meta key "Title"`) {
		t.Errorf("bad key: %v", err)
	}
}
