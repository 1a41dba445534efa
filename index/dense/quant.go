package dense

import (
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
)

// The quantized search. Each vector x also has a code derived from it
// alone (codes, below): y = R·x, x under a fixed random rotation R
// (rotation.go), quantized to 4 bits per component, u_j = ⌊y_j/Δ⌋ + 8
// clamped to [0, 15] with Δ = max|y_j|/8, stored as 4 bit planes. The
// top plane is the sign of y_j. A search runs three stages:
//
//  1. Over every allowed vector, the top plane only (48 bytes at 384
//     dimensions), the estimate of RaBitQ (Gao & Long, SIGMOD 2024):
//     with s = ±1 the signs of y, ⟨q, x⟩ = ⟨Rq, y⟩ ≈ ⟨Rq, s⟩ / Σ|y_j|.
//     The best c1 = candidates(k) by estimate go on (ties by block id).
//  2. Over those, all 4 planes: ⟨Rq, y⟩ ≈ Δ·Σ_j (u_j − 7.5)·(Rq)_j.
//     The best c2 = refined(k) go on.
//  3. Over those, the float32 inner product, as the exact scan computes
//     it; the best k are the result.
//
// The query is quantized to queryBits bits per component ((Rq)_j ≈ lo +
// δ·v_j) and held as bit planes too, so that each integer inner product
// Σ_j u_j·v_j is a sum of POPCNTs of ANDed words weighted by powers of two
// (24 for stage 1 at 384 dimensions, 96 for stage 2). Every score returned
// is exact and the order is the exact one; a miss can only be a true
// neighbour whose estimate fell outside the candidates, which
// BenchmarkRecall measures.

// queryBits is the bits per component of the quantized query.
const queryBits = 4

// codeBits is the bits per component of a code; the top plane is the sign.
const codeBits = 4

// codes are the quantized copy of an index's vectors, row for row. The
// arrays hold whole blocks of 8 rows; the rows past the last may hold
// stale codes (after truncate and grow), so a kernel never emits a row at
// or past the end of its range.
// The sign plane is also kept laid out by block (kernel.h), for stage 1 to
// read 8 rows' words at once: stage 2 reads a row's planes, each in one
// place.
type codes struct {
	rot    *rotation
	words  int       // uint64 words per row and plane: ⌈dim/64⌉
	rows   int       // rows held
	planes []uint64  // row i's planes at [i*codeBits*words : (i+1)*codeBits*words], plane b at b*words: bit j is bit b of u_j
	signs  []uint64  // plane 3, the signs, by block: word j of row i at (i/8)*8*words + j*8 + i%8
	scale  []float32 // 1/Σ|y_j| (0 for a zero vector)
	pop    []uint32  // set bits of the sign plane
	delta  []float32 // Δ (0 for a zero vector)
	sumU   []uint32  // Σ_j u_j
}

func newCodes(dim int) codes { return codes{rot: newRotation(dim), words: (dim + 63) / 64} }

// grow makes room for n more rows.
func (c *codes) grow(n int) {
	c.rows += n
	blocks := (c.rows + 7) / 8
	if blocks*8 <= len(c.scale) {
		return
	}
	more := blocks*8 - len(c.scale)
	c.planes = slices.Grow(c.planes, more*codeBits*c.words)[:blocks*8*codeBits*c.words]
	c.signs = slices.Grow(c.signs, more*c.words)[:blocks*8*c.words]
	c.scale = slices.Grow(c.scale, more)[:blocks*8]
	c.pop = slices.Grow(c.pop, more)[:blocks*8]
	c.delta = slices.Grow(c.delta, more)[:blocks*8]
	c.sumU = slices.Grow(c.sumU, more)[:blocks*8]
}

// capRows is how many rows c's arrays have room for, in whole blocks of
// 8 rows.
func (c *codes) capRows() int {
	n := min(cap(c.scale), cap(c.pop), cap(c.delta), cap(c.sumU))
	if c.words > 0 {
		n = min(n, cap(c.signs)/c.words, cap(c.planes)/(codeBits*c.words))
	}
	return n / 8 * 8
}

// fits reports whether c's arrays have room for rows rows.
func (c *codes) fits(rows int) bool { return rows <= c.capRows() }

// withCap returns c with its arrays copied into new ones with room for
// rows rows (Index.Reserve); c is not changed. The copy's arrays have c's
// lengths.
func (c codes) withCap(rows int) codes {
	n := (rows + 7) / 8 * 8
	c.planes = withCap(c.planes, n*codeBits*c.words)
	c.signs = withCap(c.signs, n*c.words)
	c.scale = withCap(c.scale, n)
	c.pop = withCap(c.pop, n)
	c.delta = withCap(c.delta, n)
	c.sumU = withCap(c.sumU, n)
	return c
}

// signWord is the index of word j of row i in c.signs.
func (c *codes) signWord(i, j int) int { return i/8*8*c.words + j*8 + i%8 }

