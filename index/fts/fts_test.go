package fts

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/internal/duck"
	schemasql "github.com/escurel/escurel/sql"
)

// newDB returns a DuckDB file with the current schema.
func newDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", t.TempDir()+"/fts.duckdb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := schemasql.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	return db
}

func write(t *testing.T, ix *Index, db *sql.DB, add, remove []Block) {
	t.Helper()
	ctx := context.Background()
	tx, err := duck.Begin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rm, err := ix.Remove(ctx, tx, remove)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := ix.Add(ctx, tx, add)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Commit(ctx, tx, rm, ad); err != nil {
		t.Fatal(err)
	}
}

func search(t *testing.T, ix *Index, db Querier, q Query) []Hit {
	t.Helper()
	var hits []Hit
	err := ix.View(func() error {
		var err error
		hits, err = ix.Search(context.Background(), db, q)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func blk(id int64, body, context string) Block {
	return Block{ID: id, Terms: [NumFields][]string{strings.Fields(body), strings.Fields(context)}}
}

// TestBM25FHandComputed checks scores against the formula of Params,
// computed here by hand.
func TestBM25FHandComputed(t *testing.T) {
	db := newDB(t)
	ix, err := Load(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	write(t, ix, db, []Block{
		blk(1, "apple banana apple", "fruit guide"), // body 3, context 2
		blk(2, "banana cherry", "fruit"),            // body 2, context 1
		blk(3, "cherry date elderberry fig", ""),    // body 4, context 0
	}, nil)
	p := DefaultParams
	const n = 3.0
	avgB, avgC := 9.0/3, 3.0/3
	idf := func(df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }
	norm := func(l, avg float64) float64 { return 1 - 0.75 + 0.75*l/avg }
	sat := func(tf float64) float64 { return tf * (p.K1 + 1) / (p.K1 + tf) }
	// Query "apple fruit": apple in block 1's body twice; fruit in the
	// context of blocks 1 and 2 (weight 2).
	want := map[int64]float64{
		1: idf(1)*sat(2/norm(3, avgB)) + idf(2)*sat(2*1/norm(2, avgC)),
		2: idf(2) * sat(2*1/norm(1, avgC)),
	}
	hits := search(t, ix, db, Query{Terms: []string{"apple", "fruit"}, K: 10, Params: p, MaxLevel: 2})
	if len(hits) != 2 || hits[0].Block != 1 {
		t.Fatalf("hits %+v", hits)
	}
	for _, h := range hits {
		if math.Abs(h.Score-want[h.Block]) > 1e-12 {
			t.Errorf("block %d: score %.15f, want %.15f", h.Block, h.Score, want[h.Block])
		}
	}
	// One saturation over both fields, not two BM25 scores: a term in body
	// and context scores less than the sum of the two alone.
	write(t, ix, db, []Block{blk(4, "guide", "guide")}, nil)
	both := search(t, ix, db, Query{Terms: []string{"guide"}, K: 10, Params: p, MaxLevel: 2})
	if both[0].Block != 4 {
		t.Fatalf("hits %+v", both)
	}
	// Conjunctive: only blocks holding every term.
	hits = search(t, ix, db, Query{Terms: []string{"banana", "cherry"}, K: 10, Params: p, MaxLevel: 2, Conjunctive: true})
	if len(hits) != 1 || hits[0].Block != 2 {
		t.Errorf("conjunctive hits %+v", hits)
	}
	if hits := search(t, ix, db, Query{Terms: []string{"banana", "nothere"}, K: 10, Params: p, Conjunctive: true}); len(hits) != 0 {
		t.Errorf("conjunctive with an unknown term: %+v", hits)
	}
}

func TestLevelsAndTies(t *testing.T) {
	db := newDB(t)
	ix, _ := Load(context.Background(), db)
	b := []Block{blk(1, "same words", ""), blk(2, "same words", ""), blk(3, "same words", "")}
	b[1].Level = 2
	write(t, ix, db, b, nil)
	hits := search(t, ix, db, Query{Terms: []string{"same"}, K: 10, Params: DefaultParams, MaxLevel: 0})
	if diff := cmp.Diff([]int64{1, 3}, ids(hits)); diff != "" {
		t.Errorf("level 0 sees %v", ids(hits))
	}
	hits = search(t, ix, db, Query{Terms: []string{"same"}, K: 2, Params: DefaultParams, MaxLevel: 2})
	if diff := cmp.Diff([]int64{1, 2}, ids(hits)); diff != "" || hits[0].Score != hits[1].Score {
		t.Errorf("ties must order by block id: %+v", hits)
	}
}

func ids(hs []Hit) []int64 {
	var out []int64
	for _, h := range hs {
		out = append(out, h.Block)
	}
	return out
}

// randomCorpus returns blocks with Zipf-distributed words.
func randomCorpus(rng *rand.Rand, first int64, n int) []Block {
	z := rand.NewZipf(rng, 1.2, 1, 2000)
	var out []Block
	for i := 0; i < n; i++ {
		var b Block
		b.ID = first + int64(i)
		b.Level = uint8(rng.IntN(3))
		for f := range b.Terms {
			for j := rng.IntN(40 - 30*f); j >= 0; j-- {
				b.Terms[f] = append(b.Terms[f], fmt.Sprintf("w%d", z.Uint64()))
			}
		}
		out = append(out, b)
	}
	return out
}

// Deletes never leave stale hits, and neither merges, compaction nor a
// reload from the tables change any result, scores included.
func TestRemoveMergeCompactReload(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, _ := Load(ctx, db)
	rng := rand.New(rand.NewPCG(7, 8))
	var all []Block
	next := int64(1)
	for batch := 0; batch < 23; batch++ { // tier-0 merges happen along the way
		bs := randomCorpus(rng, next, 1+rng.IntN(8))
		next += int64(len(bs))
		write(t, ix, db, bs, nil)
		all = append(all, bs...)
		if err := ix.Maintain(ctx, db, 0.99); err != nil {
			t.Fatal(err)
		}
	}
	if st := ix.Stats(); st.Segments >= 23 {
		t.Errorf("%d segments after 23 batches: no merge happened", st.Segments)
	}
	// Remove every third block.
	var removed []Block
	dead := map[int64]bool{}
	for i := 0; i < len(all); i += 3 {
		removed = append(removed, all[i])
		dead[all[i].ID] = true
	}
	write(t, ix, db, nil, removed)
	queries := [][]string{{"w1"}, {"w2", "w3"}, {"w10", "w20", "w30"}, {"w1", "w500"}, {"w7"}}
	run := func() [][]Hit {
		var out [][]Hit
		for _, q := range queries {
			for lvl := uint8(0); lvl < 3; lvl++ {
				hits := search(t, ix, db, Query{Terms: q, K: 15, Params: DefaultParams, MaxLevel: lvl})
				for _, h := range hits {
					if dead[h.Block] {
						t.Fatalf("query %v returned removed block %d", q, h.Block)
					}
				}
				out = append(out, hits)
			}
		}
		return out
	}
	before := run()
	if st := ix.Stats(); st.Tombstones != len(removed) {
		t.Fatalf("tombstones %d, want %d", st.Tombstones, len(removed))
	}
	reloaded, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	ixSaved := ix
	ix = reloaded
	if diff := cmp.Diff(before, run()); diff != "" {
		t.Fatalf("results after reload differ:\n%s", diff)
	}
	ix = ixSaved
	if err := ix.Compact(ctx, db); err != nil {
		t.Fatal(err)
	}
	st := ix.Stats()
	if st.Tombstones != 0 || st.Segments != 1 || st.Blocks != len(all)-len(removed) {
		t.Errorf("after compaction: %+v", st)
	}
	if diff := cmp.Diff(before, run()); diff != "" {
		t.Fatalf("results after compaction differ:\n%s", diff)
	}
	var rows int
	db.QueryRow(`SELECT (SELECT count(*) FROM fts_removals) + (SELECT count(*) FROM fts_tombstones) + (SELECT count(*) FROM fts_df_deltas)`).Scan(&rows)
	if rows != 0 {
		t.Errorf("%d removal rows left after compaction", rows)
	}
	if ix, err = Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, run()); diff != "" {
		t.Fatalf("results after compaction and reload differ:\n%s", diff)
	}
}

func TestCodec(t *testing.T) {
	ps := []Posting{{1, [2]uint32{3, 0}}, {2, [2]uint32{0, 1}}, {1 << 40, [2]uint32{1 << 20, 7}}}
	data := encode(nil, ps)
	got, err := decodeAll(nil, data)
	if err != nil || !cmp.Equal(ps, got) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	if _, err := decodeAll(nil, data[:len(data)-1]); err == nil {
		t.Error("a truncated list decoded")
	}
}

// Blocks above a query's MaxLevel count in no statistic: every score equals,
// bit for bit, the score in an index that holds only the visible blocks,
// through deletes and a compaction.
func TestStatisticsPerLevel(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(15, 15))
	vocab := strings.Fields("lentil soup cumin bread bean rice salt flour water lemon")
	var all []Block
	for id := int64(1); id <= 300; id++ {
		var body, cx []string
		for range 1 + r.IntN(20) {
			body = append(body, vocab[r.IntN(len(vocab))])
		}
		for range r.IntN(4) {
			cx = append(cx, vocab[r.IntN(len(vocab))])
		}
		b := Block{ID: id, Level: uint8(r.IntN(3)), Terms: [NumFields][]string{body, cx}}
		all = append(all, b)
	}
	build := func(maxLevel uint8) (*Index, *sql.DB) {
		db := newDB(t)
		ix, err := Load(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		var batch []Block
		for _, b := range all {
			if b.Level <= maxLevel {
				batch = append(batch, b)
			}
			if len(batch) == 25 {
				write(t, ix, db, batch, nil)
				batch = nil
			}
		}
		write(t, ix, db, batch, nil)
		return ix, db
	}
	full, fullDB := build(2)
	queries := [][]string{{"lentil"}, {"lentil", "soup"}, {"cumin", "bread", "salt"}, {"water"}}
	compare := func(stage string) {
		for level := uint8(0); level <= 2; level++ {
			ref, refDB := build(level)
			for _, terms := range queries {
				for _, conj := range []bool{false, true} {
					q := Query{Terms: terms, MaxLevel: level, K: 1000, Params: DefaultParams, Conjunctive: conj}
					want, got := search(t, ref, refDB, q), search(t, full, fullDB, q)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("%s, level %d, %v conjunctive=%v (-index of visible blocks only +full index):\n%s", stage, level, terms, conj, diff)
					}
				}
			}
		}
	}
	compare("fresh")
	// Delete every block above public that holds "water": the reference
	// indexes never had them.
	var gone []Block
	kept := all[:0:0]
	for _, b := range all {
		if b.Level > 0 && strings.Contains(strings.Join(b.Terms[Body], " "), "water") {
			gone = append(gone, b)
		} else {
			kept = append(kept, b)
		}
	}
	write(t, full, fullDB, nil, gone)
	all = kept
	compare("after deletes")
	if err := full.Compact(ctx, fullDB); err != nil {
		t.Fatal(err)
	}
	compare("after compaction")
	reloaded, err := Load(ctx, fullDB)
	if err != nil {
		t.Fatal(err)
	}
	full = reloaded
	compare("after Load")
}

// A K far beyond the candidates allocates for the candidates: the largest
// int once panicked in make (cap out of range), a large one ran the
// process out of memory.
func TestHugeKAllocatesForCandidates(t *testing.T) {
	db := newDB(t)
	ix, err := Load(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	write(t, ix, db, []Block{blk(1, "apple banana", ""), blk(2, "banana", "")}, nil)
	for _, k := range []int{math.MaxInt, 1 << 40} {
		hits := search(t, ix, db, Query{Terms: []string{"banana"}, K: k, Params: DefaultParams, MaxLevel: 2})
		if len(hits) != 2 {
			t.Errorf("K=%d: %d hits, want 2", k, len(hits))
		}
	}
}

// Load refuses a dictionary that names a term twice, gives an id two
// terms or holds an empty term (a damaged file), and loads one whose ids have gaps (terms a
// compaction dropped) with every term at its id.
func TestLoadDictionaryChecks(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		rows string
		ok   bool
	}{
		"a term twice":  {`(0, 'apple'), (1, 'pear'), (2, 'apple')`, false},
		"an id twice":   {`(0, 'apple'), (1, 'pear'), (1, 'fig')`, false},
		"an empty term": {`(0, 'apple'), (1, '')`, false},
		"gaps":          {`(5, 'apple'), (0, 'pear'), (9, 'fig')`, true},
	} {
		db := newDB(t)
		if _, err := db.Exec(`INSERT INTO fts_terms VALUES ` + c.rows); err != nil {
			t.Fatal(err)
		}
		ix, err := Load(ctx, db)
		if !c.ok {
			if err == nil || !strings.Contains(err.Error(), "load fts dictionary") {
				t.Errorf("%s: Load = %v, want a dictionary error", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for term, id := range map[string]int32{"apple": 5, "pear": 0, "fig": 9} {
			if got, ok := ix.ids.get(term); !ok || got != id {
				t.Errorf("%s: %q has id %d, %v; want %d", name, term, got, ok, id)
			}
		}
		if ix.nextTerm != 10 {
			t.Errorf("%s: next term id %d, want 10", name, ix.nextTerm)
		}
	}
}
