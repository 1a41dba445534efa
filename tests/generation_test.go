package tests

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/rebuild"
)

// fastAPI ingests the shared FastAPI pages (skipping when absent) and
// returns how many documents landed.
func fastAPI(e *env) int {
	e.t.Helper()
	sum, err := e.ix.IngestFiles(context.Background(), []string{sharedData(e.t, "markdown/fastapi")}, index.IngestOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return sum.Added
}

// The headline property: ingest then rebuild reproduces the rows (the same
// digest), and so do two rebuilds in a row, for Markdown and text.
func TestRebuildDigestIsIngestDigest(t *testing.T) {
	e := newEnv(t, index.Options{})
	n := fastAPI(e)
	seed(e) // and a text file
	ingested := e.digest()
	first := e.rebuild(index.Options{})
	if first.Documents != n+3 || first.Verify.Digest != ingested {
		t.Fatalf("rebuild: %d documents, digest %s; ingest: %d documents, digest %s", first.Documents, first.Verify.Digest, n+3, ingested)
	}
	if got := e.digest(); got != ingested {
		t.Errorf("reopened after rebuild: digest %s, want %s", got, ingested)
	}
	second := e.rebuild(index.Options{})
	if second.Verify.Digest != ingested || second.Generation != "gen-000003" {
		t.Errorf("second rebuild: %+v", second)
	}
	// Two generations kept: the live one and the one before.
	if gens, _ := layout.Generations(e.dir); len(gens) != 2 || gens[1] != "gen-000003" {
		t.Errorf("generations %v", gens)
	}
	t.Logf("%d documents, digest %s", first.Documents, ingested)
}

// Contextualize off, rebuilt: every context is empty; on again: the
// original digest.
func TestRebuildContextRoundTrip(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	original := e.digest()
	e.rebuild(index.Options{Contextualize: index.ContextOff})
	for src, blocks := range e.rows() {
		for _, b := range blocks {
			if b.Context != "" {
				t.Fatalf("%s: context %q with contextualize off", src, b.Context)
			}
		}
	}
	if e.digest() == original {
		t.Error("the digest did not change with the contexts")
	}
	e.rebuild(index.Options{Contextualize: index.ContextStructural})
	if got := e.digest(); got != original {
		t.Errorf("contextualize on again: digest %s, want the original %s", got, original)
	}
}

// Rollback makes the previous generation live, with its digest.
func TestRollback(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	before := e.digest()
	e.rebuild(index.Options{Contextualize: index.ContextOff})
	after := e.digest()
	e.ix.Close()
	from, to, err := index.Rollback(context.Background(), e.dir, &index.RollbackOptions{Blobs: blobsOf(e)})
	if err != nil || from != "gen-000002" || to != "gen-000001" {
		t.Fatalf("rollback: %s → %s, %v", from, to, err)
	}
	e.opts = index.Options{}
	e.open()
	if got := e.digest(); got != before || got == after {
		t.Errorf("after rollback: digest %s, want %s", got, before)
	}
	// The next rebuild removes the generation rolled back from, and does
	// not give its number to new content.
	sum := e.rebuild(index.Options{})
	if gens, _ := layout.Generations(e.dir); sum.Generation != "gen-000003" || len(gens) != 2 || gens[0] != "gen-000001" {
		t.Errorf("rebuild after rollback: %s, generations %v", sum.Generation, gens)
	}
}

// A live index keeps answering while a rebuild builds and swaps in a new
// generation: a search loop never fails and never comes back empty, and
// documents ingested and deleted during the rebuild are in the new
// generation, which verifies.
func TestRebuildWhileServing(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	n := fastAPI(e) + 3
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var searches, failures atomic.Int64
	var firstErr atomic.Value
	for _, mode := range []string{index.ModeBM25, index.ModeHybrid} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hits, err := e.ix.Search(context.Background(), "path parameters", &index.SearchOptions{K: 5, Mode: mode})
				searches.Add(1)
				if err != nil || len(hits) == 0 {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %d hits, %v", mode, len(hits), err))
				}
			}
		}()
	}
	var ingested atomic.Int64
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix, Batch: 64,
		Index: index.Options{Contextualize: index.ContextOff},
		Progress: func(done, total int) {
			// Writes to the live index while the rebuild runs.
			i := ingested.Add(1)
			e.ingest(fmt.Sprintf("/during/%d.md", i), fmt.Sprintf("# During %d\n\nwritten during the rebuild, marker%d\n", i, i))
			if i == 1 {
				if _, err := e.ix.Delete(context.Background(), "/docs/notes.txt"); err != nil {
					t.Error(err)
				}
			}
		}})
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if failures.Load() > 0 {
		t.Errorf("%d of %d searches failed or were empty; first: %v", failures.Load(), searches.Load(), firstErr.Load())
	}
	if e.ix.Generation() != sum.Generation || e.ix.Manifest().Contextualize != index.ContextOff {
		t.Errorf("the live index is on %s (%s), the rebuild made %s", e.ix.Generation(), e.ix.Manifest().Contextualize, sum.Generation)
	}
	want := n + int(ingested.Load()) - 1
	if sum.Documents != want || sum.CaughtUp != int(ingested.Load())+1 {
		t.Errorf("rebuild: %d documents (want %d), %d caught up", sum.Documents, want, sum.CaughtUp)
	}
	if hits := e.search(fmt.Sprintf("marker%d", ingested.Load()), 5); len(hits) != 1 {
		t.Errorf("the last document written during the rebuild: %d hits", len(hits))
	}
	for _, h := range e.search("plain notes paragraph", 10) {
		if h.Source == "/docs/notes.txt" {
			t.Errorf("the document deleted during the rebuild is back: %+v", h)
		}
	}
	e.digest() // verifies
	t.Logf("%d searches during the rebuild, %d documents written meanwhile", searches.Load(), ingested.Load())
}

