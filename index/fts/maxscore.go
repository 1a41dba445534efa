package fts

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"sync"
)

// Disjunctive queries are evaluated document at a time with MaxScore
// (Turtle & Flood 1995, "Query evaluation: strategies and optimizations",
// IPM 31(6); in the form of Mallia et al. 2019, "An experimental study of
// index compression and DAAT query processing methods", ECIR, with the
// per-block bounds of Ding & Suel 2011, "Faster top-k document retrieval
// using block-max indexes", SIGIR, used when probing a list).
//
// Every term's posting list in a segment has an upper bound of the score
// any of its postings can add. With the lists sorted by bound, the longest
// prefix whose bounds sum below the k-th best score so far (θ) is
// "non-essential": a block found only in those lists cannot enter the top
// k, so candidates come only from the other, essential, lists (the rare
// terms, whose lists are short); the non-essential lists are only probed
// for those candidates, skipping whole chunks of postings, and a candidate
// is dropped as soon as its score so far plus the bounds of the lists not
// yet probed falls below θ. Where the bounds of the essential lists'
// current chunks and of the non-essential lists sum below θ, no block up to
// the first end of those chunks can enter, and the essential lists jump
// past it (block-max, as in Ding & Suel). A block's postings are all in one segment (a
// write adds its blocks to one new segment; a merge replaces its input
// segments), so each segment is evaluated apart, θ carried over.
//
// Bounds: a list is cut into chunks of chunkSize postings; a chunk keeps
// the largest term frequency per field and the shortest field length
// among its postings that hold the term in that field. For BM25F (Params)
// tf̃ grows with each tf_f and shrinks with each len_f (B ≥ 0), and the
// saturation tf̃·(K1+1)/(K1+tf̃) grows with tf̃, so
//
//	ub(chunk) = idf · t·(K1+1)/(K1+t),  t = Σ_f Weight[f]·maxtf_f / (1 − B[f] + B[f]·minlen_f/avglen_f)
//
// bounds every posting of the chunk, under any Params, clearance level
// (idf and avglen are the query's) or filter; a list's bound is its
// chunks' largest. Pruning leaves a margin of 1e-9 relative for rounding.
//
// Exactness: a block's score is computed as the exhaustive scorer does,
// the same expression per term, summed in query term order from zero, so
// scores are bit-identical; a block is dropped only when its score is
// certainly below θ, so the top k and their order (score, then block id)
// are those of exhaustive scoring. Blocks that are not live, above the
// caller's level or outside Query.Allowed never become candidates; where a
// candidate falls outside Query.Allowed, the essential lists jump to the
// next allowed block, so a selective filter skips whole chunks.

// chunkSize is the postings per skip-table chunk.
const chunkSize = 128

// slack is the relative margin kept when pruning against θ.
const slack = 1 + 1e-9

// chunk is one skip-table entry: where the chunk starts in the encoded
// list (offset of its first posting's gap, and the block id the gap adds
// to), its last block id, and the per-field bound inputs.
type chunk struct {
	off    int
	base   int64
	last   int64
	maxTF  [NumFields]uint32
	minLen [NumFields]uint32 // over postings with the term in the field
}

// skips is a posting list's skip table, built once (on first use, under
// the index's read lock) and kept with the list: lists never change, nor
// do the field lengths of their blocks.
type skips struct {
	once   sync.Once
	err    error
	n      int // postings
	chunks []chunk
}

// skipTable returns l's skip table, building it on first use.
func (ix *Index) skipTable(l plist, term int32) (*skips, error) {
	sk := l.sk
	if sk == nil {
		sk = &skips{}
	}
	sk.once.Do(func() { sk.err = ix.buildSkips(sk, l.data) })
	if sk.err != nil {
		return nil, fmt.Errorf("fts: term %d segment %d: %w", term, l.seg, sk.err)
	}
	return sk, nil
}

func (ix *Index) buildSkips(sk *skips, data []byte) error {
	dec, err := newDecoder(data)
	if err != nil {
		return err
	}
	sk.n = int(dec.left)
	sk.chunks = make([]chunk, 0, (sk.n+chunkSize-1)/chunkSize)
	var post Posting
	for i := 0; ; i++ {
		off, base := len(data)-len(dec.data), dec.prev
		ok, err := dec.next(&post)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if post.Block >= int64(len(ix.blocks)) {
			return fmt.Errorf("block %d unknown", post.Block)
		}
		if i%chunkSize == 0 {
			c := chunk{off: off, base: base}
			for f := range c.minLen {
				c.minLen[f] = math.MaxUint32
			}
			sk.chunks = append(sk.chunks, c)
		}
		c := &sk.chunks[len(sk.chunks)-1]
		c.last = post.Block
		b := &ix.blocks[post.Block]
		for f := range NumFields {
			if post.TF[f] > 0 {
				c.maxTF[f] = max(c.maxTF[f], post.TF[f])
				c.minLen[f] = min(c.minLen[f], b.len[f])
			}
		}
	}
}

