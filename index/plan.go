package index

import (
	"context"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/escurel/escurel/index/dense"
	"github.com/escurel/escurel/index/fts"
	"github.com/escurel/escurel/internal/fusion"
)

// Limits of SearchOptions: a search allocates for its candidates, but a
// caller's K and Depth are bounded so that no request can ask for an
// unbounded ranking (a server may set tighter limits of its own).
const (
	MaxK     = 10000  // the largest SearchOptions.K
	MaxDepth = 100000 // the largest SearchOptions.Depth
)

// maxEcho is how many bytes of a query an error message quotes.
const maxEcho = 200

// echoQuery quotes query for an error message (Go syntax: control
// characters escaped), cut to maxEcho bytes with its length when longer: a
// megabyte query is not echoed whole.
func echoQuery(query string) string {
	if len(query) <= maxEcho {
		return fmt.Sprintf("%q", query)
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(query[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", query[:cut], len(query))
}

// candidate is a ranked block before its row is read.
type candidate struct {
	id      int64
	score   float64
	explain *Explain
}

// plan is a validated search.
type plan struct {
	k, depth    int
	mode        string
	fusion      string
	rrfK, alpha float64
	explain     bool
	levels      []string
	terms       []string  // the BM25 leg's query terms
	vector      []float32 // the dense leg's query vector
	bm25        fts.Query
	filter      *Filter
}

// plan validates opts and analyzes and embeds the query. The embedding
// happens here, outside any lock: a remote model may take its time.
func (ix *state) plan(ctx context.Context, query string, opts *SearchOptions) (*plan, error) {
	if opts == nil {
		opts = &SearchOptions{}
	}
	p := &plan{k: DefaultK, mode: opts.Mode, fusion: opts.Fusion, depth: opts.Depth, rrfK: opts.RRFK, alpha: opts.Alpha, explain: opts.Explain}
	if opts.Filter != nil && opts.Filter.root.op != "" {
		p.filter = opts.Filter
	}
	if opts.K != 0 {
		p.k = opts.K
	}
	if p.k < 0 || p.k > MaxK {
		return nil, fmt.Errorf("k = %d: want 0 to %d (index.MaxK)", p.k, MaxK)
	}
	var err error
	if p.levels, err = allowed(opts.Clearance); err != nil {
		return nil, err
	}
	if p.mode == "" {
		p.mode = ix.defaultMode()
	}
	switch p.mode {
	case ModeBM25:
	case ModeDense, ModeHybrid:
		if ix.vec == nil {
			return nil, fmt.Errorf("mode %s: %w: use mode bm25, or rebuild the index with an embedder to add them", p.mode, ErrNoVectors)
		}
	default:
		return nil, fmt.Errorf("mode %q: want %s, %s or %s", p.mode, ModeBM25, ModeDense, ModeHybrid)
	}
	if p.mode != ModeHybrid && (opts.Fusion != "" || opts.Alpha != 0 || opts.RRFK != 0 || opts.Depth != 0) {
		return nil, fmt.Errorf("fusion, alpha, rrf k and depth apply to mode %s, not %s: search in mode %s (--mode %s)", ModeHybrid, p.mode, ModeHybrid, ModeHybrid)
	}
	switch p.fusion {
	case "":
		p.fusion = FusionRRF
	case FusionRRF, FusionConvex:
	default:
		return nil, fmt.Errorf("fusion %q: want %s or %s", p.fusion, FusionRRF, FusionConvex)
	}
	if p.depth == 0 {
		p.depth = DefaultDepth
	}
	if p.depth < 0 || p.depth > MaxDepth {
		return nil, fmt.Errorf("depth = %d: want 0 to %d (index.MaxDepth)", p.depth, MaxDepth)
	}
	p.depth = max(p.depth, p.k)
	if p.rrfK == 0 {
		p.rrfK = DefaultRRFK
	}
	if !(p.rrfK > 0) || math.IsInf(p.rrfK, 0) {
		return nil, fmt.Errorf("rrf k = %v, want > 0", p.rrfK)
	}
	if p.alpha == 0 {
		p.alpha = DefaultAlpha
	}
	if !(p.alpha > 0 && p.alpha <= 1) {
		return nil, fmt.Errorf("alpha = %v, want in (0, 1]", p.alpha)
	}
	params := fts.DefaultParams
	if opts.BM25 != nil {
		params = *opts.BM25
	}
	if err := params.Validate(); err != nil {
		return nil, err
	}
	if p.mode != ModeDense {
		if p.terms, err = ix.queryTerms(query, opts.Language, uint8(len(p.levels)-1)); err != nil {
			return nil, err
		}
		n := p.k
		if p.mode == ModeHybrid {
			n = p.depth
		}
		p.bm25 = fts.Query{Terms: p.terms, MaxLevel: uint8(len(p.levels) - 1), K: n, Params: params, Conjunctive: opts.Conjunctive}
	}
	if p.mode != ModeBM25 {
		if p.vector, err = ix.embedQuery(ctx, query); err != nil {
			return nil, fmt.Errorf("%w (mode bm25 needs none): %w", ErrEmbedder, err)
		}
	}
	return p, nil
}

// ranked plans the search, runs its legs and fusion, and calls use with
// the ranking inside the read transaction it came from.
func (ix *state) ranked(ctx context.Context, query string, opts *SearchOptions, use func(querier, []candidate, []string) error) error {
	p, err := ix.plan(ctx, query, opts)
	if err != nil {
		return fmt.Errorf("search %s: %w", echoQuery(query), err)
	}
	if p.k == 0 {
		return nil
	}
	err = ix.fts.View(func() error {
		// One transaction, begun when first needed (a query on cached
		// terms needs none): posting lists, vectors and hit rows come from
		// one snapshot, the one the in-memory indexes describe, as no
		// write commits while View holds its lock.
		tx := &lazyTx{db: ix.db}
		defer tx.rollback()
		var lex []fts.Hit
		var den []dense.Hit
		maxLevel := uint8(len(p.levels) - 1)
		var allowed *allowedSet
		if p.filter != nil {
			// Before the transaction begins (metaStore reads the version
			// first): the filter as a bitmap of allowed blocks, within
			// the clearance.
			st, err := ix.metaStore(ctx, tx)
			if err != nil {
				return err
			}
			if allowed = st.allowed(p.filter, maxLevel); allowed.n == 0 {
				return use(tx, nil, p.levels)
			}
			p.bm25.Allowed = allowed.bits
		}
		if p.mode != ModeDense && len(p.terms) > 0 {
			if lex, err = ix.fts.Search(ctx, tx, p.bm25); err != nil {
				return err
			}
		}
		if p.mode != ModeBM25 {
			d, err := ix.denseIndex(ctx, tx)
			if err != nil {
				return err
			}
			n := p.k
			if p.mode == ModeHybrid {
				n = p.depth
			}
			if allowed != nil {
				den, err = d.SearchAllowed(ctx, p.vector, n, maxLevel, allowed.bits, allowed.n)
			} else {
				den, err = d.Search(ctx, p.vector, n, maxLevel)
			}
			if err != nil {
				return err
			}
		}
		return use(tx, fuse(p, lex, den), p.levels)
	})
	if err != nil {
		return fmt.Errorf("search %s: %w", echoQuery(query), err)
	}
	return nil
}

// fuse turns the legs' rankings into the search's: one leg as it is, or
// both fused as p.fusion says (package fusion), best first, ties by block
// id, at most p.k.
func fuse(p *plan, lex []fts.Hit, den []dense.Hit) []candidate {
	var legs [2]fusion.Leg
	for _, h := range lex {
		legs[0].IDs, legs[0].Scores = append(legs[0].IDs, h.Block), append(legs[0].Scores, h.Score)
	}
	for _, h := range den {
		legs[1].IDs, legs[1].Scores = append(legs[1].IDs, h.Block), append(legs[1].Scores, h.Score)
	}
	var fused []fusion.Result
	if p.mode == ModeHybrid {
		fused = fusion.Fuse(legs, fusion.Params{Method: p.fusion, K: p.rrfK, Alpha: p.alpha}, p.k)
	} else {
		// One leg: its own scores and order (the leg already breaks ties
		// by block id).
		l := 0
		if p.mode == ModeDense {
			l = 1
		}
		for i, id := range legs[l].IDs[:min(len(legs[l].IDs), p.k)] {
			r := fusion.Result{ID: id, Score: legs[l].Scores[i]}
			r.Rank[l], r.Leg[l] = i+1, legs[l].Scores[i]
			fused = append(fused, r)
		}
	}
	out := make([]candidate, len(fused))
	for i, r := range fused {
		out[i] = candidate{id: r.ID, score: r.Score}
		if p.explain {
			out[i].explain = &Explain{}
			if r.Rank[0] > 0 {
				out[i].explain.BM25 = &LegRank{Rank: r.Rank[0], Score: r.Leg[0]}
			}
			if r.Rank[1] > 0 {
				out[i].explain.Dense = &LegRank{Rank: r.Rank[1], Score: r.Leg[1]}
			}
		}
	}
	return out
}
