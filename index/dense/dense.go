// Package dense is the dense leg of escurel's search: the vectors of one
// embedding set held in memory and searched by inner product.
//
// Vectors are unit length (embed.Normalize), so the inner product is the
// cosine similarity. Below quantMinRows vectors, Search scans every
// vector exactly, split over all cores, each core keeping its own top k
// (about 10 ms for 100,000 vectors of 384 dimensions on 2 quiet cores; see
// BenchmarkSearch). From quantMinRows on, it searches a quantized copy of
// the vectors, derived from each vector alone, and rescores the best few
// hundred candidates exactly (quant.go; recall@10 against the exact scan
// ≥ 0.999 on BenchmarkRecall at 100k and 1M vectors). Either way returned
// scores are exact, ties are ordered by block id, and levels and filters
// apply before any vector is scored.
//
// An Index is filled by the caller (package index) from the DuckDB table of
// the embedding set and kept in step with it by Apply, which the caller runs
// where the transaction commits.
package dense

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"sort"
	"sync"
)

// Hit is a block found by Search: its id and cosine similarity to the
// query, in [-1, 1].
type Hit struct {
	Block int64
	Score float64
}

// Index holds one embedding set's vectors. It is safe for concurrent use.
type Index struct {
	dim int

	// changeMu orders the changes (Apply, Reserve): Reserve copies the
	// arrays under mu's read lock, which a change must not run beside.
	// Lock order: changeMu, then mu; never changeMu under mu.
	changeMu sync.Mutex
	mu       sync.RWMutex
	ids      []int64
	levels   []uint8
	vecs     []float32 // row i is vecs[i*dim : (i+1)*dim]
	codes    codes     // row i is the code of row i of vecs (quant.go)
	pos      map[int64]int
}

// New returns an empty index of dim-dimensional vectors.
func New(dim int) *Index {
	return &Index{dim: dim, pos: map[int64]int{}, codes: newCodes(dim)}
}

// Build returns an index of n vectors given as rows: block ids[i] has
// level levels[i] and the unit vector vecs[i*dim : (i+1)*dim]. It takes
// the slices over (the caller must not change them after); Apply appends
// into their spare capacity, and the codes get as much room as vecs has
// (a load gives Room(n) rows: Reserve). Slices of unequal rows or a
// block given twice are an error.
func Build(dim int, ids []int64, levels []uint8, vecs []float32) (*Index, error) {
	if len(levels) != len(ids) || len(vecs) != len(ids)*dim {
		return nil, fmt.Errorf("dense: %d ids, %d levels and %d components for %d dimensions", len(ids), len(levels), len(vecs), dim)
	}
	pos := make(map[int64]int, len(ids))
	for i, id := range ids {
		if _, dup := pos[id]; dup {
			return nil, fmt.Errorf("dense: two vectors for one block")
		}
		pos[id] = i
	}
	// The codes get the room the caller gave vecs (cap), for the same
	// reason (Reserve).
	return &Index{dim: dim, ids: ids, levels: levels, vecs: vecs, pos: pos, codes: buildCodes(dim, vecs, cap(vecs)/max(dim, 1))}, nil
}

// Reserve makes room for n more vectors, so that an Apply adding at most n
// appends them in place, and a copy of the arrays, when one is needed,
// is made while searches go on: under the read lock, where Apply would
// make it under the write lock, which every search waits for. Held
// arrays grow to an eighth more than they need and 1,024 rows (Room).
// At 1M × 384 vectors the copy is about 1.8 GB. A caller that commits
// vectors (index) reserves before its commit's critical section. The
// copy still takes the CPU and memory bandwidth that searches use.
func (ix *Index) Reserve(n int) {
	ix.changeMu.Lock()
	defer ix.changeMu.Unlock()
	if c, ok := ix.copied(n); ok {
		ix.mu.Lock()
		ix.ids, ix.levels, ix.vecs, ix.codes = c.ids, c.levels, c.vecs, c.codes
		ix.mu.Unlock()
	}
}

// copied returns copies of the arrays with room for Room(len+n) rows,
// made under the read lock; ok is false when they have room for n more
// already. Call it with changeMu held: only a change writes the arrays,
// and changeMu keeps every change out until the copies are in place.
func (ix *Index) copied(n int) (c *Index, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rows := len(ix.ids) + n
	if cap(ix.ids) >= rows && cap(ix.levels) >= rows && cap(ix.vecs) >= rows*ix.dim && ix.codes.fits(rows) {
		return nil, false
	}
	room := Room(rows)
	return &Index{ids: withCap(ix.ids, room), levels: withCap(ix.levels, room),
		vecs: withCap(ix.vecs, room*ix.dim), codes: ix.codes.withCap(room)}, true
}

