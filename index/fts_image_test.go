package index

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/embed"
)

// A writer's Close saves the full-text index's image, and the next Open
// reads it instead of the tables; a reader's Close saves none. Searches
// give the same hits either way.
func TestCloseSavesFTSImage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := &Options{BlobURL: "mem://", Embedder: embed.None}
	ix := churnIndexRounds(t, ctx, dir, 300, 1)
	search := func(ix *Index) []Ranked {
		t.Helper()
		hits, err := ix.Rank(ctx, "w12_0 w400_1 w2500_2", &SearchOptions{K: 20, Mode: "bm25"})
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	reopen := func() (*Index, bool) {
		t.Helper()
		ix, err := Open(ctx, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.unref()
		return ix, s.fts.ImageCurrent()
	}
	want := search(ix)
	if len(want) == 0 {
		t.Fatal("no hits")
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, current := reopen()
	if !current {
		t.Fatal("Open did not read the image the writer's Close saved")
	}
	if diff := cmp.Diff(want, search(ix)); diff != "" {
		t.Fatalf("hits from the image differ:\n%s", diff)
	}
	if _, err := ix.Delete(ctx, "/d00012.md"); err != nil {
		t.Fatal(err)
	}
	want = search(ix)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, current = reopen()
	if !current {
		t.Fatal("Open after a delete did not read the image its Close saved")
	}
	if diff := cmp.Diff(want, search(ix)); diff != "" {
		t.Fatalf("hits from the image after a delete differ:\n%s", diff)
	}
	// A reader's Close leaves the image as it is.
	var before, after string
	image := `SELECT string_agg(md5(data), ',' ORDER BY part) FROM fts_image`
	s, _ := ix.acquire()
	s.db.QueryRowContext(ctx, image).Scan(&before)
	path := s.path
	s.unref()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, current = reopen()
	defer ix.Close()
	s, _ = ix.acquire()
	defer s.unref()
	s.db.QueryRowContext(ctx, image).Scan(&after)
	if !current || before == "" || before != after || s.path != path {
		t.Fatalf("a reader's Close changed the image (current %v, %q → %q, %s → %s)", current, before, after, path, s.path)
	}
}

// A purge's copy of the file holds no image with the purged document's
// terms: the purge's commit deletes the image, which a writer's Close had
// saved with every term of the dictionary.
func TestPurgeLeavesNoImageOfErasedTerms(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := &Options{BlobURL: "mem://", Embedder: embed.None}
	ix, err := Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	secret := "zqxsecretterm"
	mustIngest(t, ix, Input{Source: "/keep.md", Data: []byte("# Keep\n\nordinary words here\n")},
		Input{Source: "/gone.md", Data: []byte("# Gone\n\nthe " + secret + " word\n")})
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	image := func(ix *Index) []byte {
		t.Helper()
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.unref()
		var all []byte
		rows, err := s.db.QueryContext(ctx, `SELECT data FROM fts_image ORDER BY part`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			rows.Scan(&b)
			all = append(all, b...)
		}
		return all
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(image(ix), []byte(secret)) {
		t.Fatal("the writer's Close saved no image with the term: the test proves nothing")
	}
	if _, err := ix.Purge(ctx, "/gone.md"); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(image(ix), []byte(secret)) {
		t.Fatal("the purged generation's image holds the purged document's term")
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if bytes.Contains(image(ix), []byte(secret)) {
		t.Fatal("after the purge and a Close, the image holds the purged document's term")
	}
}
