package index

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// A search's hits take their documents' fields from memory (hitDocs),
// kept in step with the documents table by every write: after ingest,
// replace, a raised and a lowered sensitivity, a metadata-only update,
// delete, purge (a switch) and reopen, the table holds exactly the rows'
// fields, and Search's hits equal those read by joining the rows
// (fillHits), at every clearance: no block above it, whatever its document
// was when the table was loaded.
func TestHitDocsInStep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	doc := func(i int, sens string, meta map[string]any) Input {
		return Input{Source: fmt.Sprintf("/d%02d.md", i), Sensitivity: sens, Meta: meta, Data: []byte(fmt.Sprintf(
			"---\ntitle: Doc %d\nshelf: s%d\n---\n\n# Doc %d\n\ncommon words about apples %d\n\n## Part\n\nmore common text on pears %d\n", i, i%3, i, i, i%3))}
	}
	var ins []Input
	for i := range 12 {
		ins = append(ins, doc(i, []string{Public, Internal, Restricted}[i%3], map[string]any{"n": float64(i)}))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}

	check := func(stage string) {
		t.Helper()
		for _, clearance := range []string{Public, Internal, Restricted} {
			levels, _ := allowed(clearance)
			for _, mode := range []string{ModeBM25, ModeHybrid} {
				opts := &SearchOptions{K: 100, Mode: mode, Clearance: clearance}
				hits, err := ix.Search(ctx, "common apples pears", opts)
				if err != nil {
					t.Fatalf("%s: search %s %s: %v", stage, clearance, mode, err)
				}
				ranked, err := ix.Rank(ctx, "common apples pears", opts)
				if err != nil {
					t.Fatal(err)
				}
				s, err := ix.acquire()
				if err != nil {
					t.Fatal(err)
				}
				var ids []int64
				for _, r := range ranked {
					var id int64
					if err := s.db.QueryRowContext(ctx, `SELECT block_id FROM blocks WHERE public_id = ?`, r.BlockID).Scan(&id); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				}
				joined, _, err := fillHits(ctx, s.db, ids, levels)
				s.unref()
				if err != nil {
					t.Fatal(err)
				}
				if len(hits) != len(joined) {
					t.Errorf("%s: %s %s: %d hits from memory, %d from the rows", stage, clearance, mode, len(hits), len(joined))
				}
				for i := range joined[:min(len(joined), len(hits))] {
					joined[i].Score = hits[i].Score
				}
				if !reflect.DeepEqual(hits, joined) {
					t.Errorf("%s: %s %s: hits from memory\n%+v\nfrom the rows\n%+v", stage, clearance, mode, hits, joined)
				}
				var rows int
				s, _ = ix.acquire()
				s.db.QueryRowContext(ctx, `SELECT count(*) FROM blocks b JOIN documents d USING (doc_id)
					WHERE d.sensitivity IN (SELECT unnest(?::VARCHAR[]))`, levels).Scan(&rows)
				s.unref()
				if len(hits) != rows {
					t.Errorf("%s: %s %s: %d hits, %d blocks within the clearance", stage, clearance, mode, len(hits), rows)
				}
				for _, h := range hits {
					if i := slicesIndex(levels, sensitivityOf(t, ix, h.DocID)); i < 0 {
						t.Errorf("%s: %s: hit %s of a document above the clearance", stage, clearance, h.Source)
					}
				}
			}
		}
		// The table holds exactly the rows' fields.
		if err := CheckDocTable(ctx, ix); err != nil {
			t.Errorf("%s: %v", stage, err)
		}
	}
	check("first ingest")

	// A public document raised to restricted, a restricted one lowered
	// (an explicit sensitivity applies), a changed one, a new one.
	if _, _, err := ix.IngestBatch(ctx, []Input{doc(0, Restricted, nil), doc(2, Public, nil), doc(3, "", nil), doc(12, Internal, nil)}); err != nil {
		t.Fatal(err)
	}
	check("raise, lower, add")
	if hits, _ := ix.Search(ctx, "apples 0", &SearchOptions{K: 100}); len(hits) > 0 {
		for _, h := range hits {
			if h.Source == "/d00.md" {
				t.Fatal("a document raised to restricted is still found at public clearance")
			}
		}
	}
	// Metadata only: the same bytes, other Meta.
	if r, err := ix.Ingest(ctx, doc(4, "", map[string]any{"n": 40.0, "x": "y"})); err != nil {
		t.Fatal(err)
	} else if r.Status != MetaUpdated {
		t.Fatalf("metadata-only update: status %s", r.Status)
	}
	check("metadata update")
	if _, err := ix.Delete(ctx, "/d05.md", "/d07.md"); err != nil {
		t.Fatal(err)
	}
	check("delete")
	gen := ix.Generation()
	if _, err := ix.Purge(ctx, "/d08.md"); err != nil {
		t.Fatal(err)
	}
	if ix.Generation() == gen {
		t.Fatal("the purge did not switch generations")
	}
	if s, _ := ix.acquire(); s != nil {
		if !s.hitDocs.isLoaded() {
			t.Error("purge: the switch did not warm the new state's table")
		}
		s.unref()
	}
	check("purge and switch")

	// A write before the first search of a new state leaves the table to
	// its first load.
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, doc(1, Restricted, nil)); err != nil {
		t.Fatal(err)
	}
	if s, _ := ix.acquire(); s != nil {
		if s.hitDocs.isLoaded() {
			t.Error("reopened: table loaded before any search")
		}
		s.unref()
	}
	check("reopen and raise")
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// sensitivityOf reads a document's sensitivity from its row.
func sensitivityOf(t *testing.T, ix *Index, docID string) string {
	t.Helper()
	s, err := ix.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.unref()
	var sens string
	if err := s.db.QueryRow(`SELECT sensitivity FROM documents WHERE doc_id = ?`, docID).Scan(&sens); err != nil {
		t.Fatal(err)
	}
	return sens
}