// Cap returns how many vectors the index holds room for: as many as an
// Apply may leave it with before one of its arrays is copied.
func (ix *Index) Cap() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := min(cap(ix.ids), cap(ix.levels), cap(ix.vecs)/max(ix.dim, 1), ix.codes.capRows())
	return n / 8 * 8 // the codes hold whole blocks of 8 rows
}

// withCap returns a copy of s with capacity c (at least len(s)). It
// copies a chunk at a time, so that the goroutine can be preempted
// between chunks (the runtime's memmove cannot be): a stop-the-world of
// the collector need not wait for a whole copy of gigabytes.
func withCap[T any](s []T, c int) []T {
	const chunk = 1 << 16
	out := make([]T, 0, max(c, len(s)))
	for i := 0; i < len(s); i += chunk {
		out = append(out, s[i:min(i+chunk, len(s))]...)
	}
	return out
}

// Room is the rows Reserve makes room for when rows do not fit, and a
// load of rows vectors gives them: an eighth more and 1,024, so that a
// copy is made once in every eighth of growth, not at every write.
func Room(rows int) int { return rows + rows/8 + 1024 }

// Dim returns the dimension of the vectors.
func (ix *Index) Dim() int { return ix.dim }

// Len returns the number of vectors.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.ids)
}

// vector returns a copy of block's vector and its level; ok is false when
// the index holds no vector for block. Only tests read it.
func (ix *Index) vector(block int64) (v []float32, level uint8, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	i, ok := ix.pos[block]
	if !ok {
		return nil, 0, false
	}
	return append([]float32(nil), ix.vecs[i*ix.dim:(i+1)*ix.dim]...), ix.levels[i], true
}

// Entry is a vector to add: the block's id, its sensitivity level (0 =
// public, 1 = internal, 2 = restricted) and its unit vector.
type Entry struct {
	Block  int64
	Level  uint8
	Vector []float32
}

// Apply removes the vectors of the blocks in remove, then adds add (an
// entry for a block already present replaces it). A vector of the wrong
// dimension is an error, and then nothing is changed.
func (ix *Index) Apply(add []Entry, remove []int64) error {
	for _, e := range add {
		if len(e.Vector) != ix.dim {
			return fmt.Errorf("dense: block %d: vector of %d dimensions, want %d", e.Block, len(e.Vector), ix.dim)
		}
	}
	ix.changeMu.Lock()
	defer ix.changeMu.Unlock()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, id := range remove {
		ix.remove(id)
	}
	for _, e := range add {
		ix.remove(e.Block)
		ix.pos[e.Block] = len(ix.ids)
		ix.ids = append(ix.ids, e.Block)
		ix.levels = append(ix.levels, e.Level)
		ix.vecs = append(ix.vecs, e.Vector...)
		ix.codes.grow(1)
		ix.codes.encodeRows(len(ix.ids)-1, e.Vector)
	}
	return nil
}

// remove deletes a vector by moving the last one into its place.
func (ix *Index) remove(id int64) {
	i, ok := ix.pos[id]
	if !ok {
		return
	}
	last := len(ix.ids) - 1
	if i != last {
		ix.ids[i], ix.levels[i] = ix.ids[last], ix.levels[last]
		copy(ix.vecs[i*ix.dim:(i+1)*ix.dim], ix.vecs[last*ix.dim:])
		ix.codes.move(i, last)
		ix.pos[ix.ids[i]] = i
	}
	ix.ids, ix.levels, ix.vecs = ix.ids[:last], ix.levels[:last], ix.vecs[:last*ix.dim]
	ix.codes.truncate(last)
	delete(ix.pos, id)
}

// minShard is the fewest vectors worth a goroutine of their own.
const minShard = 4096

// Search returns the k blocks whose vectors have the highest inner product
// with q, among those of level ≤ maxLevel, best first; equal scores are
// ordered by block id. q must have Dim() components; a zero q matches
// nothing (it has no direction), so the result is empty.
func (ix *Index) Search(ctx context.Context, q []float32, k int, maxLevel uint8) ([]Hit, error) {
	return ix.SearchAllowed(ctx, q, k, maxLevel, nil, 0)
}

// prefilterRatio: a filter that allows fewer than one vector in this many
// is searched by scoring only the allowed blocks (a prefilter); a wider
// one by the full scan, skipping the others.
const prefilterRatio = 16

// SearchAllowed is Search among the blocks of allowed, a bitmap by block
// id (block b is bit b%64 of allowed[b/64]; beyond its length, none) of
// which n are set; nil allows every block. When n is small against the
// vectors held, only the allowed blocks are scored; otherwise the scan
// skips the others. Either way the result is exactly the k best allowed
// blocks.
func (ix *Index) SearchAllowed(ctx context.Context, q []float32, k int, maxLevel uint8, allowed []uint64, n int) ([]Hit, error) {
	mode := autoScan
	if exact, _ := ctx.Value(exactKey{}).(bool); exact {
		mode = exactScan
	}
	return ix.search(ctx, q, k, maxLevel, allowed, n, mode)
}

