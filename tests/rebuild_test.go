package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/rebuild"
)

// rows returns every block of every document, by source, with their block
// ids, which a rebuild keeps.
func (e *env) rows() map[string][]index.Hit {
	e.t.Helper()
	ctx := context.Background()
	recs, err := e.ix.Blobs().Records(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]index.Hit{}
	for _, r := range recs {
		bs, err := e.ix.DocumentBlocks(ctx, r.DocID, index.Restricted)
		if err != nil {
			e.t.Fatal(err)
		}
		out[r.Source] = bs
	}
	return out
}

func (e *env) rebuild(opts index.Options) rebuild.Summary {
	e.t.Helper()
	if err := e.ix.Close(); err != nil {
		e.t.Fatal(err)
	}
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Index: opts})
	if err != nil {
		e.t.Fatal(err)
	}
	e.opts = index.Options{BlobURL: e.opts.BlobURL}
	e.open()
	return sum
}

// blobsOf opens the env's blob store on its own (the index's store closes
// with the index).
func blobsOf(e *env) *blobstore.Store {
	e.t.Helper()
	s, err := openStore(filepath.Join(e.dir, "blobs"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

func seed(e *env) {
	e.ingest("/docs/guide.md", guide)
	e.ingest("/docs/db.md", "# Database settings\n\n## PostgreSQL\n\nSet the connection timeout.\n\n## MySQL\n\nSet the timeout too.\n")
	e.ingest("/docs/notes.txt", "Plain notes.\n\nSecond paragraph of notes.\n")
}

func TestRebuildFlipsContextualize(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	before := e.rows()

	sum := e.rebuild(index.Options{Contextualize: index.ContextOff})
	if sum.Documents != 3 || sum.Blocks != 6 || e.ix.Manifest().Contextualize != index.ContextOff {
		t.Fatalf("rebuild off: %+v, manifest %+v", sum, e.ix.Manifest())
	}
	for src, bs := range e.rows() {
		for _, b := range bs {
			if b.Context != "" {
				t.Errorf("%s: context %q after rebuild with contextualize off", src, b.Context)
			}
		}
	}
	if hits := e.search("zanzibar", 10); len(hits) != 0 {
		t.Errorf("title-only token still retrieves %d blocks", len(hits))
	}

	e.rebuild(index.Options{Contextualize: index.ContextStructural})
	if diff := cmp.Diff(before, e.rows()); diff != "" {
		t.Errorf("off → structural does not reproduce the original rows (-before +after):\n%s", diff)
	}
	if n := e.checkVerbatim(); n != 6 {
		t.Errorf("%d verbatim blocks, want 6", n)
	}
}

// The index file is derived: delete it, and opening says what to run;
// rebuild from the blob store, and the same searches give the same hits
// and the digest is the one before.
func TestRebuildAfterLosingTheIndexFile(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(map[bool]string{false: "loose", true: "packs"}[packs], func(t *testing.T) {
			testRebuildAfterLosingTheIndexFile(t, newEnvLayout(t, index.Options{}, packs))
		})
	}
}

func testRebuildAfterLosingTheIndexFile(t *testing.T, e *env) {
	seed(e)
	queries := []string{"zanzibar", "connection timeout", "notes paragraph", "repository key"}
	want := map[string][]index.Hit{}
	for _, q := range queries {
		want[q] = e.search(q, 10)
	}
	digest := e.digest()
	path := e.ix.Path()
	e.ix.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Open(context.Background(), e.dir, &e.opts); err == nil || !strings.Contains(err.Error(), "run escurel rebuild") {
		t.Fatalf("open without the live file: %v", err)
	}
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e)})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Documents != 3 || sum.Generation != "gen-000002" {
		t.Errorf("summary %+v", sum)
	}
	e.open()
	if got := e.digest(); got != digest {
		t.Errorf("digest %s after rebuild, %s before", got, digest)
	}
	for _, q := range queries { // block ids included: they survive a rebuild
		if diff := cmp.Diff(want[q], e.search(q, 10)); diff != "" {
			t.Errorf("%q after rebuild (-want +got):\n%s", q, diff)
		}
	}
}

