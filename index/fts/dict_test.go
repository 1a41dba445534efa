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

// Load's way in: a dictionary reserved for the terms, filled by putNew in
// any id order, answers as a map does, grows nothing while the terms are
// as reserved, leaves room for the next writes' terms (withRoom), and
// reports a term put twice without changing. A damaged maximum id
// reserves no ids.
func TestDictReservePutNew(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 20_000
	terms := make([]string, n)
	bytes := 0
	for i := range terms {
		terms[i] = fmt.Sprintf("t%x", i*7919)
		bytes += len(terms[i])
	}
	d := newDict()
	d.reserve(n, bytes, n-1)
	slots, arena := len(d.slots), cap(d.arena)
	for _, id := range rng.Perm(n) {
		if d.putNew(terms[id], int32(id)) {
			t.Fatalf("putNew(%q) reported a duplicate", terms[id])
		}
	}
	if len(d.slots) != slots || cap(d.arena) != arena || cap(d.loc) != withRoom(n) {
		t.Errorf("grew: %d slots (reserved %d), arena cap %d (%d), loc cap %d (%d)", len(d.slots), slots, cap(d.arena), arena, cap(d.loc), withRoom(n))
	}
	if arena != withRoom(bytes) || slots*3 < (withRoom(n)+1)*4 {
		t.Errorf("reserved arena cap %d for %d bytes, %d slots for %d terms: no room for the next writes", arena, bytes, slots, n)
	}
	if !d.putNew(terms[5], n+7) {
		t.Error("putNew of a present term did not report it")
	}
	if d.n != n || d.term(n+7) != "" {
		t.Errorf("after the duplicate: %d terms, term(%d) = %q", d.n, n+7, d.term(n+7))
	}
	for id, term := range terms {
		if got, ok := d.get(term); !ok || got != int32(id) || d.term(int32(id)) != term {
			t.Fatalf("get(%q) = %d, %v; term(%d) = %q", term, got, ok, id, d.term(int32(id)))
		}
	}
	if _, ok := d.get("absent"); ok {
		t.Error("an absent term was found")
	}
	big := newDict()
	big.reserve(10, 50, 1<<30)
	if cap(big.loc) != 0 {
		t.Errorf("a maximum id of 2^30 for 10 terms reserved %d ids", cap(big.loc))
	}
	big.putNew("x", 3)
	if id, ok := big.get("x"); !ok || id != 3 {
		t.Errorf("get(x) = %d, %v after an unreserved put", id, ok)
	}
}
