package fts

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// countingDB counts the queries that read fts_postings.
type countingDB struct {
	*sql.DB
	postings atomic.Int64
}

func (c *countingDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if strings.Contains(query, "FROM fts_postings WHERE") {
		c.postings.Add(1)
	}
	return c.DB.QueryContext(ctx, query, args...)
}

// cachedTerms lists the terms ix's cache holds, sorted.
func cachedTerms(ix *Index) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ix.cache.mu.Lock()
	defer ix.cache.mu.Unlock()
	var ts []string
	for id := range ix.cache.m {
		ts = append(ts, ix.ids.term(id))
	}
	sort.Strings(ts)
	return ts
}

// A generation warmed from the live one answers the live one's hot
// queries from its cache, with the results of a cold load, although the
// same blocks written in another order gave its terms other ids.
func TestWarmFromCopiesHotLists(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	corpus := randomCorpus(rng, 1, 1200)
	oldDB, newDB := newDB(t), newDB(t)
	old, err := Load(ctx, oldDB)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(corpus); i += 100 {
		write(t, old, oldDB, corpus[i:i+100], nil)
	}
	next, err := Load(ctx, newDB)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(corpus)
	slices.Reverse(reversed)
	for i := range reversed {
		reversed[i].ID = int64(i + 2)
	}
	write(t, next, newDB, []Block{blk(1, "a0", "")}, nil) // the first term id goes to a0
	for i := 0; i < len(reversed); i += 300 {
		write(t, next, newDB, reversed[i:i+300], nil)
	}
	if a, _ := old.ids.get("w1"); a == func() int32 { b, _ := next.ids.get("w1"); return b }() {
		t.Fatal("w1 has the same id in both indexes: the test would not see a mapping by id")
	}
	queries := []Query{
		{Terms: []string{"w1", "w2", "w30"}, K: 10, MaxLevel: 2, Params: DefaultParams},
		{Terms: []string{"w7", "w400"}, K: 5, MaxLevel: 0, Params: DefaultParams},
		{Terms: []string{"w3", "w5", "w9", "w1999", "nosuchterm"}, K: 20, MaxLevel: 1, Params: DefaultParams},
	}
	old.cache.clear()
	for _, q := range queries {
		search(t, old, oldDB, q)
	}
	// What a cold generation answers.
	cold, err := Load(ctx, newDB)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]Hit
	for _, q := range queries {
		want = append(want, search(t, cold, newDB, q))
	}

	next.cache.clear()
	counted := &countingDB{DB: newDB}
	if err := next.WarmFrom(ctx, counted, old); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cachedTerms(old), cachedTerms(next)); diff != "" {
		t.Errorf("warmed cache (-old +new):\n%s", diff)
	}
	warmQueries := counted.postings.Load()
	for i, q := range queries {
		if diff := cmp.Diff(want[i], search(t, next, counted, q)); diff != "" {
			t.Errorf("query %v after warming (-cold +warm):\n%s", q.Terms, diff)
		}
	}
	if n := counted.postings.Load() - warmQueries; n != 0 {
		t.Errorf("%d posting queries after warming, want 0", n)
	}
	if warmQueries != 1 {
		t.Errorf("warming took %d posting queries, want 1", warmQueries)
	}
}

// Warming stops at the new cache's size, keeping the most recently used
// lists of the old one.
func TestWarmFromKeepsMostRecent(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	old, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// t0 … t7 each in 100 blocks, 8 apart: lists of one size.
	var bs []Block
	for i := int64(1); i <= 800; i++ {
		bs = append(bs, blk(i, fmt.Sprintf("t%d filler", i%8), ""))
	}
	write(t, old, db, bs, nil)
	old.cache.clear()
	for i := 0; i < 8; i++ { // t7 is the most recent
		search(t, old, db, Query{Terms: []string{fmt.Sprintf("t%d", i)}, K: 3, Params: DefaultParams})
	}
	id, _ := old.ids.get("t0")
	ls, _ := old.cache.get(id) // moves t0 to the front: the most recent now
	var one int64
	for _, l := range ls {
		one += int64(len(l.data)) + 16
	}
	next, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	next.cache = newCache(one*9/2 + 1) // room for 4 lists, not 5
	if err := next.WarmFrom(ctx, db, old); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t0", "t5", "t6", "t7"}, cachedTerms(next)); diff != "" {
		t.Errorf("warmed terms (-want +got):\n%s", diff)
	}
}

// Warming reads at most maxWarmTerms terms, the most recent.
func TestWarmFromTermCap(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	old, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var bs []Block
	for i := int64(1); i <= 80; i++ {
		bs = append(bs, blk(i, fmt.Sprintf("t%d", i%8), ""))
	}
	write(t, old, db, bs, nil)
	for i := 0; i < 8; i++ {
		search(t, old, db, Query{Terms: []string{fmt.Sprintf("t%d", i)}, K: 3, Params: DefaultParams})
	}
	next, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { maxWarmTerms = n }(maxWarmTerms)
	maxWarmTerms = 3
	if err := next.WarmFrom(ctx, db, old); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t5", "t6", "t7"}, cachedTerms(next)); diff != "" {
		t.Errorf("warmed terms (-want +got):\n%s", diff)
	}
}

// WarmFrequent caches the lists of the most frequent terms, as many as
// the cache holds, and searches on them then read nothing.
func TestWarmFrequent(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// f0 in every block, f1 in every 2nd, …, f59 in every 60th.
	const terms = 60
	var bs []Block
	for i := int64(1); i <= 600; i++ {
		var words []string
		for f := int64(0); f < terms; f++ {
			if i%(f+1) == 0 {
				words = append(words, fmt.Sprintf("f%d", f))
			}
		}
		bs = append(bs, blk(i, strings.Join(words, " "), ""))
	}
	write(t, ix, db, bs[:300], nil)
	write(t, ix, db, bs[300:], nil) // two segments
	q := Query{Terms: []string{"f0", "f2"}, K: 10, MaxLevel: 0, Params: DefaultParams}
	want := search(t, ix, db, q)

	for _, chunk := range []int{warmChunk, 7} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			defer func(n int) { warmChunk = n }(warmChunk)
			warmChunk = chunk
			warmFrequent(t, db, q, want, terms)
		})
	}
}

func warmFrequent(t *testing.T, db *sql.DB, q Query, want []Hit, terms int) {
	ctx := context.Background()
	cold, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// Room for f0's list (a fifth of the lists' bytes: a list may take a
	// quarter of the cache) and not for every list.
	var bytes int64
	for _, s := range cold.segments {
		bytes += s.bytes
	}
	cold.cache = newCache(bytes * 9 / 10)
	n, err := cold.WarmFrequent(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var wantTerms []string
	for f := 0; f < n; f++ {
		wantTerms = append(wantTerms, fmt.Sprintf("f%d", f))
	}
	sort.Strings(wantTerms)
	if n < 3 || n >= terms {
		t.Errorf("warmed %d of %d terms, want the most frequent that fit", n, terms)
	}
	if diff := cmp.Diff(wantTerms, cachedTerms(cold)); diff != "" {
		t.Errorf("cached terms (-the %d most frequent +got):\n%s", n, diff)
	}
	counted := &countingDB{DB: db}
	if diff := cmp.Diff(want, search(t, cold, counted, q)); diff != "" {
		t.Errorf("after WarmFrequent (-want +got):\n%s", diff)
	}
	if n := counted.postings.Load(); n != 0 {
		t.Errorf("%d posting queries for warmed terms, want 0", n)
	}
}