// A rebuild that cannot read a blob fails and leaves the live index serving.
func TestRebuildKeepsLiveIndexOnFailure(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	ids, err := e.ix.Blobs().BlobIDs(context.Background())
	if err != nil || len(ids) == 0 {
		t.Fatalf("blobs: %v, %v", ids, err)
	}
	corruptBlob(t, e.ix.Blobs(), filepath.Join(e.dir, "blobs"), ids[0])
	e.ix.Close()
	_, err = rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Index: index.Options{Contextualize: index.ContextOff}})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("rebuild over a corrupt blob: err = %v", err)
	}
	e.opts = index.Options{BlobURL: e.opts.BlobURL}
	e.open()
	if e.ix.Manifest().Contextualize != index.ContextStructural || len(e.search("zanzibar", 10)) != 3 {
		t.Error("the live index changed after a failed rebuild")
	}
	if gens, _ := layout.Generations(e.dir); len(gens) != 1 {
		t.Errorf("the failed rebuild left generations %v", gens)
	}
}

// A rebuild from a blob store that lacks the live documents (a mistyped
// URL) is refused unless dropping them is allowed; one from an empty store
// with no live index has nothing to do.
func TestRebuildRefusesMissingDocuments(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	e.ix.Close()
	wrong, err := openStore(filepath.Join(t.TempDir(), "typo"))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	_, err = rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: wrong})
	if !errors.Is(err, rebuild.ErrMissing) || !strings.Contains(err.Error(), "3 of the live index's 3 documents") {
		t.Fatalf("rebuild from an empty store: %v", err)
	}
	e.open()
	if len(e.search("zanzibar", 10)) != 3 {
		t.Fatal("the refused rebuild changed the live index")
	}
	e.ix.Close()
	// One record removed from the real store: refused, then allowed.
	store := blobsOf(e)
	if err := store.DeleteRecord(context.Background(), blobstore.DocID("/docs/notes.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: store}); !errors.Is(err, rebuild.ErrMissing) {
		t.Fatalf("rebuild missing one record: %v", err)
	}
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: store, AllowMissing: true})
	if err != nil || sum.Documents != 2 || sum.Dropped != 1 {
		t.Fatalf("rebuild allowing drops: %+v, %v", sum, err)
	}
	// Nothing anywhere: nothing to rebuild from.
	if _, err := rebuild.Run(context.Background(), rebuild.Options{Dir: t.TempDir(), Blobs: wrong}); err == nil || !strings.Contains(err.Error(), "nothing to rebuild") {
		t.Errorf("rebuild of nothing: %v", err)
	}
	e.open()
}

// A rebuild holds the directory lock: an open index (here or in another
// process) makes it fail at once, and it makes an open fail while it runs.
func TestRebuildHoldsTheLock(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	_, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e)})
	if !errors.Is(err, index.ErrLocked) {
		t.Fatalf("rebuild beside an open index: %v", err)
	}
	e.ix.Close()
	started := make(chan struct{})
	var openErr error
	_, err = rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Progress: func(done, total int) {
		select {
		case <-started:
		default:
			close(started)
			_, openErr = index.Open(context.Background(), e.dir, nil)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(openErr, index.ErrLocked) || !strings.Contains(openErr.Error(), "held by process") {
		t.Errorf("open during a rebuild: %v", openErr)
	}
	e.open()
}

// A title the ingest caller gives wins over extraction, survives a rebuild,
// and an identical re-ingest is unchanged.
func TestGivenTitle(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	in := index.Input{Source: "beir://scifact/42", Name: "42.txt", Title: "Given Title Wombat", Data: []byte("Plain abstract text.\n")}
	if _, err := e.ix.Ingest(ctx, in); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.ix.Ingest(ctx, in); r.Status != index.Unchanged {
		t.Errorf("identical re-ingest: %s", r.Status)
	}
	check := func(when string) {
		hits := e.search("wombat", 10)
		if len(hits) != 1 || hits[0].Context != "[Given Title Wombat]" || hits[0].Title != "Given Title Wombat" {
			t.Errorf("%s: %+v", when, hits)
		}
	}
	check("after ingest")
	e.rebuild(index.Options{})
	check("after rebuild")
}