// Searches (which load and read the hits' documents) run while writes
// commit (which update them: replacements that raise and lower a
// document's sensitivity, metadata-only updates, deletes): no search ever
// returns a block above its clearance. Run with -race.
func TestHitDocsDuringWrites(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// The sensitivity is in the text: a public hit whose body says
	// "restricted" leaked.
	doc := func(i int, sens string, meta map[string]any) Input {
		return Input{Source: fmt.Sprintf("/w%02d.md", i%8), Sensitivity: sens, Meta: meta,
			Data: []byte(fmt.Sprintf("# W %d\n\nshared apples text %s %d\n", i%8, sens, i))}
	}
	for i := range 8 {
		if _, err := ix.Ingest(ctx, doc(i, Public, nil)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				hits, err := ix.Search(ctx, "shared apples", &SearchOptions{K: 20, Mode: ModeHybrid})
				if err != nil {
					errs <- err
					return
				}
				for _, h := range hits {
					if !containsWord(h.Body, Public) {
						errs <- fmt.Errorf("public search returned %q", h.Body)
						return
					}
				}
			}
		}()
	}
	for i := 8; i < 60; i++ {
		var err error
		switch i % 4 {
		case 0:
			_, err = ix.Ingest(ctx, doc(i, Restricted, nil))
		case 1:
			_, err = ix.Ingest(ctx, doc(i, Public, nil))
		case 2:
			d := doc(i-1, Public, map[string]any{"i": float64(i)}) // same bytes as i-1: metadata only
			_, err = ix.Ingest(ctx, d)
		case 3:
			_, err = ix.Delete(ctx, fmt.Sprintf("/w%02d.md", (i-2)%8)) // ingested at i-2
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w && (i == 0 || s[i-1] == ' ') && (i+len(w) == len(s) || s[i+len(w)] == ' ') {
			return true
		}
	}
	return false
}

// A hit whose document's id the table cannot hold (not 32 lowercase hex
// digits: no write makes one, an edited file might) is read joined with
// its document's row, gate included.
func TestHitDocsOddDocID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Input{
		{Source: "/odd.md", Sensitivity: Public, Data: []byte("# Odd\n\nquokka text\n")},
		{Source: "/odd-secret.md", Sensitivity: Restricted, Data: []byte("# Secret\n\nquokka secret\n")},
	} {
		if _, err := ix.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := ix.acquire()
	for _, q := range []string{
		`UPDATE blocks SET doc_id = 'ODD-' || doc_id`,
		`UPDATE documents SET doc_id = 'ODD-' || doc_id`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s.unref()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	hits, err := ix.Search(ctx, "quokka", &SearchOptions{K: 10, Mode: ModeBM25})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Source != "/odd.md" {
		t.Fatalf("public hits %+v", hits)
	}
	if _, ok := ix.cur.Load().hitDocs.lookup([]string{hits[0].DocID}); ok {
		t.Errorf("the table claims to hold %q", hits[0].DocID)
	}
	if hits, _ := ix.Search(ctx, "quokka", &SearchOptions{K: 10, Mode: ModeBM25, Clearance: Restricted}); len(hits) != 2 {
		t.Errorf("restricted: %d hits, want 2", len(hits))
	}
}

// A state's first searches read their hits' documents through the join;
// the hitDocsLoadAfter-th loads the table. The hits are the same either
// way, and a restricted document's blocks reach neither path's public
// caller.
func TestHitDocsLoadAfterSearches(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	for i := range 6 {
		in := Input{Source: fmt.Sprintf("/l%d.md", i), Data: []byte(fmt.Sprintf("# L%d\n\nlazy apples %d\n", i, i))}
		if i == 2 {
			in.Sensitivity = Restricted
		}
		ins = append(ins, in)
	}
	mustIngest(t, ix, ins...)
	var first []Hit
	for i := range hitDocsLoadAfter + 1 {
		loaded := ix.cur.Load().hitDocs.isLoaded()
		if loaded != (i >= hitDocsLoadAfter) {
			t.Fatalf("before search %d: table loaded %v", i+1, loaded)
		}
		hits, err := ix.Search(ctx, "lazy apples", &SearchOptions{K: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 5 {
			t.Fatalf("search %d: %d hits, want the 5 public documents' blocks", i+1, len(hits))
		}
		for _, h := range hits {
			if h.Source == "/l2.md" {
				t.Fatalf("search %d: the restricted document reached a public caller", i+1)
			}
		}
		if i == 0 {
			first = hits
		} else if !reflect.DeepEqual(first, hits) {
			t.Fatalf("search %d: hits differ from the first's:\n%+v\n%+v", i+1, hits, first)
		}
	}
}
