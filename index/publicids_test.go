package index

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func TestPublicIDFormat(t *testing.T) {
	for _, s := range []string{"4dc200b25077a976", "0000000000000001", "ffffffffffffffff", "82dff67c1078897c"} {
		n, ok := parsePublicID(s)
		if !ok || formatPublicID(n) != s {
			t.Errorf("%s: parsed %x %v, formatted %s", s, n, ok, formatPublicID(n))
		}
	}
	// Not held (read from the row instead): anything else, and 0.
	for _, s := range []string{"", "0000000000000000", "4DC200B25077A976", "4dc200b25077a97", "4dc200b25077a9766", "+dc200b25077a976"} {
		if _, ok := parsePublicID(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}

// Rank's public ids come from memory (publicIDs), kept in step with the
// blocks table by every write and loaded afresh by each generation: after
// ingest, replace, delete, compaction, purge (a switch to a new
// generation) and reload, the map holds exactly the table's ids, and Rank
// names the same blocks, with the same scores, as Search (which reads the
// rows), in every mode.
func TestRankPublicIDsInStep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	doc := func(i int, extra string) Input {
		return Input{Source: fmt.Sprintf("/d%02d.md", i), Data: []byte(fmt.Sprintf(
			"# Doc %d\n\ncommon words about apples %d %s\n\n## Part\n\nmore common text on pears and plums %d\n", i, i, extra, i%3))}
	}
	var ins []Input
	for i := range 12 {
		ins = append(ins, doc(i, ""))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}

	// A state's first lookups read the rows; the hitDocsLoadAfter-th loads
	// the map.
	for i := 1; i <= hitDocsLoadAfter; i++ {
		ranked, err := ix.Rank(ctx, "common apples", &SearchOptions{K: 50})
		if err != nil {
			t.Fatal(err)
		}
		hits, err := ix.Search(ctx, "common apples", &SearchOptions{K: 50})
		if err != nil || len(hits) == 0 || len(ranked) != len(hits) {
			t.Fatalf("rank %d: %d hits, search %d, %v", i, len(ranked), len(hits), err)
		}
		for j := range hits {
			if ranked[j].BlockID != hits[j].BlockID {
				t.Fatalf("rank %d: hit %d is %s, search's %s", i, j, ranked[j].BlockID, hits[j].BlockID)
			}
		}
		s, _ := ix.acquire()
		loaded := s.pub.isLoaded()
		s.unref()
		if loaded != (i == hitDocsLoadAfter) {
			t.Fatalf("after rank %d: map loaded %v", i, loaded)
		}
	}

	check := func(stage string) {
		t.Helper()
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.unref()
		for _, q := range []string{"common apples", "pears plums", "doc part 7", "apples 3 replaced"} {
			for _, mode := range []string{ModeBM25, ModeDense, ModeHybrid} {
				opts := &SearchOptions{K: 50, Mode: mode}
				ranked, err := ix.Rank(ctx, q, opts)
				if err != nil {
					t.Fatalf("%s: rank %q %s: %v", stage, q, mode, err)
				}
				hits, err := ix.Search(ctx, q, opts)
				if err != nil {
					t.Fatalf("%s: search %q %s: %v", stage, q, mode, err)
				}
				if len(ranked) == 0 || len(ranked) != len(hits) {
					t.Fatalf("%s: %q %s: rank %d hits, search %d", stage, q, mode, len(ranked), len(hits))
				}
				for i := range hits {
					if ranked[i].BlockID != hits[i].BlockID || ranked[i].Score != hits[i].Score {
						t.Errorf("%s: %q %s: hit %d: rank %s %v, search %s %v", stage, q, mode, i, ranked[i].BlockID, ranked[i].Score, hits[i].BlockID, hits[i].Score)
					}
				}
			}
		}
		// The map holds exactly the table's ids (nothing read back from
		// the rows for want of an entry, nothing left of a deleted block).
		rows, err := s.db.QueryContext(ctx, `SELECT block_id, public_id FROM blocks`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		want := map[int64]string{}
		for rows.Next() {
			var id int64
			var pub string
			if err := rows.Scan(&id, &pub); err != nil {
				t.Fatal(err)
			}
			want[id] = pub
		}
		s.pub.mu.RLock()
		defer s.pub.mu.RUnlock()
		if !s.pub.loaded {
			t.Fatalf("%s: map not loaded after a search", stage)
		}
		held := 0
		for id, n := range s.pub.ids {
			if n == 0 {
				continue
			}
			held++
			if w, ok := want[int64(id)]; !ok || formatPublicID(n) != w {
				t.Errorf("%s: map has block %d as %s; table: %q (present %v)", stage, id, formatPublicID(n), w, ok)
			}
		}
		if held != len(want) {
			t.Errorf("%s: map holds %d ids, table %d", stage, held, len(want))
		}
	}
	check("first ingest")

	// More documents and a changed one (new blob, so new ids for it).
	if _, _, err := ix.IngestBatch(ctx, []Input{doc(12, ""), doc(3, "replaced")}); err != nil {
		t.Fatal(err)
	}
	check("ingest and replace")
	if _, err := ix.Delete(ctx, "/d05.md", "/d07.md"); err != nil {
		t.Fatal(err)
	}
	check("delete")
	if err := ix.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("compact")
	gen := ix.Generation()
	if _, err := ix.Purge(ctx, "/d08.md"); err != nil {
		t.Fatal(err)
	}
	if ix.Generation() == gen {
		t.Fatal("the purge did not switch generations")
	}
	if s, _ := ix.acquire(); s != nil {
		if !s.pub.isLoaded() {
			t.Error("purge: the switch did not warm the new state's map")
		}
		s.unref()
	}
	check("purge and switch")
	if _, err := ix.Ingest(ctx, doc(13, "")); err != nil {
		t.Fatal(err)
	}
	check("ingest after the switch")

	// A write before the first search of a new state leaves the map to
	// its first load.
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, doc(14, "")); err != nil {
		t.Fatal(err)
	}
	if s, _ := ix.acquire(); s != nil {
		if s.pub.isLoaded() {
			t.Error("reopened: map loaded before any search")
		}
		s.unref()
	}
	check("reopen and ingest")

	ranked, err := ix.Rank(ctx, "apples", &SearchOptions{K: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range ranked {
		ids = append(ids, r.BlockID)
	}
	if len(ids) != 12 { // 15 documents, 3 deleted; the apples block of each
		t.Errorf("%d apples blocks ranked, want 12", len(ids))
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(ranked) {
		t.Errorf("repeated ids: %v", ids)
	}
}

// Searches (Rank, which loads and reads the public ids) run while writes
// commit (which update them and the doc-id set): run with -race.
func TestRankDuringWrites(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	doc := func(i int) Input {
		return Input{Source: fmt.Sprintf("/r%03d.md", i), Data: []byte(fmt.Sprintf("# R %d\n\nshared apples text %d\n", i, i))}
	}
	if _, err := ix.Ingest(ctx, doc(0)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for i := 1; i < 30; i++ {
			if _, err := ix.Ingest(ctx, doc(i)); err != nil {
				done <- err
				return
			}
			if i%3 == 0 {
				if _, err := ix.Delete(ctx, fmt.Sprintf("/r%03d.md", i-1)); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	for {
		select {
		case err, ok := <-done:
			if ok {
				t.Fatal(err)
			}
			ranked, err := ix.Rank(ctx, "apples", &SearchOptions{K: 100})
			if err != nil {
				t.Fatal(err)
			}
			hits, err := ix.Search(ctx, "apples", &SearchOptions{K: 100})
			if err != nil || len(hits) != len(ranked) || len(hits) != 21 { // 30 ingested, 9 deleted
				t.Fatalf("after the writes: rank %d, search %d hits (want 21), %v", len(ranked), len(hits), err)
			}
			for i := range hits {
				if hits[i].BlockID != ranked[i].BlockID {
					t.Errorf("hit %d: rank %s, search %s", i, ranked[i].BlockID, hits[i].BlockID)
				}
			}
			return
		default:
			if _, err := ix.Rank(ctx, "apples", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}
