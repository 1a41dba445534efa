package fts

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A merge that reads its segments in many term ranges (a small
// mergeChunkBytes) and appends them in many slices (small flushBytes and
// flushRows, each the trigger of some) writes the same rows as one that
// reads and appends them at once: the merged posting lists, the segment's
// counts, and the results.
func TestMergeInTermRanges(t *testing.T) {
	ctx := context.Background()
	type built struct {
		db *sql.DB
		ix *Index
	}
	build := func() built {
		db := newDB(t)
		ix, err := Load(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		next := int64(1)
		var all []Block
		for range 9 { // 9 segments: below MergeFactor, so only Compact merges
			bs := randomCorpus(rng, next, 40+rng.IntN(40))
			next += int64(len(bs))
			write(t, ix, db, bs, nil)
			all = append(all, bs...)
		}
		var removed []Block
		for i := 0; i < len(all); i += 5 {
			removed = append(removed, all[i])
		}
		write(t, ix, db, nil, removed)
		return built{db, ix}
	}
	whole, ranged := build(), build()
	if err := whole.ix.Compact(ctx, whole.db); err != nil {
		t.Fatal(err)
	}

	saved, savedBytes, savedRows := mergeChunkBytes, flushBytes, flushRows
	mergeChunkBytes, flushBytes, flushRows = 512, 200, 7
	defer func() { mergeChunkBytes, flushBytes, flushRows = saved, savedBytes, savedRows }()
	var stored int64
	for _, s := range ranged.ix.segments {
		stored += s.bytes
	}
	rs, err := termRanges(ctx, ranged.db, "SELECT segment_id FROM fts_segments", ranged.ix.nextTerm, mergeChunkBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 10 || stored <= mergeChunkBytes {
		t.Fatalf("%d term ranges for %d bytes: the test does not split the merge", len(rs), stored)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i][0] != rs[i-1][1]+1 || rs[i][0] > rs[i][1] {
			t.Fatalf("term ranges not contiguous and ascending: %v", rs)
		}
	}
	if err := ranged.ix.Compact(ctx, ranged.db); err != nil {
		t.Fatal(err)
	}

	dump := func(db *sql.DB) [][]any {
		var out [][]any
		for _, q := range []string{
			`SELECT term_id, segment_id, df, df_body, df_context, data FROM fts_postings ORDER BY term_id, segment_id`,
			`SELECT segment_id, blocks, min_block, max_block, bytes FROM fts_segments ORDER BY segment_id`,
			`SELECT term_id, term FROM fts_terms ORDER BY term_id`,
		} {
			rows, err := db.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				out = append(out, vals)
			}
			rows.Close()
		}
		return out
	}
	want, got := dump(whole.db), dump(ranged.db)
	if len(want) < 100 {
		t.Fatalf("only %d rows to compare", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("tables after a merge in term ranges differ:\n%s", diff)
	}
	if w, g := whole.ix.Stats(), ranged.ix.Stats(); w != g || g.Segments != 1 {
		t.Fatalf("stats: whole %+v, in ranges %+v", w, g)
	}
	for _, q := range [][]string{{"w1"}, {"w2", "w3"}, {"w10", "w20", "w30"}} {
		w := search(t, whole.ix, whole.db, Query{Terms: q, K: 20, Params: DefaultParams, MaxLevel: 2})
		g := search(t, ranged.ix, ranged.db, Query{Terms: q, K: 20, Params: DefaultParams, MaxLevel: 2})
		if len(w) == 0 {
			t.Fatalf("query %v: no hits", q)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Fatalf("query %v after a merge in term ranges:\n%s", q, diff)
		}
	}
}

// A segment row whose block range is damaged (a huge max_block) fails the
// merge with errCorrupt instead of allocating a bitset for the range.
func TestMergeRefusesDamagedSegmentRange(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	ix, err := Load(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	next := int64(1)
	for range 2 {
		bs := randomCorpus(rng, next, 20)
		next += int64(len(bs))
		write(t, ix, db, bs, nil)
	}
	if _, err := db.Exec(`UPDATE fts_segments SET max_block = 1152921504606846976 WHERE segment_id = (SELECT min(segment_id) FROM fts_segments)`); err != nil {
		t.Fatal(err)
	}
	if ix, err = Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(ctx, db); !errors.Is(err, errCorrupt) {
		t.Fatalf("compact over a damaged segment range: %v, want errCorrupt", err)
	}
}
