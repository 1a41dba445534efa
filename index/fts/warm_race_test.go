package fts

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// checkCache compares every cached term's lists with fts_postings and the
// in-memory segments, under the read lock.
func checkCache(t *testing.T, ix *Index, db *sql.DB) int {
	t.Helper()
	n := 0
	err := ix.View(func() error {
		ix.cache.mu.Lock()
		snap := map[int32][]segList{}
		for id, el := range ix.cache.m {
			snap[id] = el.Value.(*entry).lists
		}
		ix.cache.mu.Unlock()
		segs := map[int32]bool{}
		for _, s := range ix.segments {
			segs[s.id] = true
		}
		if len(snap) == 0 {
			return nil
		}
		var in []string
		for id := range snap {
			in = append(in, fmt.Sprint(id))
		}
		all := map[int32][]segList{}
		err := scan(context.Background(), db, `SELECT term_id, segment_id, data FROM fts_postings WHERE term_id IN (`+strings.Join(in, ",")+`) ORDER BY term_id, segment_id`, func(r *sql.Rows) error {
			var id, seg int32
			var data []byte
			if err := r.Scan(&id, &seg, &data); err != nil {
				return err
			}
			all[id] = append(all[id], segList{seg: seg, data: data})
			return nil
		})
		if err != nil {
			return err
		}
		for id, ls := range snap {
			n++
			if int(id) >= len(ix.df) || ix.ids.term(id) == "" {
				return fmt.Errorf("cached term id %d not in the dictionary", id)
			}
			want := all[id]
			if len(want) != len(ls) {
				return fmt.Errorf("term %q (%d): %d cached lists, %d in fts_postings", ix.ids.term(id), id, len(ls), len(want))
			}
			for i := range ls {
				if ls[i].seg != want[i].seg || !bytes.Equal(ls[i].data, want[i].data) {
					return fmt.Errorf("term %q: cached list %d is segment %d (%d bytes), fts_postings has segment %d (%d bytes)", ix.ids.term(id), i, ls[i].seg, len(ls[i].data), want[i].seg, len(want[i].data))
				}
				if !segs[ls[i].seg] {
					return fmt.Errorf("term %q: cached segment %d not in the in-memory segments", ix.ids.term(id), ls[i].seg)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// WarmFrequent racing commits, deletes, merges and compactions (and
// searches) never leaves a cached list that differs from fts_postings.
func TestWarmFrequentRacesWrites(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	corpus := randomCorpus(rng, 1, 6000)
	for i := 0; i < 1000; i += 50 {
		write(t, ix, db, corpus[i:i+50], nil)
	}
	defer func(n int) { warmChunk = n }(warmChunk)
	warmChunk = 40

	var stop atomic.Bool
	var wg sync.WaitGroup
	var warms, cachedMax atomic.Int64
	defer func() { stop.Store(true); wg.Wait() }()
	wg.Add(2)
	go func() { // prewarm, again and again, from a cleared cache now and then
		defer wg.Done()
		for !stop.Load() {
			if warms.Add(1)%3 == 0 {
				ix.cache.clear()
			}
			n, err := ix.WarmFrequent(ctx, db)
			if err != nil {
				t.Error(err)
				return
			}
			if int64(n) > cachedMax.Load() {
				cachedMax.Store(int64(n))
			}
		}
	}()
	go func() { // searches
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 8))
		for !stop.Load() {
			q := Query{Terms: []string{fmt.Sprintf("w%d", r.IntN(50)+1), fmt.Sprintf("w%d", r.IntN(2000)+1)}, K: 5, MaxLevel: 2, Params: DefaultParams}
			if err := ix.View(func() error { _, err := ix.Search(ctx, db, q); return err }); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// The writer: adds, deletes, merges, compactions.
	next := 1000
	for round := 0; round < 120 && (round < 30 || warms.Load() < 10) && !t.Failed(); round++ {
		var rm []Block
		for j := 0; j < 10; j++ {
			id := rng.IntN(next) + 1
			b := corpus[id-1]
			if ix.blocks[b.ID].state == live {
				rm = append(rm, b)
			}
		}
		// dedupe
		seen := map[int64]bool{}
		var rmu []Block
		for _, b := range rm {
			if !seen[b.ID] {
				seen[b.ID] = true
				rmu = append(rmu, b)
			}
		}
		write(t, ix, db, corpus[next:next+20], rmu)
		next += 20
		if err := ix.Maintain(ctx, db, 0.05); err != nil {
			t.Fatal(err)
		}
		if round%25 == 24 {
			if err := ix.Compact(ctx, db); err != nil {
				t.Fatal(err)
			}
		}
		checkCache(t, ix, db)
	}
	stop.Store(true)
	wg.Wait()
	n := checkCache(t, ix, db)
	t.Logf("%d warm-ups, up to %d terms warmed; %d cached at the end, %d segments", warms.Load(), cachedMax.Load(), n, len(ix.segments))
	if warms.Load() < 3 {
		t.Errorf("only %d warm-ups ran: the race was not exercised", warms.Load())
	}
}

// One list that the cache refuses (over a quarter of it) does not stop the
// warm-up: WarmFrequent's size estimate (average bytes per posting) is
// below the actual size of the most frequent term's list, so that term is
// tried first and refused; the other terms, which fit, are cached.
func TestWarmFrequentSkipsOversizedList(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var bs []Block
	for i := int64(1); i <= 200; i++ {
		words := []string{strings.TrimSpace(strings.Repeat("big ", 200))} // tf 200: 2-byte varint
		if i > 1 {
			for f := 0; f < 10; f++ {
				words = append(words, fmt.Sprintf("a%d", f)) // tf 1, in 199 blocks
			}
		}
		bs = append(bs, blk(i, strings.Join(words, " "), ""))
	}
	write(t, ix, db, bs, nil)
	var bytes, postings int64
	for _, s := range ix.segments {
		bytes += s.bytes
	}
	for id := range ix.df {
		postings += int64(ix.df[id][0])
	}
	bigID, _ := ix.ids.get("big")
	est := int64(ix.df[bigID][0])*bytes/postings + 16
	ix.cache.clear()
	search(t, ix, db, Query{Terms: []string{"big"}, K: 1, Params: DefaultParams})
	ix.cache.mu.Lock()
	actual := ix.cache.m[bigID].Value.(*entry).bytes
	ix.cache.mu.Unlock()
	ix.cache.clear()
	max := 4 * (est + actual) / 2 // a quarter of it between the estimate and the size
	ix.cache = newCache(max)
	t.Logf("big: estimate %d bytes, actual %d; cache %d (a list may take %d)", est, actual, max, max/4)
	if !(est <= max/4 && actual > max/4) {
		t.Fatalf("setup: estimate %d and actual %d do not straddle %d", est, actual, max/4)
	}
	n, err := ix.WarmFrequent(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("WarmFrequent cached 0 terms; the a0…a9 lists (%d bytes each) fit %d times", actual*3/4, max/(actual*3/4))
	}
}

// The same in WarmFrom: a hot term whose list in the new generation
// outgrew a quarter of the cache is skipped, not the hot terms after it.
func TestWarmFromSkipsOversizedList(t *testing.T) {
	ctx := context.Background()
	oldDB, nextDB := newDB(t), newDB(t)
	old, err := Load(ctx, oldDB)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Load(ctx, nextDB)
	if err != nil {
		t.Fatal(err)
	}
	var bs []Block
	for i := int64(1); i <= 300; i++ {
		bs = append(bs, blk(i, fmt.Sprintf("grow t%d", i%10), ""))
	}
	write(t, old, oldDB, bs[:100], nil) // old: grow in 100 blocks
	write(t, next, nextDB, bs, nil)     // new: in 300 (a reload after another process's writes)
	const max = 4 * 500
	old.cache, next.cache = newCache(max), newCache(max)
	for i := 0; i < 10; i++ {
		search(t, old, oldDB, Query{Terms: []string{fmt.Sprintf("t%d", i)}, K: 1, Params: DefaultParams})
	}
	search(t, old, oldDB, Query{Terms: []string{"grow"}, K: 1, Params: DefaultParams}) // the most recent
	if err := next.WarmFrom(ctx, nextDB, old); err != nil {
		t.Fatal(err)
	}
	oldTerms := cachedTerms(old)
	got := cachedTerms(next)
	t.Logf("old cache %v, warmed %v", oldTerms, got)
	if len(got) == 0 {
		t.Errorf("warmed nothing: the oversized list of grow stopped the warm-up of %d other hot terms", len(oldTerms)-1)
	}
}

// WarmFrequent keeps the maxWarmTerms most frequent terms when the
// dictionary holds more (the heap's replacement branch).
func TestWarmFrequentTermCap(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// The rarest terms first in id order, so the heap must replace.
	var bs []Block
	for i := int64(1); i <= 120; i++ {
		var words []string
		for f := int64(29); f >= 0; f-- {
			if i%(f+1) == 0 {
				words = append(words, fmt.Sprintf("f%d", f))
			}
		}
		bs = append(bs, blk(i, strings.Join(words, " "), ""))
	}
	write(t, ix, db, bs, nil)
	ix.cache.clear()
	defer func(n int) { maxWarmTerms = n }(maxWarmTerms)
	maxWarmTerms = 4
	n, err := ix.WarmFrequent(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	got := cachedTerms(ix)
	if want := []string{"f0", "f1", "f2", "f3"}; n != 4 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("warmed %d: %v, want %v", n, got, want)
	}
}