// cursor walks one term's posting list in one segment.
type cursor struct {
	term  int // position in the query's scored terms
	idf   float64
	sk    *skips
	ub    float64   // bound of the whole list
	cub   []float64 // bound per chunk
	data  []byte    // the encoded list
	pos   int       // offset of the next posting in data
	prev  int64     // block id the next gap adds to
	i     int       // index of the current posting
	block int64     // current posting's block; math.MaxInt64 at the end
	tf    [NumFields]uint32
}

// load decodes posting c.i at c.pos (or marks the end).
func (c *cursor) load() error {
	if c.i >= c.sk.n {
		c.block = math.MaxInt64
		return nil
	}
	gap, k := binary.Uvarint(c.data[c.pos:])
	if k <= 0 {
		return errCorrupt
	}
	c.pos += k
	c.prev += int64(gap)
	c.block = c.prev
	for f := range c.tf {
		tf, k := binary.Uvarint(c.data[c.pos:])
		if k <= 0 {
			return errCorrupt
		}
		c.pos += k
		c.tf[f] = uint32(tf)
	}
	return nil
}

// next moves to the following posting.
func (c *cursor) next() error {
	c.i++
	return c.load()
}

// seek moves to the first posting of a block ≥ target, jumping over
// chunks that end before it.
func (c *cursor) seek(target int64) error {
	if c.block >= target {
		return nil
	}
	ch := c.i / chunkSize
	if c.sk.chunks[ch].last < target {
		j := ch + 1 + sort.Search(len(c.sk.chunks)-ch-1, func(j int) bool { return c.sk.chunks[ch+1+j].last >= target })
		if j == len(c.sk.chunks) {
			c.i, c.block = c.sk.n, math.MaxInt64
			return nil
		}
		c.i, c.pos, c.prev = j*chunkSize, c.sk.chunks[j].off, c.sk.chunks[j].base
		if err := c.load(); err != nil {
			return err
		}
	}
	for c.block < target {
		if err := c.next(); err != nil {
			return err
		}
	}
	return nil
}

