package dense

import (
	"context"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"github.com/escurel/escurel/embed"
)

// clustered returns n unit vectors around n/20 random centres (each a
// centre plus noise of about its own length, so that a query has a few
// dozen near neighbours above a broad background), as rows.
func clustered(r *rand.Rand, n, dim int) []float32 {
	centres := make([][]float32, max(1, n/20))
	for i := range centres {
		centres[i] = randomUnit(r, dim)
	}
	vecs := make([]float32, 0, n*dim)
	for range n {
		c := centres[r.IntN(len(centres))]
		v := randomUnit(r, dim)
		for j := range v {
			v[j] = c[j] + 0.8*v[j]
		}
		v, _ = embed.Normalize(v)
		vecs = append(vecs, v...)
	}
	return vecs
}

// near returns a unit query near row i of vecs.
func near(r *rand.Rand, vecs []float32, dim, i int) []float32 {
	q := randomUnit(r, dim)
	for j := range q {
		q[j] = vecs[i*dim+j] + 0.6*q[j]
	}
	q, _ = embed.Normalize(q)
	return q
}

func ids1(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids
}

// The quantized search finds (nearly) the exact top k, and what it returns
// is exact: every score is the exact scan's, in the exact order.
func TestQuantizedAgreesWithExact(t *testing.T) {
	ctx := context.Background()
	for _, dim := range []int{24, 100, 384} {
		r := rand.New(rand.NewPCG(uint64(dim), 7))
		const n = 30000
		vecs := clustered(r, n, dim)
		ix, err := Build(dim, ids1(n), make([]uint8, n), vecs)
		if err != nil {
			t.Fatal(err)
		}
		found, want := 0, 0
		for trial := range 60 {
			q := near(r, vecs, dim, r.IntN(n))
			if trial%3 == 0 {
				q = randomUnit(r, dim) // far from everything
			}
			k := 10
			if trial%5 == 0 {
				k = 100
			}
			exact, err := ix.search(ctx, q, k, 0, nil, 0, exactScan)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ix.search(ctx, q, k, 0, nil, 0, quantizedScan)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != k {
				t.Fatalf("dim %d: %d hits, want %d", dim, len(got), k)
			}
			for i, h := range got {
				if s := float64(dot(q, ix.vecs[ix.pos[h.Block]*dim:][:dim])); s != h.Score {
					t.Fatalf("dim %d: block %d scored %v, exactly %v", dim, h.Block, h.Score, s)
				}
				if i > 0 && worse(got[i-1], h) {
					t.Fatalf("dim %d: hits out of order: %v before %v", dim, got[i-1], h)
				}
			}
			found += overlap(exact, got)
			want += len(exact)
		}
		if recall := float64(found) / float64(want); recall < 0.99 {
			t.Errorf("dim %d: recall %.4f against the exact scan, want ≥ 0.99", dim, recall)
		}
	}
}