// Reembed gives the index a new embedding set without re-extracting:
// searches before the swap use the old model, after it the new one; the
// text rows are unchanged.
func TestReembed(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	rowsBefore := e.rows()
	sum, err := rebuild.Reembed(context.Background(), rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix,
		Index: index.Options{Embedder: embed.Spec{Model: "hash", Dim: 64}}})
	if err != nil {
		t.Fatal(err)
	}
	if m := e.ix.Manifest(); m.EmbedderDim != 64 || sum.Generation != "gen-000002" {
		t.Fatalf("after reembed: manifest %+v, summary %+v", m, sum)
	}
	st, err := e.ix.Stats(context.Background())
	if err != nil || st.EmbeddingSet != "hash/64" || st.Embeddings != st.Blocks {
		t.Errorf("stats %+v %v", st, err)
	}
	if hits := searchWith(t, e.ix, "connection timeout", index.SearchOptions{Mode: index.ModeDense, K: 1}); len(hits) != 1 {
		t.Errorf("dense search with the new set: %+v", hits)
	}
	if diff := fmt.Sprint(e.rows()); diff != fmt.Sprint(rowsBefore) {
		t.Error("reembed changed the blocks")
	}
	e.ix.Close()
	e.opts = index.Options{}
	e.open()
	if e.ix.Manifest().EmbedderDim != 64 {
		t.Errorf("reopened: %+v", e.ix.Manifest())
	}
	// The guard now expects the new model.
	e.ix.Close()
	if _, err := index.Open(context.Background(), e.dir, &index.Options{Embedder: embed.Default}); err == nil {
		t.Error("the old embedder was accepted after reembed")
	}
	e.open()
}

// TestMain's other child: a rebuild, killed by the test.
func rebuildChild(dir string) {
	store, err := openStore(filepath.Join(dir, "blobs"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	_, err = rebuild.Run(context.Background(), rebuild.Options{Dir: dir, Blobs: store, Batch: 16,
		Index:    index.Options{Contextualize: index.ContextOff},
		Progress: func(done, total int) { fmt.Printf("progress %d %d\n", done, total) }})
	fmt.Println("error", err) // not reached when killed
	os.Exit(1)
}

// A rebuild killed with SIGKILL at random points leaves the live
// generation's digest unchanged, and the next rebuild starts clean.
func TestRebuildKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	e := newEnv(t, index.Options{})
	fastAPI(e)
	live := e.digest()
	e.ix.Close()
	for round, at := range []int{1, 2} { // killed after the first and the second progress line
		cmd, sc := startChild(t, "ESCUREL_REBUILD_CHILD", e.dir)
		seen := 0
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatal(line)
			}
			if strings.HasPrefix(line, "progress") {
				if seen++; seen == at {
					break
				}
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		gens, _ := layout.Generations(e.dir)
		e.opts = index.Options{}
		e.open()
		if got := e.digest(); got != live || e.ix.Generation() != "gen-000001" {
			t.Fatalf("round %d: after the kill the live generation is %s with digest %s, want gen-000001 with %s (generations %v)",
				round, e.ix.Generation(), got, live, gens)
		}
		e.ix.Close()
		t.Logf("round %d: killed after progress line %d; generations on disk %v", round, at, gens)
	}
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e)})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verify.Digest != live || sum.Removed == 0 {
		t.Errorf("the rebuild after the kills: %+v", sum)
	}
	e.open()
}

