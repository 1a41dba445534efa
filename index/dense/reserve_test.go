package dense

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// Reserve(n) makes room so that an Apply of n adds (with replacements
// and removals) moves none of the arrays, which otherwise Apply copies
// while every search waits; a Build from rows with room (a load's) gives
// the codes the same room. After each round the index is what Build
// makes of its rows: the codes are the vectors', and quantized searches
// give the same hits. Searches run beside Reserve and Apply throughout
// (the race detector checks the locking).
func TestReserve(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 21))
	const dim, n, perRound = 70, 3000, 600
	vecs := clustered(r, n, dim)
	// Rows with room, as a load gives them (index/vectors.go).
	room := n + perRound + 100
	roomy := append(make([]float32, 0, room*dim), vecs...)
	ix, err := Build(dim, append(make([]int64, 0, room), ids1(n)...), make([]uint8, n, room), roomy)
	if err != nil {
		t.Fatal(err)
	}
	if !ix.codes.fits(room) {
		t.Fatalf("Build from rows with room for %d gave the codes none", room)
	}
	arrays := func() [9]unsafe.Pointer {
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		c := ix.codes
		return [9]unsafe.Pointer{unsafe.Pointer(unsafe.SliceData(ix.ids)), unsafe.Pointer(unsafe.SliceData(ix.levels)),
			unsafe.Pointer(unsafe.SliceData(ix.vecs)), unsafe.Pointer(unsafe.SliceData(c.planes)), unsafe.Pointer(unsafe.SliceData(c.signs)),
			unsafe.Pointer(unsafe.SliceData(c.scale)), unsafe.Pointer(unsafe.SliceData(c.pop)), unsafe.Pointer(unsafe.SliceData(c.delta)),
			unsafe.Pointer(unsafe.SliceData(c.sumU))}
	}
	queries := make([][]float32, 20)
	for i := range queries {
		queries[i] = near(r, vecs, dim, r.IntN(n))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ix.search(ctx, queries[i%len(queries)], 10, 2, nil, 0, quantizedScan); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	next, copies := int64(n+1), 0
	for round := range 6 {
		var add []Entry
		for range perRound - 20 {
			add = append(add, Entry{Block: next, Level: uint8(r.IntN(3)), Vector: randomUnit(r, dim)})
			next++
		}
		var remove []int64
		for range 20 {
			id := int64(1 + r.IntN(int(next-1)))
			add = append(add, Entry{Block: id, Level: uint8(r.IntN(3)), Vector: randomUnit(r, dim)}) // a replacement, or a block removed before
			remove = append(remove, int64(1+r.IntN(int(next-1))))
		}
		before := arrays()
		ix.Reserve(len(add))
		reserved := arrays()
		if reserved != before {
			copies++
		}
		if err := ix.Apply(add, remove); err != nil {
			t.Fatal(err)
		}
		if got := arrays(); got != reserved {
			t.Fatalf("round %d: Apply of %d after Reserve(%d) moved the arrays", round, len(add), len(add))
		}
		checkCodes(t, ix, round)
		fresh, err := Build(dim, slices.Clone(ix.ids), slices.Clone(ix.levels), slices.Clone(ix.vecs))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range queries {
			got, _ := ix.search(ctx, q, 10, 2, nil, 0, quantizedScan)
			want, _ := fresh.search(ctx, q, 10, 2, nil, 0, quantizedScan)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: %v, a Build of the same rows %v", round, got, want)
			}
		}
	}
	if copies == 0 || copies == 6 {
		t.Errorf("Reserve copied the arrays in %d of 6 rounds: the test misses a path (room used, or room made)", copies)
	}
}

// The codes' room is counted in whole blocks of 8 rows: withCap(r) fits r
// rows, and growing to r rows then moves no array. Cap counts what every
// array holds.
func TestCodesRoomByBlocks(t *testing.T) {
	for _, dim := range []int{1, 64, 70} {
		for r := range 18 {
			c := newCodes(dim).withCap(r)
			if !c.fits(r) {
				t.Fatalf("dim %d: withCap(%d) does not fit %d rows", dim, r, r)
			}
			planes, signs, scale := unsafe.SliceData(c.planes), unsafe.SliceData(c.signs), unsafe.SliceData(c.scale)
			c.grow(r)
			if r > 0 && (unsafe.SliceData(c.planes) != planes || unsafe.SliceData(c.signs) != signs || unsafe.SliceData(c.scale) != scale) {
				t.Fatalf("dim %d: growing to %d rows after withCap(%d) moved the arrays", dim, r, r)
			}
		}
	}
	const dim, n = 70, 100
	ix, err := Build(dim, append(make([]int64, 0, 200), ids1(n)...), make([]uint8, n, 300), make([]float32, n*dim, 150*dim))
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.Cap(); got != 144 { // 150 rows of vecs, in whole blocks of 8
		t.Errorf("Cap() = %d, want 144", got)
	}
}

// Reserve and Apply called from two goroutines at once, with searches
// beside them, lose no vector: Reserve's copy and swap and Apply's
// appends are ordered (changeMu).
func TestReserveBesideApply(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	const dim = 40
	ix := New(dim)
	want := map[int64][]float32{}
	var adds [][]Entry
	for round := range 40 {
		var add []Entry
		for i := range 60 {
			e := Entry{Block: int64(round*60 + i + 1), Vector: randomUnit(r, dim)}
			add = append(add, e)
			want[e.Block] = e.Vector
		}
		adds = append(adds, add)
	}
	q := randomUnit(r, dim)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for range 200 {
			ix.Reserve(100)
		}
	}()
	go func() {
		defer wg.Done()
		for _, add := range adds {
			if err := ix.Apply(add, nil); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 200 {
			if _, err := ix.Search(ctx, q, 5, 2); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	if ix.Len() != len(want) {
		t.Fatalf("%d vectors, want %d", ix.Len(), len(want))
	}
	for id, v := range want {
		if got, _, ok := ix.vector(id); !ok || !slices.Equal(got, v) {
			t.Fatalf("block %d: its vector was lost or changed", id)
		}
	}
	checkCodes(t, ix, 0)
}