// The same vectors give the same results however they came in (built at
// once, applied one by one in another order, removed and added again) and
// on any number of cores.
func TestQuantizedDeterministic(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	const n, dim = 12000, 64
	vecs := clustered(r, n, dim)
	// Ties: blocks 2..6 have block 1's vector.
	for i := 1; i < 6; i++ {
		copy(vecs[i*dim:(i+1)*dim], vecs[:dim])
	}
	built, err := Build(dim, ids1(n), make([]uint8, n), append([]float32(nil), vecs...))
	if err != nil {
		t.Fatal(err)
	}
	applied := New(dim)
	for _, i := range r.Perm(n) {
		if err := applied.Apply([]Entry{{Block: int64(i + 1), Vector: vecs[i*dim : (i+1)*dim]}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var again []Entry
	var gone []int64
	for i := 0; i < n; i += 7 {
		gone = append(gone, int64(i+1))
		again = append(again, Entry{Block: int64(i + 1), Vector: vecs[i*dim : (i+1)*dim]})
	}
	if err := applied.Apply(nil, gone); err != nil {
		t.Fatal(err)
	}
	if err := applied.Apply(again, nil); err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	for trial := range 20 {
		q := near(r, vecs, dim, r.IntN(n))
		if trial == 0 {
			q = vecs[:dim]
		}
		runtime.GOMAXPROCS(procs)
		want, _ := built.search(ctx, q, 10, 0, nil, 0, quantizedScan)
		if trial == 0 {
			for i, h := range want[:6] {
				if h.Block != int64(i+1) {
					t.Fatalf("ties not by block id: %v", want[:6])
				}
			}
		}
		for _, p := range []int{1, 3, 8} {
			runtime.GOMAXPROCS(p)
			for name, ix := range map[string]*Index{"built": built, "applied": applied} {
				got, _ := ix.search(ctx, q, 10, 0, nil, 0, quantizedScan)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("trial %d, %s on %d cores: %v, want %v", trial, name, p, got, want)
				}
			}
		}
	}
}

// A search never returns a block above the caller's level, and the
// vectors above it do not change which blocks it returns: the result is
// the one an index without them gives.
func TestQuantizedLevels(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 9))
	const n, dim = 20000, 48
	vecs := clustered(r, n, dim)
	levels := make([]uint8, n)
	var pubIDs []int64
	var pubVecs []float32
	for i := range levels {
		levels[i] = uint8(r.IntN(3))
		if levels[i] == 0 {
			pubIDs = append(pubIDs, int64(i+1))
			pubVecs = append(pubVecs, vecs[i*dim:(i+1)*dim]...)
		}
	}
	ix, err := Build(dim, ids1(n), levels, vecs)
	if err != nil {
		t.Fatal(err)
	}
	public, err := Build(dim, pubIDs, make([]uint8, len(pubIDs)), pubVecs)
	if err != nil {
		t.Fatal(err)
	}
	for trial := range 30 {
		i := r.IntN(n)
		for levels[i] == 0 { // a query next to a vector above the level
			i = r.IntN(n)
		}
		q := near(r, vecs, dim, i)
		for _, lvl := range []uint8{0, 1} {
			got, _ := ix.search(ctx, q, 20, lvl, nil, 0, quantizedScan)
			for _, h := range got {
				if levels[h.Block-1] > lvl {
					t.Fatalf("trial %d: level %d search returned block %d of level %d", trial, lvl, h.Block, levels[h.Block-1])
				}
			}
			if lvl == 0 {
				want, _ := public.search(ctx, q, 20, 0, nil, 0, quantizedScan)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("trial %d: with vectors above the level %v, without %v", trial, got, want)
				}
			}
		}
	}
	// A filter: only allowed blocks, and the same as an index of them.
	allowed := make([]uint64, n/64+1)
	var okIDs []int64
	var okVecs []float32
	for i := 0; i < n; i += 3 {
		if levels[i] == 0 {
			id := int64(i + 1)
			allowed[id>>6] |= 1 << (id & 63)
			okIDs = append(okIDs, id)
			okVecs = append(okVecs, vecs[i*dim:(i+1)*dim]...)
		}
	}
	only, _ := Build(dim, okIDs, make([]uint8, len(okIDs)), okVecs)
	for range 10 {
		q := near(r, vecs, dim, r.IntN(n))
		got, _ := ix.search(ctx, q, 10, 0, allowed, len(okIDs), quantizedScan)
		want, _ := only.search(ctx, q, 10, 0, nil, 0, quantizedScan)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("filtered %v, an index of the allowed blocks %v", got, want)
		}
	}
}

// The codes stay those of the vectors through Apply's adds, replacements
// and removals (each row's code is what Build computes from its vector).
func TestCodesFollowApply(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	const dim = 70 // two words, a partial one
	ix := New(dim)
	for round := range 30 {
		var add []Entry
		for range r.IntN(50) {
			add = append(add, Entry{Block: int64(r.IntN(400)), Level: uint8(r.IntN(3)), Vector: randomUnit(r, dim)})
		}
		var remove []int64
		for range r.IntN(40) {
			remove = append(remove, int64(r.IntN(400)))
		}
		if err := ix.Apply(add, remove); err != nil {
			t.Fatal(err)
		}
		checkCodes(t, ix, round)
	}
}

