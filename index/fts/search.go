package fts

import (
	"container/heap"
	"context"
	"database/sql"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Params are the BM25F parameters (Robertson, Zaragoza & Taylor 2004,
// "Simple BM25 Extension to Multiple Weighted Fields"; Robertson & Zaragoza
// 2009, §3.4). For a query of distinct terms t and a block d:
//
//	tf̃(t,d)  = Σ_f Weight[f] · tf_f(t,d) / (1 − B[f] + B[f] · len_f(d) / avglen_f)
//	score(d) = Σ_t idf(t) · tf̃(t,d) · (K1 + 1) / (K1 + tf̃(t,d))
//	idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// The weighted, length-normalised frequencies of the fields are summed
// before the one K1 saturation, and there is one idf per term, over blocks
// (N live blocks, df the live blocks holding t in any field): a term in
// both the title context and the body is not counted twice as it would be
// by adding two BM25 scores. The idf is Lucene's non-negative variant.
type Params struct {
	K1     float64            `json:"k1"`     // saturation, ≥ 0
	B      [NumFields]float64 `json:"b"`      // length normalisation per field (body, context), 0 to 1
	Weight [NumFields]float64 `json:"weight"` // field weights (body, context), ≥ 0
}

// DefaultParams: K1 1.2, B 0.75 for both fields, body weight 1, context
// weight 2.
var DefaultParams = Params{K1: 1.2, B: [NumFields]float64{0.75, 0.75}, Weight: [NumFields]float64{1, 2}}

// Validate reports parameters outside their ranges.
func (p Params) Validate() error {
	if !(p.K1 >= 0) || math.IsInf(p.K1, 0) {
		return fmt.Errorf("bm25: k1 = %v, want ≥ 0", p.K1)
	}
	for f := range p.B {
		if !(p.B[f] >= 0 && p.B[f] <= 1) {
			return fmt.Errorf("bm25: b = %v, want 0 to 1", p.B[f])
		}
		if !(p.Weight[f] >= 0) || math.IsInf(p.Weight[f], 0) {
			return fmt.Errorf("bm25: field weight %v, want ≥ 0", p.Weight[f])
		}
	}
	return nil
}

// Query is a search request.
type Query struct {
	Terms       []string // distinct analyzed terms
	MaxLevel    uint8    // blocks of a higher sensitivity level are left out before ranking
	K           int      // hits to return
	Params      Params
	Conjunctive bool // every term must match (default: any term)
	// Allowed, when not nil, is a bitmap of the blocks that may be
	// ranked, by id (block b is bit b%64 of Allowed[b/64]; beyond its
	// length, none): a metadata filter, applied per posting like the
	// level. Statistics are not changed by it: a block scores as it would
	// without the filter.
	Allowed []uint64
}

// Hit is a ranked block.
type Hit struct {
	Block int64
	Score float64
}

// Search ranks the live blocks for q and returns the best q.K, highest
// score first, equal scores by ascending block id. Terms are scored in the
// order given and segments in id order, so equal inputs give bit-identical
// scores. Posting lists come from the cache or, for the terms it lacks, from
// db. Call it inside View, reading with a Querier of the transaction the
// caller reads its hits with (db is used only on a cache miss).
//
// Blocks above q.MaxLevel are invisible, statistics included: N, the
// document frequencies and the average field lengths count only the live
// blocks of level q.MaxLevel or lower, so every score equals, bit for bit,
// the score in an index that never held the blocks above it, and scores
// tell a caller nothing about blocks it may not see. Where such blocks
// exist, a term's document frequency is counted from its posting lists
// (read anyway to score them), which decodes them twice.
//
// A disjunctive query is evaluated document at a time with MaxScore
// (maxscore.go): it returns the same hits, scores and order as scoring
// every posting, which a conjunctive query still does.
func (ix *Index) Search(ctx context.Context, db Querier, q Query) ([]Hit, error) {
	hits, _, err := ix.search(ctx, db, q, false)
	return hits, err
}

// searchStats counts a search's work: the postings of its terms' lists
// and those it scored.
type searchStats struct {
	postings, scored int
}

// search is Search; with exhaustive set it scores every posting term at a
// time (the reference MaxScore is tested against).
func (ix *Index) search(ctx context.Context, db Querier, q Query, exhaustive bool) ([]Hit, searchStats, error) {
	var st searchStats
	n, avg := ix.visible(q.MaxLevel)
	if q.K <= 0 || len(q.Terms) == 0 || n == 0 {
		return nil, st, nil
	}
	hidden := n < ix.live // live blocks above the caller's level exist
	var terms []int32
	pos := map[int32]int{}
	for _, t := range q.Terms {
		id, ok := ix.ids.get(t)
		if !ok || ix.df[id][0] <= 0 {
			if q.Conjunctive {
				return nil, st, nil
			}
			continue
		}
		if _, dup := pos[id]; dup {
			continue
		}
		pos[id] = len(terms)
		terms = append(terms, id)
	}
	if len(terms) == 0 {
		return nil, st, nil
	}
	// Posting lists: from the cache, the others in one query.
	var lists []plist
	var missing []int32
	for i, id := range terms {
		if ls, ok := ix.cache.get(id); ok {
			for _, l := range ls {
				lists = append(lists, plist{i, l.seg, l.data, l.sk})
			}
			continue
		}
		missing = append(missing, id)
	}
	if len(missing) > 0 {
		fetched, err := readLists(ctx, db, missing)
		if err != nil {
			return nil, st, fmt.Errorf("fts: read postings: %w", err)
		}
		for _, id := range missing {
			ls := fetched[id] // none: cached as such, the term has no list
			for _, l := range ls {
				lists = append(lists, plist{pos[id], l.seg, l.data, l.sk})
			}
			ix.cache.put(id, ls)
		}
	}
	sort.Slice(lists, func(i, j int) bool {
		if lists[i].term != lists[j].term {
			return lists[i].term < lists[j].term
		}
		return lists[i].seg < lists[j].seg
	})

	p := q.Params
	// The terms some visible block holds, in query order, with their idf.
	var qts []qterm
	for i, id := range terms {
		start := sort.Search(len(lists), func(j int) bool { return lists[j].term >= i })
		end := start
		for end < len(lists) && lists[end].term == i {
			end++
		}
		mine := lists[start:end]
		d := ix.df[id][0]
		if hidden {
			var err error
			if d, err = ix.visibleDF(mine, id, q.MaxLevel); err != nil {
				return nil, st, err
			}
		}
		if d <= 0 {
			if q.Conjunctive {
				return nil, st, nil
			}
			continue
		}
		fd := float64(d)
		qts = append(qts, qterm{id: id, idf: math.Log(1 + (float64(n)-fd+0.5)/(fd+0.5)), lists: mine})
	}
	// MaxScore's bounds assume a finite, non-negative score per posting:
	// with K1 = 0 a posting whose fields all weigh 0 scores 0/0.
	degenerate := p.K1 == 0 && (p.Weight[Body] == 0 || p.Weight[Context] == 0)
	if !exhaustive && !q.Conjunctive && !degenerate {
		return ix.maxScore(qts, q, avg)
	}
	acc := getAcc(len(ix.blocks))
	defer putAcc(acc)
	for _, qt := range qts {
		id, idf, mine := qt.id, qt.idf, qt.lists
		// The scoring loop is eachVisible written out: no call per posting.
		var post Posting
		for _, l := range mine {
			dec, err := newDecoder(l.data)
			if err != nil {
				return nil, st, fmt.Errorf("fts: term %d segment %d: %w", id, l.seg, err)
			}
			for {
				ok, err := dec.next(&post)
				if err != nil {
					return nil, st, fmt.Errorf("fts: term %d segment %d: %w", id, l.seg, err)
				}
				if !ok {
					break
				}
				if post.Block >= int64(len(ix.blocks)) {
					return nil, st, fmt.Errorf("fts: term %d segment %d: block %d unknown", id, l.seg, post.Block)
				}
				st.postings++
				b := &ix.blocks[post.Block]
				if b.state != live || b.level > q.MaxLevel {
					continue
				}
				if q.Allowed != nil && (int(post.Block>>6) >= len(q.Allowed) || q.Allowed[post.Block>>6]&(1<<(post.Block&63)) == 0) {
					continue
				}
				acc.add(post.Block, bm25f(&post.TF, &b.len, idf, p, avg))
				st.scored++
			}
		}
	}
	return acc.top(q.K, q.Conjunctive, len(qts)), st, nil
}

// qterm is a query term some visible block holds: its id, its idf and its
// posting lists (one per segment, ascending segment id).
type qterm struct {
	id    int32
	idf   float64
	lists []plist
}

// plist is one posting list of a query: the term's position in the query,
// the segment and the encoded list.
type plist struct {
	term int
	seg  int32
	data []byte
	sk   *skips // its skip table, built on first use
}

// visibleDF counts the live blocks of level maxLevel or lower in the
// posting lists of one term (its lists in every segment): the term's
// document frequency for a caller of that level.
func (ix *Index) visibleDF(lists []plist, term int32, maxLevel uint8) (int32, error) {
	var d int32
	var post Posting
	for _, l := range lists {
		dec, err := newDecoder(l.data)
		if err != nil {
			return 0, fmt.Errorf("fts: term %d segment %d: %w", term, l.seg, err)
		}
		for {
			ok, err := dec.next(&post)
			if err != nil {
				return 0, fmt.Errorf("fts: term %d segment %d: %w", term, l.seg, err)
			}
			if !ok {
				break
			}
			if post.Block >= int64(len(ix.blocks)) {
				return 0, fmt.Errorf("fts: term %d segment %d: block %d unknown", term, l.seg, post.Block)
			}
			if b := ix.blocks[post.Block]; b.state == live && b.level <= maxLevel {
				d++
			}
		}
	}
	return d, nil
}

// accumulator holds per-block scores for one query: dense arrays indexed by
// block id, and the list of blocks touched so that clearing costs only
// what the query used.
type accumulator struct {
	score   []float64
	matched []uint16
	touched []int64
}

var accs sync.Pool

func getAcc(n int) *accumulator {
	a, _ := accs.Get().(*accumulator)
	if a == nil {
		a = &accumulator{}
	}
	if len(a.score) < n {
		a.score = make([]float64, n)
		a.matched = make([]uint16, n)
	}
	return a
}

func putAcc(a *accumulator) {
	for _, id := range a.touched {
		a.score[id], a.matched[id] = 0, 0
	}
	a.touched = a.touched[:0]
	accs.Put(a)
}

func (a *accumulator) add(id int64, s float64) {
	if a.matched[id] == 0 {
		a.touched = append(a.touched, id)
	}
	a.score[id] += s
	a.matched[id]++
}

// top returns the k best touched blocks; with all set, only blocks that
// matched every one of n terms.
func (a *accumulator) top(k int, all bool, n int) []Hit {
	h := make(hitHeap, 0, min(k, len(a.touched))) // k may be far beyond the candidates
	for _, id := range a.touched {
		if all && int(a.matched[id]) < n {
			continue
		}
		hit := Hit{id, a.score[id]}
		if len(h) < k {
			heap.Push(&h, hit)
		} else if better(hit, h[0]) {
			h[0] = hit
			heap.Fix(&h, 0)
		}
	}
	out := make([]Hit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(Hit)
	}
	return out
}

// better orders hits: higher score, then lower block id.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Block < b.Block
}

// hitHeap is a min-heap by better: its root is the worst kept hit.
type hitHeap []Hit

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// bm25f is one term's BM25F score in a block: with per-field term
// frequencies tf and field lengths blen, the pseudo-frequency
// tf' = Σ_f w_f · tf_f / (1 − b_f + b_f · len_f / avglen_f) (a field with no
// average length is not normalised), then idf · tf' · (k1 + 1) / (k1 + tf')
// (Robertson, Zaragoza & Taylor 2004; see Params). The exhaustive scorer and
// MaxScore both call it, so their scores agree bit for bit.
func bm25f(tf, blen *[NumFields]uint32, idf float64, p Params, avg [NumFields]float64) float64 {
	var t float64
	for f := 0; f < NumFields; f++ {
		if tf[f] == 0 {
			continue
		}
		nf := 1.0
		if avg[f] > 0 {
			nf = 1 - p.B[f] + p.B[f]*float64(blen[f])/avg[f]
		}
		t += p.Weight[f] * float64(tf[f]) / nf
	}
	return idf * t * (p.K1 + 1) / (p.K1 + t)
}

// readLists reads the posting lists of the term ids (in any order) from
// fts_postings in one query, each term's lists in segment order, each with
// a skip table to build on first use. The query bounds term_id by the ids'
// range too, which lets DuckDB skip the row groups outside it (a segment's
// rows are in term order). Terms with no list are absent from the map.
func readLists(ctx context.Context, db Querier, ids []int32) (map[int32][]segList, error) {
	var in strings.Builder
	lo, hi := ids[0], ids[0]
	for i, id := range ids {
		if i > 0 {
			in.WriteByte(',')
		}
		in.WriteString(strconv.Itoa(int(id)))
		lo, hi = min(lo, id), max(hi, id)
	}
	lists := make(map[int32][]segList, len(ids))
	err := scan(ctx, db, fmt.Sprintf(`SELECT term_id, segment_id, data FROM fts_postings WHERE term_id BETWEEN %d AND %d AND term_id IN (%s)`, lo, hi, in.String()),
		func(r *sql.Rows) error {
			var id, seg int32
			var data []byte
			if err := r.Scan(&id, &seg, &data); err != nil {
				return err
			}
			lists[id] = append(lists[id], segList{seg, data, &skips{}})
			return nil
		})
	if err != nil {
		return nil, err
	}
	for _, ls := range lists {
		sort.Slice(ls, func(i, j int) bool { return ls[i].seg < ls[j].seg })
	}
	return lists, nil
}