// CURRENT lost: one generation is adopted; several are refused with the
// fix, and nothing is deleted.
func TestLostCurrent(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	before := e.digest()
	e.ix.Close()
	current := filepath.Join(e.dir, layout.CurrentName)
	os.Remove(current)
	e.open() // one generation: adopted
	if got := e.digest(); got != before || e.ix.Generation() != "gen-000001" {
		t.Fatalf("adopted %s with digest %s", e.ix.Generation(), got)
	}
	e.rebuild(index.Options{})
	e.ix.Close()
	os.Remove(current)
	_, err := index.Open(context.Background(), e.dir, nil)
	if err == nil || !strings.Contains(err.Error(), "gen-000001, gen-000002 but no CURRENT") {
		t.Fatalf("open with two generations and no CURRENT: %v", err)
	}
	if gens, _ := layout.Generations(e.dir); len(gens) != 2 {
		t.Fatalf("generations left: %v", gens)
	}
	os.WriteFile(current, []byte("gen-000002\n"), 0o644)
	e.open()
}

// A live generation lost after a rollback: the rebuild keeps the newer,
// intact generation instead of removing it as unfinished.
func TestRebuildKeepsGenerationsWhenLiveIsLost(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	e.rebuild(index.Options{Contextualize: index.ContextOff})
	e.ix.Close()
	if _, _, err := index.Rollback(context.Background(), e.dir, &index.RollbackOptions{Blobs: blobsOf(e)}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(e.dir, "gen-000001")) // the live one
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e)})
	if err != nil {
		t.Fatal(err)
	}
	if gens, _ := layout.Generations(e.dir); sum.Generation != "gen-000003" || len(gens) != 2 || gens[0] != "gen-000002" {
		t.Errorf("rebuild made %s; generations %v", sum.Generation, gens)
	}
	e.open()
}

// Rollback refuses a generation that no longer matches the blob store (a
// document deleted or re-classified since), unless forced.
func TestRollbackRefusesStaleGeneration(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	e.rebuild(index.Options{Contextualize: index.ContextOff})
	if _, err := e.ix.Delete(context.Background(), "/docs/notes.txt"); err != nil {
		t.Fatal(err)
	}
	e.ix.Close()
	_, _, err := index.Rollback(context.Background(), e.dir, &index.RollbackOptions{Blobs: blobsOf(e)})
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("rollback over a deleted document: %v", err)
	}
	if gen, _, _ := layout.Current(e.dir); gen != "gen-000002" {
		t.Errorf("a refused rollback moved CURRENT to %s", gen)
	}
	if _, to, err := index.Rollback(context.Background(), e.dir, &index.RollbackOptions{Blobs: blobsOf(e), Force: true}); err != nil || to != "gen-000001" {
		t.Errorf("forced rollback: %s %v", to, err)
	}
	e.open()
}

// Live catch-up of a document deleted and re-ingested with the same bytes
// during the rebuild: the new generation takes the record's new time and
// verifies.
func TestLiveCatchUpSameBytes(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	fastAPI(e)
	once := false
	_, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix, Batch: 32,
		Progress: func(done, total int) {
			if once {
				return
			}
			once = true
			e.ix.Delete(context.Background(), "/docs/notes.txt")
			e.ingest("/docs/notes.txt", "Plain notes.\n\nSecond paragraph of notes.\n")
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.digest()
}

// Reembed refuses, before embedding anything, a live index whose blob
// store holds documents it has no rows for.
func TestReembedRefusesRecordsWithoutRows(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	ctx := context.Background()
	data := []byte("# Orphan\n\nA record without rows.\n")
	id, _ := e.ix.Blobs().Put(ctx, data)
	rec := &blobstore.Record{DocID: blobstore.DocID("/orphan.md"), Source: "/orphan.md", MediaType: "text/markdown", Title: "Orphan",
		Sensitivity: index.Public, BlobID: id, Language: "en", IngestedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := e.ix.Blobs().PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	e.ix.Close()
	_, err := rebuild.Reembed(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Index: index.Options{Embedder: embed.Spec{Model: "hash", Dim: 32}}})
	if err == nil || !strings.Contains(err.Error(), "run escurel rebuild instead") {
		t.Fatalf("reembed: %v", err)
	}
	e.open()
}

// A lost fts_blocks row: the re-index at open compacts away the block's
// old postings before posting it again, so nothing counts twice and the
// digest is the one before.
func TestReindexLostFTSRow(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	before := e.digest()
	path := e.ix.Path()
	e.ix.Close()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM fts_blocks WHERE block_id = (SELECT min(block_id) FROM fts_blocks)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e.open()
	v, err := e.ix.Verify(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() || v.DuplicatePostings != 0 || v.Digest != before {
		t.Errorf("verify after a lost fts_blocks row: %+v, digest before %s", v, before)
	}
}