// checkCodes fails t unless every row's code in ix is what Build computes
// from its vector.
func checkCodes(t *testing.T, ix *Index, round int) {
	t.Helper()
	fresh := buildCodes(ix.dim, ix.vecs, 0)
	c := ix.codes
	n := len(ix.ids)
	w := c.words
	if c.rows != n {
		t.Fatalf("round %d: %d rows of codes for %d vectors", round, c.rows, n)
	}
	for i := range n {
		if !reflect.DeepEqual(c.planes[i*codeBits*w:(i+1)*codeBits*w], fresh.planes[i*codeBits*w:(i+1)*codeBits*w]) ||
			c.scale[i] != fresh.scale[i] || c.pop[i] != fresh.pop[i] || c.delta[i] != fresh.delta[i] || c.sumU[i] != fresh.sumU[i] {
			t.Fatalf("round %d: row %d's code is not its vector's", round, i)
		}
		for j := range w {
			if c.signs[c.signWord(i, j)] != fresh.signs[fresh.signWord(i, j)] {
				t.Fatalf("round %d: row %d's signs are not its vector's", round, i)
			}
		}
	}
}

// Empty and small indexes (fewer rows than a block of 8, fewer than k),
// a zero vector in the index, and huge k.
func TestQuantizedSmall(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(13, 13))
	const dim = 384
	if h, err := New(dim).search(ctx, randomUnit(r, dim), 10, 2, nil, 0, quantizedScan); err != nil || len(h) != 0 {
		t.Fatalf("empty index: %v, %v", h, err)
	}
	for _, n := range []int{1, 5, 8, 9, 17, 300} {
		vecs := make([]float32, 0, n*dim)
		for range n {
			vecs = append(vecs, randomUnit(r, dim)...)
		}
		clear(vecs[:dim]) // a zero vector scores 0
		ix, err := Build(dim, ids1(n), make([]uint8, n), vecs)
		if err != nil {
			t.Fatal(err)
		}
		q := randomUnit(r, dim)
		for _, k := range []int{1, 3, n, n + 5, 1 << 40} {
			want, _ := ix.search(ctx, q, k, 0, nil, 0, exactScan)
			got, err := ix.search(ctx, q, k, 0, nil, 0, quantizedScan)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("n %d, k %d: %v, %v; want %v", n, k, got, err, want)
			}
		}
	}
}

// Search chooses the quantized search from quantMinRows vectors on, and
// the exact scan when the candidates would be too large a share.
func TestSearchChoosesQuantized(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(17, 17))
	const n, dim = 12000, 32
	vecs := clustered(r, n, dim)
	ix, _ := Build(dim, ids1(n), make([]uint8, n), vecs)
	defer func(m int) { quantMinRows = m }(quantMinRows)
	q := near(r, vecs, dim, 1)
	// Tell the modes apart by a search that only the exact scan answers
	// exactly: stage 2 keeps a single candidate, so the quantized top 10
	// differs from the exact one.
	defer func(a, b, c, d, e int) { refineMin, refinePerK, candMin, candShare, candPerK = a, b, c, d, e }(refineMin, refinePerK, candMin, candShare, candPerK)
	refineMin, refinePerK, candMin, candShare, candPerK = 1, 0, 100, n, 10
	exact, _ := ix.search(ctx, q, 10, 0, nil, 0, exactScan)
	quant, _ := ix.search(ctx, q, 10, 0, nil, 0, quantizedScan)
	if reflect.DeepEqual(exact, quant) {
		t.Fatal("the modes cannot be told apart")
	}
	quantMinRows = n + 1
	if got, _ := ix.Search(ctx, q, 10, 0); !reflect.DeepEqual(got, exact) {
		t.Errorf("below quantMinRows: %v, want the exact %v", got, exact)
	}
	quantMinRows = n
	if got, _ := ix.Search(ctx, q, 10, 0); !reflect.DeepEqual(got, quant) {
		t.Errorf("from quantMinRows on: %v, want the quantized %v", got, quant)
	}
	if got, _ := ix.Search(ctx, q, n/quantMaxShare/candPerK+1000, 0); len(got) != n/quantMaxShare/candPerK+1000 {
		t.Errorf("a large k: %d hits", len(got))
	}
}