type exactKey struct{}

// WithExact returns a context under which Search and SearchAllowed scan
// every vector exactly, at any size: the reference a benchmark measures
// the quantized search's recall against (bench/fts; the results of an
// exact search are the true top k, ties by block id).
func WithExact(ctx context.Context) context.Context {
	return context.WithValue(ctx, exactKey{}, true)
}

// scanMode chooses between the exact scan and the quantized search.
type scanMode int

const (
	autoScan      scanMode = iota // quantized from quantMinRows vectors on
	exactScan                     // every allowed vector scored in float32
	quantizedScan                 // codes first, then candidates rescored
)

func (ix *Index) search(ctx context.Context, q []float32, k int, maxLevel uint8, allowed []uint64, n int, mode scanMode) ([]Hit, error) {
	if len(q) != ix.dim {
		return nil, fmt.Errorf("dense: query of %d dimensions, want %d", len(q), ix.dim)
	}
	zero := true
	for _, x := range q {
		if x != 0 {
			zero = false
			break
		}
	}
	if k <= 0 || zero {
		return []Hit{}, nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if allowed != nil && n*prefilterRatio < len(ix.ids) {
		h := ix.scanAllowed(q, k, maxLevel, allowed)
		return h.sorted(), ctx.Err()
	}
	rows := len(ix.ids)
	if c := candidates(k, rows); mode == quantizedScan || mode == autoScan && rows >= quantMinRows && c <= rows/quantMaxShare {
		return ix.searchQuantized(ctx, q, k, c, maxLevel, allowed)
	}
	shards := min(runtime.GOMAXPROCS(0), (rows+minShard-1)/minShard)
	if shards <= 1 {
		h := ix.scan(q, k, maxLevel, allowed, 0, rows)
		return h.sorted(), ctx.Err()
	}
	tops := make([]topK, shards)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tops[s] = ix.scan(q, k, maxLevel, allowed, rows*s/shards, rows*(s+1)/shards)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all := tops[0]
	for _, t := range tops[1:] {
		for _, h := range t.h {
			all.push(h, k)
		}
	}
	return all.sorted(), nil
}

// scanAllowed scores the allowed blocks that have a vector, by their
// positions, and keeps the best k.
func (ix *Index) scanAllowed(q []float32, k int, maxLevel uint8, allowed []uint64) topK {
	t := topK{h: make([]Hit, 0, min(k, 1024))}
	d := ix.dim
	for w, word := range allowed {
		for word != 0 {
			id := int64(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			i, ok := ix.pos[id]
			if !ok || ix.levels[i] > maxLevel {
				continue
			}
			s := float64(dot(q, ix.vecs[i*d:(i+1)*d]))
			if len(t.h) == k && s < t.h[0].Score {
				continue
			}
			t.push(Hit{Block: id, Score: s}, k)
		}
	}
	return t
}

// scan scores rows [from, to) of allowed blocks (nil: all) and keeps the
// best k.
func (ix *Index) scan(q []float32, k int, maxLevel uint8, allowed []uint64, from, to int) topK {
	t := topK{h: make([]Hit, 0, min(k, to-from))} // k may be far beyond the rows
	d := ix.dim
	for i := from; i < to; i++ {
		if ix.levels[i] > maxLevel {
			continue
		}
		if allowed != nil {
			if id := ix.ids[i]; int(id>>6) >= len(allowed) || allowed[id>>6]&(1<<(id&63)) == 0 {
				continue
			}
		}
		s := float64(dot(q, ix.vecs[i*d:(i+1)*d]))
		if len(t.h) == k && s < t.h[0].Score {
			continue // the common case: not better than the worst kept
		}
		t.push(Hit{Block: ix.ids[i], Score: s}, k)
	}
	return t
}

// dot is the inner product of two vectors of equal length, with four
// accumulators so that the adds pipeline.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i]*b[i] + a[i+4]*b[i+4]
		s1 += a[i+1]*b[i+1] + a[i+5]*b[i+5]
		s2 += a[i+2]*b[i+2] + a[i+6]*b[i+6]
		s3 += a[i+3]*b[i+3] + a[i+7]*b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// topK is a min-heap of the best hits seen: h[0] is the worst kept.
type topK struct{ h []Hit }

// worse orders hits by score, then by block id descending (a lower id
// wins a tie).
func worse(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.Block > b.Block
}

func (t *topK) push(x Hit, k int) {
	if len(t.h) < k {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !worse(t.h[0], x) {
		return
	}
	t.h[0] = x
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && worse(t.h[l], t.h[m]) {
			m = l
		}
		if r < len(t.h) && worse(t.h[r], t.h[m]) {
			m = r
		}
		if m == i {
			return
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

func (t *topK) sorted() []Hit {
	out := append([]Hit{}, t.h...)
	sort.Slice(out, func(i, j int) bool { return worse(out[j], out[i]) })
	return out
}
