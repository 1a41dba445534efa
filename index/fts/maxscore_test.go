package fts

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/internal/duck"
	schemasql "github.com/escurel/escurel/sql"
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

// BenchmarkSearch compares MaxScore with exhaustive scoring on a synthetic
// corpus of FTS_BENCH_BLOCKS blocks (default 200,000; Zipf words over a
// 50,000-word vocabulary, 60 body and 6 context words per block, written in
// batches of 1,000) and 200 queries of 3 to 10 words (a mix of common and
// rare): p50 and p95 per mode over the queries, after one warm-up pass.
//
//	go test ./index/fts -run '^$' -bench BenchmarkSearch -benchtime 1x
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	n := 200000
	if v := os.Getenv("FTS_BENCH_BLOCKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("FTS_BENCH_BLOCKS=%q: want a number ≥ 1000", v)
		}
	}
	db, err := sql.Open("duckdb", b.TempDir()+"/fts.duckdb")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ms, err := schemasql.Migrations()
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range ms {
		if _, err := db.Exec(m.SQL); err != nil {
			b.Fatal(err)
		}
	}
	ix, err := Load(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	z := rand.NewZipf(rng, 1.07, 2, 49999)
	word := func() string { return "w" + strconv.FormatUint(z.Uint64(), 36) }
	t0 := time.Now()
	for first := 0; first < n; first += 1000 {
		var bs []Block
		for id := first; id < min(n, first+1000); id++ {
			var blk Block
			blk.ID = int64(id + 1)
			for j := 0; j < 60; j++ {
				blk.Terms[Body] = append(blk.Terms[Body], word())
			}
			for j := 0; j < 6; j++ {
				blk.Terms[Context] = append(blk.Terms[Context], word())
			}
			bs = append(bs, blk)
		}
		tx, err := duck.Begin(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		ch, err := ix.Add(ctx, tx, bs)
		if err != nil {
			b.Fatal(err)
		}
		if err := ix.Commit(ctx, tx, ch); err != nil {
			b.Fatal(err)
		}
		if err := ix.Maintain(ctx, db, 0.2); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d blocks in %d segments, built in %s", n, ix.Stats().Segments, time.Since(t0).Round(time.Second))
	queries := make([]Query, 200)
	for i := range queries {
		var terms []string
		for j := 3 + rng.IntN(8); j > 0; j-- {
			terms = append(terms, "w"+strconv.FormatUint(uint64(rng.IntN([]int{30, 1000, 20000}[rng.IntN(3)])), 36))
		}
		queries[i] = Query{Terms: terms, K: 10, MaxLevel: 2, Params: DefaultParams}
	}
	b.ResetTimer()
	lat := map[bool][]time.Duration{}
	for pass := 0; pass < 2; pass++ {
		for _, q := range queries {
			for _, exh := range []bool{false, true} {
				t := time.Now()
				err := ix.View(func() error {
					_, _, err := ix.search(ctx, db, q, exh)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				if pass == 1 {
					lat[exh] = append(lat[exh], time.Since(t))
				}
			}
		}
	}
	for _, exh := range []bool{true, false} {
		l := lat[exh]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		name := map[bool]string{true: "exhaustive", false: "maxscore"}[exh]
		p50, p95 := float64(l[len(l)/2].Microseconds())/1000, float64(l[len(l)*95/100].Microseconds())/1000
		b.ReportMetric(p50, name+"-p50-ms")
		b.ReportMetric(p95, name+"-p95-ms")
		b.Logf("%-10s p50 %.2f ms, p95 %.2f ms", name, p50, p95)
	}
	b.ReportMetric(0, "ns/op")
}