// Stage 1's AVX-512 version computes the same bits as the scalar one.
func TestEstimateVersionsAgree(t *testing.T) {
	if !hasAVX512 {
		t.Skip("this CPU has no AVX-512 VPOPCNTDQ: only the scalar version runs")
	}
	r := rand.New(rand.NewPCG(19, 19))
	for _, dim := range []int{24, 100, 384} {
		const n = 1003
		vecs := clustered(r, n, dim)
		ix, _ := Build(dim, ids1(n), make([]uint8, n), vecs)
		qq := newQuantQuery(&ix.codes, near(r, vecs, dim, 3))
		run := func(avx bool, thr float32) ([]int32, []float32) {
			was, _ := useAVX512(avx)
			defer useAVX512(was)
			rows, ests := ix.codes.estimateChunk(qq, 8, n, thr, make([]int32, 0, n), make([]float32, 0, n))
			return rows, ests
		}
		for _, thr := range []float32{negInf, 0, 0.3} {
			r1, e1 := run(true, thr)
			r2, e2 := run(false, thr)
			if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(e1, e2) {
				t.Fatalf("dim %d, threshold %v: AVX-512 %d rows, scalar %d, or other estimates", dim, thr, len(r1), len(r2))
			}
			if thr == negInf && len(r1) != n-8 {
				t.Fatalf("dim %d: %d rows of %d", dim, len(r1), n-8)
			}
		}
	}
}

// Equal estimates are ordered by block id at every stage, so that which
// of many equal vectors survive a cut does not depend on where they are
// held.
func TestQuantizedTiesByBlock(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 23))
	const dim = 32
	v := randomUnit(r, dim)
	defer func(a, b, c, d, e int) { refineMin, refinePerK, candMin, candShare, candPerK = a, b, c, d, e }(refineMin, refinePerK, candMin, candShare, candPerK)
	refineMin, refinePerK, candMin, candShare, candPerK = 20, 1, 50, 1<<30, 1
	ix := New(dim)
	for _, i := range r.Perm(3000) {
		e := Entry{Block: int64(i + 1), Vector: v}
		if i%2 == 1 {
			e.Vector = randomUnit(r, dim)
		}
		if err := ix.Apply([]Entry{e}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := ix.search(ctx, v, 10, 0, nil, 0, quantizedScan)
	for i, h := range got {
		if h.Block != int64(2*i+1) {
			t.Fatalf("equal vectors: %v, want blocks 1, 3, 5, …", got)
		}
	}
}

// WithExact makes Search scan exactly whatever the size.
func TestWithExact(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 29))
	const n, dim = 12000, 32
	vecs := clustered(r, n, dim)
	ix, _ := Build(dim, ids1(n), make([]uint8, n), vecs)
	defer func(a, b, c, d, e, f int) {
		refineMin, refinePerK, candMin, candShare, candPerK, quantMinRows = a, b, c, d, e, f
	}(refineMin, refinePerK, candMin, candShare, candPerK, quantMinRows)
	refineMin, refinePerK, candMin, candShare, candPerK, quantMinRows = 1, 0, 100, n, 10, 0
	ctx := context.Background()
	q := near(r, vecs, dim, 5)
	want, _ := ix.search(ctx, q, 10, 0, nil, 0, exactScan)
	if got, _ := ix.Search(ctx, q, 10, 0); reflect.DeepEqual(got, want) {
		t.Fatal("the quantized search with one candidate found the exact top 10")
	}
	if got, _ := ix.Search(WithExact(ctx), q, 10, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("WithExact: %v, want %v", got, want)
	}
}
