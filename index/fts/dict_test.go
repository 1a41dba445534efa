package fts

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// dict answers as a map does through puts (ids in any order), lookups of
// present and absent terms, and drops.
func TestDictAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d, want := newDict(), map[string]int32{}
	check := func(stage string) {
		t.Helper()
		if d.n != len(want) {
			t.Fatalf("%s: %d terms, want %d", stage, d.n, len(want))
		}
		for term, id := range want {
			if got, ok := d.get(term); !ok || got != id {
				t.Fatalf("%s: get(%q) = %d, %v; want %d", stage, term, got, ok, id)
			}
			if d.term(id) != term {
				t.Fatalf("%s: term(%d) = %q, want %q", stage, id, d.term(id), term)
			}
		}
		for i := range 1000 {
			if id, ok := d.get(fmt.Sprintf("absent%d", i)); ok {
				t.Fatalf("%s: an absent term has id %d", stage, id)
			}
		}
		n, last := 0, int32(-1)
		d.each(func(term string, id int32) {
			if want[term] != id || id <= last {
				t.Fatalf("%s: each gave %q %d after id %d", stage, term, id, last)
			}
			n, last = n+1, id
		})
		if n != len(want) {
			t.Fatalf("%s: each gave %d terms, want %d", stage, n, len(want))
		}
	}
	// Ids out of order, as Load reads them.
	perm := rng.Perm(20_000)
	for _, id := range perm {
		term := fmt.Sprintf("t%x", id*7919)
		d.put(term, int32(id))
		want[term] = int32(id)
	}
	check("after puts")
	var drop []int32
	for term, id := range want {
		if rng.IntN(3) == 0 {
			drop = append(drop, id)
			delete(want, term)
		}
	}
	d.drop(drop)
	check("after drops")
	for id := 20_000; id < 25_000; id++ {
		term := fmt.Sprintf("n%d", id)
		d.put(term, int32(id))
		want[term] = int32(id)
	}
	check("after more puts")
	var all []int32
	for _, id := range want {
		all = append(all, id)
	}
	d.drop(all)
	clear(want)
	check("empty")
	d.put("again", 30_000)
	want["again"] = 30_000
	check("one again")
}

// The dictionary takes about 17 bytes a term besides the term's bytes
// (a map[string]int32 took about 56 with the term's allocation).
func TestDictBytes(t *testing.T) {
	const n = 500_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := newDict()
	termBytes := 0
	for i := range n {
		term := fmt.Sprintf("w%d", i*7919)
		termBytes += len(term)
		d.put(term, int32(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)-int64(termBytes)) / n
	t.Logf("%.1f bytes a term besides its %.1f bytes", per, float64(termBytes)/n)
	if per > 32 {
		t.Errorf("%.1f bytes a term besides its own, want at most 32", per)
	}
	runtime.KeepAlive(d)
}