// move copies row from to row to.
func (c *codes) move(to, from int) {
	w := c.words
	copy(c.planes[to*codeBits*w:(to+1)*codeBits*w], c.planes[from*codeBits*w:(from+1)*codeBits*w])
	for j := range w {
		c.signs[c.signWord(to, j)] = c.signs[c.signWord(from, j)]
	}
	c.scale[to], c.pop[to], c.delta[to], c.sumU[to] = c.scale[from], c.pop[from], c.delta[from], c.sumU[from]
}

// truncate keeps the first n rows.
func (c *codes) truncate(n int) {
	c.rows = n
	blocks := (n + 7) / 8
	c.planes = c.planes[:blocks*8*codeBits*c.words]
	c.signs = c.signs[:blocks*8*c.words]
	c.scale, c.pop, c.delta, c.sumU = c.scale[:blocks*8], c.pop[:blocks*8], c.delta[:blocks*8], c.sumU[:blocks*8]
}

// buildCodes returns the codes of the rows of vecs, encoded over all cores,
// in arrays with room for capRows rows.
func buildCodes(dim int, vecs []float32, capRows int) codes {
	c := newCodes(dim).withCap(capRows)
	n := 0
	if dim > 0 {
		n = len(vecs) / dim
	}
	c.grow(n)
	workers := max(1, min(runtime.GOMAXPROCS(0), (n+minShard-1)/minShard))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, to := shardBound(n, w, workers), shardBound(n, w+1, workers)
			c.encodeRows(from, vecs[from*dim:to*dim])
		}()
	}
	wg.Wait()
	return c
}

// quantQuery is a query prepared for the estimates.
type quantQuery struct {
	planes []uint64 // plane p is planes[p*words : (p+1)*words]: bit j set when bit p of v_j is
	lo     float32  // (Rq)_j ≈ lo + delta·v_j
	delta  float32
	sum    float32 // Σ_j (lo + delta·v_j)
}

func newQuantQuery(c *codes, q []float32) *quantQuery {
	y := make([]float32, len(q))
	c.rot.rotate(y, q)
	lo, hi := y[0], y[0]
	for _, x := range y {
		lo, hi = min(lo, x), max(hi, x)
	}
	qq := &quantQuery{lo: lo, delta: (hi - lo) / (1<<queryBits - 1), planes: make([]uint64, queryBits*c.words)}
	var sum float64
	for j, x := range y {
		var v uint64
		if qq.delta > 0 {
			v = uint64(math.Round(float64((x - lo) / qq.delta)))
			v = min(v, 1<<queryBits-1)
		}
		for p := range queryBits {
			qq.planes[p*c.words+j>>6] |= (v >> p & 1) << (j & 63)
		}
		sum += float64(lo) + float64(qq.delta)*float64(v)
	}
	qq.sum = float32(sum)
	return qq
}

// cand is a candidate of the first stages: a row and its estimate.
type cand struct {
	est float32
	row int32
}

// best reorders cs so that cs[:c] are its c best (higher estimate, then
// lower block id: a total order, so the c are one set whatever the order
// cs came in), in no particular order, and returns cs[:c]. It is Hoare's
// quickselect: linear time, where keeping a heap of c would cost a log c
// per candidate.
func best(cs []cand, c int, ids []int64) []cand {
	if c >= len(cs) {
		return cs
	}
	better := func(a, b cand) bool {
		if a.est != b.est {
			return a.est > b.est
		}
		return ids[a.row] < ids[b.row]
	}
	lo, hi := 0, len(cs)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if better(cs[mid], cs[lo]) {
			cs[mid], cs[lo] = cs[lo], cs[mid]
		}
		if better(cs[hi], cs[lo]) {
			cs[hi], cs[lo] = cs[lo], cs[hi]
		}
		if better(cs[hi], cs[mid]) {
			cs[hi], cs[mid] = cs[mid], cs[hi]
		}
		pivot := cs[mid]
		i, j := lo, hi
		for i <= j {
			for better(cs[i], pivot) {
				i++
			}
			for better(pivot, cs[j]) {
				j--
			}
			if i <= j {
				cs[i], cs[j] = cs[j], cs[i]
				i++
				j--
			}
		}
		switch {
		case c-1 <= j:
			hi = j
		case c-1 >= i:
			lo = i
		default:
			return cs[:c]
		}
	}
	return cs[:c]
}

// minEst is the lowest estimate of cs (not empty).
func minEst(cs []cand) float32 {
	m := cs[0].est
	for _, x := range cs[1:] {
		m = min(m, x.est)
	}
	return m
}

// shardBound is where shard s of shards over n rows begins: a multiple of
// 8 (a block of the sign plane), or n.
func shardBound(n, s, shards int) int {
	if s == shards {
		return n
	}
	return n * s / shards &^ 7
}

// estimateChunkRows is the rows stage 1 hands to the kernel at a time.
const estimateChunkRows = 4096 // a multiple of 8

