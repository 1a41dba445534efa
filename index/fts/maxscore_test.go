package fts

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exhaustive runs q scoring every posting (the term-at-a-time reference).
func exhaustive(t *testing.T, ix *Index, db *sql.DB, q Query) []Hit {
	t.Helper()
	var hits []Hit
	err := ix.View(func() error {
		var err error
		hits, _, err = ix.search(context.Background(), db, q, true)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// pruned runs q with MaxScore and returns its work counts.
func pruned(t *testing.T, ix *Index, db *sql.DB, q Query) ([]Hit, searchStats) {
	t.Helper()
	var hits []Hit
	var st searchStats
	err := ix.View(func() error {
		var err error
		hits, st, err = ix.search(context.Background(), db, q, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits, st
}

// MaxScore returns exactly the exhaustive ranking, scores bit for bit and
// ties by block id, on random corpora and queries: over several segments
// (merged and not), with removed blocks, at every clearance level, under
// metadata-filter bitmaps of every density, with random parameters, and
// from a cold and a warm cache. And it prunes: it scores fewer postings
// than the lists hold.
func TestMaxScoreEqualsExhaustive(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			db := newDB(t)
			ix, err := Load(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 99))
			next := int64(1)
			var all []Block
			for batch := 0; batch < 12; batch++ {
				bs := randomCorpus(rng, next, 50+rng.IntN(400))
				if batch == 5 {
					// Exact ties: copies of one block.
					for i := range bs[:40] {
						bs[i].Terms = bs[0].Terms
					}
				}
				next += int64(len(bs))
				write(t, ix, db, bs, nil)
				all = append(all, bs...)
				if batch%4 == 3 {
					if err := ix.Maintain(ctx, db, 0.99); err != nil {
						t.Fatal(err)
					}
				}
				if batch == 8 { // tombstones inside merged and fresh segments
					var rm []Block
					for _, b := range all {
						if rng.IntN(5) == 0 {
							rm = append(rm, b)
						}
					}
					write(t, ix, db, nil, rm)
					all = all[:0:0]
				}
			}
			var scored, postings int
			for qi := 0; qi < 300; qi++ {
				var terms []string
				for j := 1 + rng.IntN(8); j > 0; j-- {
					// Common and rare words, and now and then an unknown one.
					terms = append(terms, fmt.Sprintf("w%d", rng.IntN([]int{5, 40, 2500}[rng.IntN(3)])))
				}
				q := Query{Terms: terms, K: []int{1, 3, 10, 10, 50, 1000}[rng.IntN(6)], MaxLevel: uint8(rng.IntN(3)), Params: DefaultParams}
				switch rng.IntN(6) {
				case 0:
					q.Params = Params{K1: 0.5 + rng.Float64()*2, B: [NumFields]float64{rng.Float64(), 1}, Weight: [NumFields]float64{rng.Float64() * 3, 0}}
				case 1:
					q.Params = Params{K1: 0, B: [NumFields]float64{0, 0.5}, Weight: [NumFields]float64{1, 1}}
				}
				switch r := rng.IntN(5); r {
				case 1, 2, 3: // a filter keeping about half, a tenth, a hundredth
					q.Allowed = make([]uint64, (next+63)/64-int64(rng.IntN(3)))
					keep := []int{0, 2, 10, 100}[r]
					for b := int64(0); b < int64(len(q.Allowed))*64; b++ {
						if rng.IntN(keep) == 0 {
							q.Allowed[b>>6] |= 1 << (b & 63)
						}
					}
				case 4: // a run of blocks (the documents of one folder)
					q.Allowed = make([]uint64, (next+63)/64)
					from := rng.Int64N(next)
					for b := from; b < min(next, from+1+rng.Int64N(300)); b++ {
						q.Allowed[b>>6] |= 1 << (b & 63)
					}
				}
				if rng.IntN(8) == 0 {
					ix.cache.clear()
				}
				want := exhaustive(t, ix, db, q)
				got, st := pruned(t, ix, db, q)
				if diff := cmp.Diff(want, got); diff != "" {
					q.Allowed = q.Allowed[:min(len(q.Allowed), 2)]
					t.Fatalf("query %d %+v (filter shortened): MaxScore differs from exhaustive scoring (-want +got):\n%s", qi, q, diff)
				}
				scored += st.scored
				postings += st.postings
			}
			if scored*2 > postings {
				t.Errorf("MaxScore scored %d of %d postings: no pruning", scored, postings)
			}
			t.Logf("scored %d of %d postings", scored, postings)
		})
	}
}

// Concurrent searches share the cached lists and build each skip table
// once (run with -race): all of them see the exhaustive ranking.
func TestMaxScoreConcurrentSkipTables(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	write(t, ix, db, randomCorpus(rng, 1, 1500), nil)
	q := Query{Terms: []string{"w0", "w1", "w3", "w40", "w300"}, K: 10, MaxLevel: 2, Params: DefaultParams}
	ix.cache.clear()
	want := exhaustive(t, ix, db, q) // fills the cache: lists without skip tables
	hits := make([][]Hit, 8)
	done := make(chan error, len(hits))
	for g := range hits {
		go func() {
			done <- ix.View(func() error {
				var err error
				hits[g], _, err = ix.search(ctx, db, q, false)
				return err
			})
		}()
	}
	for range hits {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for g := range hits {
		if diff := cmp.Diff(want, hits[g]); diff != "" {
			t.Errorf("goroutine %d (-want +got):\n%s", g, diff)
		}
	}
}
