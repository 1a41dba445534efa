package index

import (
	"context"
	"testing"
)

// A new index records standard/2, which drops soft hyphens; an index built
// with standard/1 opens without a setting, stays standard/1 and keeps
// analyzing as it did, so its postings and queries still meet.
func TestAnalyzerVersions(t *testing.T) {
	ctx := context.Background()
	const doc = "# Notes\n\nWe co\u00ADoperate with quokkas.\n"
	for _, tc := range []struct {
		built, want string
		found       bool // does "cooperate" find the soft-hyphenated word
	}{
		{"", "standard/2", true},
		{"standard/1", "standard/1", false},
	} {
		dir := t.TempDir()
		ix, err := Open(ctx, dir, &Options{BlobURL: "mem://", Analyzer: tc.built})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: []byte(doc)}); err != nil {
			t.Fatal(err)
		}
		ix.Close()
		ix, err = Open(ctx, dir, &Options{BlobURL: "mem://"})
		if err != nil {
			t.Fatalf("reopen an index built with %q: %v", tc.want, err)
		}
		if got := ix.cur.Load().manifest.Load().Analyzer; got != tc.want || ix.cur.Load().analyzer.ID() != tc.want {
			t.Errorf("built with %q: manifest %q, analyzer %q, want %q", tc.built, got, ix.cur.Load().analyzer.ID(), tc.want)
		}
		hits, err := ix.Search(ctx, "cooperate", &SearchOptions{K: 5, Mode: ModeBM25})
		if err != nil {
			t.Fatal(err)
		}
		if (len(hits) > 0) != tc.found {
			t.Errorf("%s: cooperate found %d hits, want found=%v", tc.want, len(hits), tc.found)
		}
		ix.Close()
	}
}