// estimate is stage 1: it scans rows [from, to) of allowed blocks (nil:
// all) of level ≤ maxLevel and returns the best c by the one-bit
// estimate. Candidates at or above the threshold (the worst kept, once c
// are kept) gather in a buffer, cut back to the best c when it holds 2c.
func (ix *Index) estimate(qq *quantQuery, c int, maxLevel uint8, allowed []uint64, from, to int) []cand {
	buf := make([]cand, 0, min(2*c, to-from)+estimateChunkRows)
	rows := make([]int32, 0, estimateChunkRows)
	ests := make([]float32, 0, estimateChunkRows)
	thr := negInf
	for at := from; at < to; at += estimateChunkRows {
		rows, ests = ix.codes.estimateChunk(qq, at, min(at+estimateChunkRows, to), thr, rows[:0], ests[:0])
		for j, r := range rows {
			i := int(r)
			if ix.levels[i] > maxLevel || ests[j] < thr {
				continue
			}
			if allowed != nil {
				if id := ix.ids[i]; int(id>>6) >= len(allowed) || allowed[id>>6]&(1<<(id&63)) == 0 {
					continue
				}
			}
			buf = append(buf, cand{ests[j], r})
		}
		if len(buf) >= 2*c {
			buf = best(buf, c, ix.ids)
			thr = minEst(buf)
		}
	}
	return best(buf, c, ix.ids)
}

// refine is stage 2: it estimates the given rows from all planes of their
// codes and returns the best c.
func (ix *Index) refine(qq *quantQuery, c int, rows []int32) []cand {
	ests := make([]float32, len(rows))
	ix.codes.refineRows(qq, rows, ests)
	cs := make([]cand, len(rows))
	for j, r := range rows {
		cs[j] = cand{ests[j], r}
	}
	return best(cs, c, ix.ids)
}

// Tuning of the quantized search (measured by BenchmarkRecall).
var (
	// quantMinRows is the fewest vectors searched by their codes: below,
	// the exact scan is as fast.
	quantMinRows = 50000
	// quantMaxShare: the stage 1 candidates are at most 1/quantMaxShare of
	// the vectors, or the exact scan is cheaper.
	quantMaxShare = 8
	// candShare, candMin and candPerK set the candidates of stage 1 for a
	// top k over n vectors: max(candMin, candPerK·k, n/candShare). On
	// BenchmarkRecall's top 10, recall@10 at 100k vectors was 0.993 with
	// 2,000 candidates and 0.999 with 4,000; at 1M, 0.9995 with 10,000
	// and 20,000, 1 with 40,000.
	candShare = 100
	candMin   = 4000
	candPerK  = 200
	// refineMin and refinePerK set the candidates of stage 2, rescored
	// exactly: max(refineMin, refinePerK·k).
	refineMin  = 200
	refinePerK = 20
)

// candidates is how many of n vectors stage 1 keeps for a top k.
func candidates(k, n int) int {
	if candPerK > 0 && k > math.MaxInt/candPerK {
		return math.MaxInt
	}
	return max(candMin, candPerK*k, n/candShare)
}

// refined is how many candidates stage 2 keeps for a top k.
func refined(k int) int {
	if refinePerK > 0 && k > math.MaxInt/refinePerK {
		return math.MaxInt
	}
	return max(refineMin, refinePerK*k)
}

// searchQuantized is the quantized search: the best c1 allowed vectors by
// the one-bit estimate, over all cores, the best c2 of those by the
// four-bit one, then the best k of those by exact score.
func (ix *Index) searchQuantized(ctx context.Context, q []float32, k, c1 int, maxLevel uint8, allowed []uint64) ([]Hit, error) {
	qq := newQuantQuery(&ix.codes, q)
	rows := len(ix.ids)
	shards := max(1, min(runtime.GOMAXPROCS(0), (rows+minShard-1)/minShard))
	found := make([][]cand, shards)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[s] = ix.estimate(qq, c1, maxLevel, allowed, shardBound(rows, s, shards), shardBound(rows, s+1, shards))
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all := best(slices.Concat(found...), c1, ix.ids)
	// Stage 2 in row order (the memory in order), over all cores.
	cs := rowsOf(all)
	c2 := refined(k)
	shards = max(1, min(runtime.GOMAXPROCS(0), len(cs)/1024))
	found = make([][]cand, shards)
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[s] = ix.refine(qq, c2, cs[len(cs)*s/shards:len(cs)*(s+1)/shards])
		}()
	}
	wg.Wait()
	all = best(slices.Concat(found...), c2, ix.ids)
	top := ix.rescore(q, k, rowsOf(all))
	return top.sorted(), ctx.Err()
}

// rowsOf returns the rows of cs in ascending order.
func rowsOf(cs []cand) []int32 {
	rows := make([]int32, len(cs))
	for i, x := range cs {
		rows[i] = x.row
	}
	slices.Sort(rows)
	return rows
}

// rescore is stage 3: it scores the given rows exactly and keeps the best k.
func (ix *Index) rescore(q []float32, k int, rows []int32) topK {
	t := topK{h: make([]Hit, 0, min(k, len(rows)))}
	d := ix.dim
	for _, i := range rows {
		s := float64(dot(q, ix.vecs[int(i)*d:(int(i)+1)*d]))
		if len(t.h) == k && s < t.h[0].Score {
			continue
		}
		t.push(Hit{Block: ix.ids[i], Score: s}, k)
	}
	return t
}
