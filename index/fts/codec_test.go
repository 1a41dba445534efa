package fts

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestEncodedLen holds encodedLen to encode's output, at the uvarint
// length boundaries and on random lists, and checks that encode allocates
// the list once at its size (not under -race, whose instrumentation
// allocates too).
func TestEncodedLen(t *testing.T) {
	edges := []uint64{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<35 - 1, 1 << 35, math.MaxInt64}
	var lists [][]Posting
	for _, v := range edges {
		lists = append(lists, []Posting{{Block: int64(v), TF: [NumFields]uint32{uint32(min(v, math.MaxUint32)), 0}}})
	}
	lists = append(lists, nil, []Posting{})
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var ps []Posting
		b := int64(0)
		for range r.IntN(300) {
			b += 1 + r.Int64N(1<<uint(r.IntN(40)))
			ps = append(ps, Posting{Block: b, TF: [NumFields]uint32{r.Uint32() >> uint(r.IntN(32)), r.Uint32() >> uint(r.IntN(32))}})
		}
		lists = append(lists, ps)
	}
	for i, ps := range lists {
		got := encode(nil, ps)
		if n := encodedLen(ps); n != len(got) {
			t.Fatalf("list %d (%d postings): encodedLen %d, encode wrote %d bytes", i, len(ps), n, len(got))
		}
		if len(ps) > 0 && !raceEnabled {
			if a := testing.AllocsPerRun(3, func() { encode(nil, ps) }); a != 1 {
				t.Errorf("list %d (%d postings): encode allocated %v times, want once", i, len(ps), a)
			}
		}
		back, err := decodeAll(nil, got)
		if err != nil || len(back) != len(ps) {
			t.Fatalf("list %d: decoded %d postings (%v), want %d", i, len(back), err, len(ps))
		}
		for j := range ps {
			if back[j] != ps[j] {
				t.Fatalf("list %d posting %d: decoded %+v, want %+v", i, j, back[j], ps[j])
			}
		}
	}
}
