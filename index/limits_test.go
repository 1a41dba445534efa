package index

import (
	"context"
	"math"
	"strings"
	"testing"
)

// K and Depth are bounded: a huge value is refused with an error naming
// the field, never an allocation that ends the process (issue 19, item 1).
func TestSearchBoundsKAndDepth(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: []byte("# A\n\nalpha beta\n")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts  SearchOptions
		field string
	}{
		{SearchOptions{K: math.MaxInt}, "k"},
		{SearchOptions{K: MaxK + 1}, "k"},
		{SearchOptions{K: 1 << 40, Mode: ModeDense}, "k"},
		{SearchOptions{Mode: ModeHybrid, Depth: math.MaxInt}, "depth"},
		{SearchOptions{Mode: ModeHybrid, Depth: MaxDepth + 1}, "depth"},
	} {
		_, err := ix.Search(ctx, "alpha", &c.opts)
		if err == nil || !strings.Contains(err.Error(), c.field+" = ") {
			t.Errorf("%+v: %v; want an error naming %s", c.opts, err, c.field)
		}
		if _, err := ix.Rank(ctx, "alpha", &c.opts); err == nil {
			t.Errorf("Rank %+v: accepted", c.opts)
		}
	}
	for _, o := range []SearchOptions{{K: MaxK}, {Mode: ModeHybrid, K: MaxK, Depth: MaxDepth}, {Mode: ModeDense, K: MaxK}} {
		hits, err := ix.Search(ctx, "alpha", &o)
		if err != nil || len(hits) != 1 {
			t.Errorf("%+v: %d hits, %v; want 1", o, len(hits), err)
		}
	}
}