// maxScore is Search for disjunctive queries (see the top of this file).
func (ix *Index) maxScore(qts []qterm, q Query, avg [NumFields]float64) ([]Hit, searchStats, error) {
	var st searchStats
	p := q.Params
	// t·(K1+1)/(K1+t) per chunk, from its bound inputs.
	bound := func(c *chunk, idf float64) float64 {
		var t float64
		for f := range NumFields {
			if c.maxTF[f] == 0 {
				continue
			}
			nf := 1.0
			if avg[f] > 0 {
				nf = 1 - p.B[f] + p.B[f]*float64(c.minLen[f])/avg[f]
			}
			t += p.Weight[f] * float64(c.maxTF[f]) / nf
		}
		return idf * t * (p.K1 + 1) / (p.K1 + t)
	}
	// The cursors of each segment, in ascending segment id.
	bySeg := map[int32][]*cursor{}
	var segs []int32
	for ti, qt := range qts {
		for _, l := range qt.lists {
			sk, err := ix.skipTable(l, qt.id)
			if err != nil {
				return nil, st, err
			}
			if sk.n == 0 {
				continue
			}
			c := &cursor{term: ti, idf: qt.idf, sk: sk, data: l.data, cub: make([]float64, len(sk.chunks))}
			for j := range sk.chunks {
				c.cub[j] = bound(&sk.chunks[j], qt.idf)
				c.ub = max(c.ub, c.cub[j])
			}
			c.pos = sk.chunks[0].off
			if err := c.load(); err != nil {
				return nil, st, fmt.Errorf("fts: term %d segment %d: %w", qt.id, l.seg, err)
			}
			st.postings += sk.n
			if bySeg[l.seg] == nil {
				segs = append(segs, l.seg)
			}
			bySeg[l.seg] = append(bySeg[l.seg], c)
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })

	h := make(hitHeap, 0, min(q.K, 1024))
	theta := math.Inf(-1) // the k-th best score once there are k hits
	contrib := make([]float64, len(qts))
	has := make([]bool, len(qts))
	for _, seg := range segs {
		cs := bySeg[seg]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].ub < cs[j].ub })
		prefix := make([]float64, len(cs)+1) // prefix[j]: bounds of cs[:j]
		for j, c := range cs {
			prefix[j+1] = prefix[j] + c.ub
		}
		ne := 0 // cs[:ne] are non-essential
		split := func() {
			for ne < len(cs) && prefix[ne+1]*slack < theta {
				ne++
			}
		}
		split()
		for ne < len(cs) {
			// The next candidate: the least block of the essential lists.
			// Up to the first end of their current chunks (m), no block
			// scores more than those chunks' bounds and the non-essential
			// lists' (block-max): below θ, the lists jump past m at once.
			d, m := int64(math.MaxInt64), int64(math.MaxInt64)
			ub := prefix[ne]
			for _, c := range cs[ne:] {
				d = min(d, c.block)
				if c.i < c.sk.n {
					ch := c.i / chunkSize
					m = min(m, c.sk.chunks[ch].last)
					ub += c.cub[ch]
				}
			}
			if d == math.MaxInt64 {
				break
			}
			if theta > 0 && ub*slack < theta && m < math.MaxInt64 {
				for _, c := range cs[ne:] {
					if err := c.seek(m + 1); err != nil {
						return nil, st, fmt.Errorf("fts: segment %d: %w", seg, err)
					}
				}
				continue
			}
			if q.Allowed != nil {
				// Outside the filter: jump the essential lists to the next
				// allowed block (a selective filter skips whole chunks).
				next := nextAllowed(q.Allowed, d)
				if next < 0 {
					break
				}
				if next > d {
					for _, c := range cs[ne:] {
						if err := c.seek(next); err != nil {
							return nil, st, fmt.Errorf("fts: segment %d: %w", seg, err)
						}
					}
					continue
				}
			}
			b := &ix.blocks[d]
			cand := b.state == live && b.level <= q.MaxLevel
			if cand && theta > 0 {
				// The block's bound from the chunks it lies in: below θ,
				// it is not scored at all.
				ub := prefix[ne]
				for _, c := range cs[ne:] {
					if c.block == d {
						ub += c.cub[c.i/chunkSize]
					}
				}
				cand = ub*slack >= theta
			}
			// Score the essential lists if d is a candidate (and move them
			// past d).
			sum := 0.0
			for _, c := range cs[ne:] {
				if c.block != d {
					continue
				}
				if cand {
					s := ix.termScore(c, b, p, avg)
					contrib[c.term], has[c.term] = s, true
					sum += s
					st.scored++
				}
				if err := c.next(); err != nil {
					return nil, st, fmt.Errorf("fts: segment %d: %w", seg, err)
				}
			}
			if !cand {
				continue
			}
			// Probe the non-essential lists, most promising first,
			// while the block can still reach θ.
			rest := prefix[ne]
			keep := true
			for j := ne - 1; j >= 0 && keep; j-- {
				if (sum+rest)*slack < theta {
					keep = false
					break
				}
				c := cs[j]
				rest -= c.ub
				if err := c.seek(d); err != nil {
					return nil, st, fmt.Errorf("fts: segment %d: %w", seg, err)
				}
				if c.block != d {
					continue
				}
				if (sum+rest+c.cub[c.i/chunkSize])*slack < theta {
					keep = false
					break
				}
				s := ix.termScore(c, b, p, avg)
				contrib[c.term], has[c.term] = s, true
				sum += s
				st.scored++
			}
			if keep && (sum+rest)*slack < theta {
				keep = false
			}
			if keep {
				// The exhaustive scorer's sum: query term order, from 0.
				score := 0.0
				for t := range has {
					if has[t] {
						score += contrib[t]
					}
				}
				hit := Hit{d, score}
				if len(h) < q.K {
					heap.Push(&h, hit)
				} else if better(hit, h[0]) {
					h[0] = hit
					heap.Fix(&h, 0)
				}
				if len(h) == q.K && h[0].Score > theta {
					theta = h[0].Score
					split()
				}
			}
			clear(has)
		}
		// Carry θ to the next segment: its split starts from it.
	}
	out := make([]Hit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(Hit)
	}
	return out, st, nil
}

// termScore is one term's BM25F score for block b at c's posting: the
// exhaustive scorer's expression (bm25f), so the two agree bit for bit.
func (ix *Index) termScore(c *cursor, b *blockInfo, p Params, avg [NumFields]float64) float64 {
	return bm25f(&c.tf, &b.len, c.idf, p, avg)
}

// nextAllowed returns the least block ≥ d in the bitmap allowed, or −1.
func nextAllowed(allowed []uint64, d int64) int64 {
	w := int(d >> 6)
	if w >= len(allowed) {
		return -1
	}
	if word := allowed[w] >> (d & 63); word != 0 {
		return d + int64(bits.TrailingZeros64(word))
	}
	for w++; w < len(allowed); w++ {
		if allowed[w] != 0 {
			return int64(w)<<6 + int64(bits.TrailingZeros64(allowed[w]))
		}
	}
	return -1
}
