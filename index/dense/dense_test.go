package dense

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/escurel/escurel/embed"
)

func randomUnit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	v, _ = embed.Normalize(v)
	return v
}

// brute is the reference: score every allowed vector, sort.
func brute(ix *Index, q []float32, k int, maxLevel uint8) []Hit {
	var all []Hit
	for i, id := range ix.ids {
		if ix.levels[i] <= maxLevel {
			all = append(all, Hit{id, float64(dot(q, ix.vecs[i*ix.dim:(i+1)*ix.dim]))})
		}
	}
	sort.Slice(all, func(i, j int) bool { return worse(all[j], all[i]) })
	return all[:min(k, len(all))]
}

func TestSearchMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const dim = 24
	ix := New(dim)
	var add []Entry
	for id := range int64(20000) { // several shards
		add = append(add, Entry{Block: id + 1, Level: uint8(r.IntN(3)), Vector: randomUnit(r, dim)})
	}
	// Duplicates of one vector: ties, broken by block id.
	for id := int64(30000); id < 30010; id++ {
		add = append(add, Entry{Block: id, Vector: add[0].Vector})
	}
	if err := ix.Apply(add, nil); err != nil {
		t.Fatal(err)
	}
	// Remove some, replace some.
	if err := ix.Apply([]Entry{{Block: 5, Vector: randomUnit(r, dim)}}, []int64{7, 8, 9, 30003}); err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 20000+10-4 {
		t.Fatalf("Len = %d", ix.Len())
	}
	ctx := context.Background()
	for trial := range 50 {
		q := randomUnit(r, dim)
		if trial == 0 {
			q = add[0].Vector
		}
		k, lvl := 1+r.IntN(40), uint8(r.IntN(3))
		if trial == 0 {
			lvl = 2
		}
		got, err := ix.Search(ctx, q, k, lvl)
		if err != nil {
			t.Fatal(err)
		}
		want := brute(ix, q, k, lvl)
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d hits, want %d", trial, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("trial %d: hit %d = %v, want %v", trial, i, got[i], want[i])
			}
		}
		if trial == 0 && (got[0].Block != 1 || got[1].Block != 30000 || got[2].Block != 30001 || got[3].Block != 30002 || got[4].Block != 30004) {
			t.Errorf("ties not by block id: %v", got[:5])
		}
	}
	for _, id := range []int64{7, 8, 9, 30003} {
		if _, ok := ix.pos[id]; ok {
			t.Errorf("block %d still present", id)
		}
	}
}

func TestSearchEdges(t *testing.T) {
	ix := New(3)
	ctx := context.Background()
	if err := ix.Apply([]Entry{{Block: 1, Vector: []float32{1, 0}}}, nil); err == nil {
		t.Error("a vector of the wrong dimension was accepted")
	}
	if ix.Len() != 0 {
		t.Error("a failed Apply changed the index")
	}
	ix.Apply([]Entry{{Block: 1, Vector: []float32{1, 0, 0}}, {Block: 2, Level: 2, Vector: []float32{0, 1, 0}}}, nil)
	if _, err := ix.Search(ctx, []float32{1, 0}, 3, 0); err == nil {
		t.Error("a query of the wrong dimension was accepted")
	}
	if h, _ := ix.Search(ctx, []float32{0, 0, 0}, 3, 2); len(h) != 0 {
		t.Errorf("a zero query found %v", h)
	}
	h, _ := ix.Search(ctx, []float32{0, 1, 0}, 3, 1)
	if len(h) != 1 || h[0].Block != 1 {
		t.Errorf("level filter: %v", h)
	}
	h, _ = ix.Search(ctx, []float32{0, 1, 0}, 3, 2)
	if len(h) != 2 || h[0].Block != 2 || math.Abs(h[0].Score-1) > 1e-6 {
		t.Errorf("restricted clearance: %v", h)
	}
}

// BenchmarkSearch is the target: top 10 over 100,000 vectors of 384
// dimensions.
func BenchmarkSearch(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, dim = 100000, 384
	ix := New(dim)
	add := make([]Entry, n)
	for i := range add {
		add[i] = Entry{Block: int64(i + 1), Vector: randomUnit(r, dim)}
	}
	ix.Apply(add, nil)
	qs := make([][]float32, 64)
	for i := range qs {
		qs[i] = randomUnit(r, dim)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ix.Search(ctx, qs[i%len(qs)], 10, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// A k far beyond the vectors allocates for the vectors: the largest int
// once panicked in make (cap out of range), a large one ran the process
// out of memory.
func TestHugeKAllocatesForCandidates(t *testing.T) {
	ix := New(3)
	ix.Apply([]Entry{{Block: 1, Vector: []float32{1, 0, 0}}, {Block: 2, Vector: []float32{0, 1, 0}}}, nil)
	for _, k := range []int{math.MaxInt, 1 << 40} {
		h, err := ix.Search(context.Background(), []float32{1, 0, 0}, k, 0)
		if err != nil || len(h) != 2 {
			t.Errorf("k=%d: %v, %v; want 2 hits", k, h, err)
		}
	}
}

// Build takes rows as given and searches them as Apply's index does;
// rows of unequal lengths or a block twice are refused.
func TestBuild(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const dim, n = 8, 500
	ids, levels, vecs := make([]int64, n), make([]uint8, n), make([]float32, 0, n*dim)
	applied := New(dim)
	for i := range n {
		ids[i], levels[i] = int64(n-i), uint8(i%3)
		v := randomUnit(r, dim)
		vecs = append(vecs, v...)
		if err := applied.Apply([]Entry{{Block: ids[i], Level: levels[i], Vector: v}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	built, err := Build(dim, ids, levels, vecs)
	if err != nil {
		t.Fatal(err)
	}
	q := randomUnit(r, dim)
	for _, lvl := range []uint8{0, 2} {
		a, _ := applied.Search(context.Background(), q, 25, lvl)
		b, _ := built.Search(context.Background(), q, 25, lvl)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("level %d: built %v, applied %v", lvl, b, a)
		}
	}
	if v, lvl, ok := built.vector(ids[7]); !ok || lvl != levels[7] || !reflect.DeepEqual(v, vecs[7*dim:8*dim]) {
		t.Errorf("vector(%d) = %v %d %v", ids[7], v, lvl, ok)
	}
	if _, _, ok := built.vector(n + 1); ok {
		t.Error("a vector for a block never given")
	}
	if _, err := Build(dim, ids[:2], levels[:2], vecs[:dim]); err == nil {
		t.Error("two ids and one row: no error")
	}
	if _, err := Build(dim, []int64{1, 1}, []uint8{0, 0}, vecs[:2*dim]); err == nil {
		t.Error("a block twice: no error")
	}
}
