package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/escurel/escurel/index"
)

// SearchCommand is "escurel search": it prints the best blocks for a query.
type SearchCommand struct {
	m *Main
	g globals
}

// searchOutput is the --json document.
type searchOutput struct {
	Query string      `json:"query"`
	Hits  []index.Hit `json:"hits"`
}

// Run searches for the words in args, joined by spaces.
func (c *SearchCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("search", &c.g)
	k := fs.Int("k", index.DefaultK, "number of hits")
	asJSON := fs.Bool("json", false, `print {"query":…,"hits":[…]} as JSON`)
	clearance := fs.String("clearance", index.Public, "highest document sensitivity to return: public, internal or restricted")
	and := fs.Bool("and", false, "require every query term (default: any)")
	lang := fs.String("lang", "", "analyze the query as this language (default: as each language of the index's documents)")
	mode := fs.String("mode", "", "bm25, dense or hybrid (default: hybrid with a trained embedder, bm25 with hash or none)")
	fusion := fs.String("fusion", "", "hybrid fusion: rrf (default) or convex")
	alpha := fs.Float64("alpha", 0, "weight of the dense leg in fusion, in (0, 1] (default 0.5)")
	depth := fs.Int("depth", 0, "candidates per leg in hybrid mode (default 100)")
	explain := fs.Bool("explain", false, "show each leg's rank and score for every hit")
	filter := fs.String("filter", "", `keep to documents whose metadata match, e.g. 'product = "api" and version >= 2' (see README)`)
	rr := c.m.rerankFlags(fs)
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageError("search: no QUERY given")
	}
	if *k < 1 || *k > index.MaxK {
		return usageError("search: -k %d: want 1 to %d", *k, index.MaxK)
	}
	if *depth < 0 || *depth > index.MaxDepth {
		return usageError("search: --depth %d: want 0 to %d", *depth, index.MaxDepth)
	}
	query := strings.Join(args, " ")
	f, err := index.ParseFilter(*filter)
	if err != nil {
		return usageError("search: --filter: %v", err)
	}
	reranker, err := rr.reranker()
	if err != nil {
		return usageError("search: %v", err)
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	hits, err := ix.Search(ctx, query, &index.SearchOptions{K: *k, Clearance: *clearance, Conjunctive: *and, Language: *lang,
		Mode: *mode, Fusion: *fusion, Alpha: *alpha, Depth: *depth, Explain: *explain, Reranker: reranker, Filter: f})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(searchOutput{Query: query, Hits: hits})
	}
	if len(hits) == 0 {
		fmt.Fprintf(c.m.Stdout, "no hits for %s\n", echo(query))
		return nil
	}
	for i, h := range hits {
		fmt.Fprintf(c.m.Stdout, "%2d. %7.4f  %s:%d-%d  block %v\n", i+1, h.Score, shown(h.Source, false), h.ByteStart, h.ByteEnd, h.BlockID)
		if h.Context != "" {
			fmt.Fprintf(c.m.Stdout, "    %s\n", shown(h.Context, false))
		}
		if e := h.Explain; e != nil {
			line := fmt.Sprintf("    bm25 %s  dense %s", legText(e.BM25), legText(e.Dense))
			if reranker != nil {
				line += "  rerank " + legText(e.Rerank)
			}
			fmt.Fprintln(c.m.Stdout, line)
		}
		fmt.Fprintf(c.m.Stdout, "    %s\n\n", shown(snippet(h.Body, 240), true))
	}
	return nil
}

// legText prints a hit's place in one ranking, "-" when not in it.
func legText(r *index.LegRank) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("#%d (%.4f)", r.Rank, r.Score)
}

// snippet collapses white space in s and cuts it to at most max bytes at a
// rune boundary, marking a cut with "…".
func snippet(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
