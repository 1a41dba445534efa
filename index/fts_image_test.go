package index

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/embed"
)

// imageCurrent reports whether ix's live state's full-text index is
// described by its image file (loaded from it, or saved to it).
func imageCurrent(t *testing.T, ix *Index) bool {
	t.Helper()
	s, err := ix.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.unref()
	return s.fts.ImageCurrent()
}

// bm25Hits is how many of its top 10 hits ix ranks for q in bm25 mode.
func bm25Hits(t *testing.T, ix *Index, q string) int {
	t.Helper()
	hits, err := ix.Rank(context.Background(), q, &SearchOptions{K: 10, Mode: "bm25"})
	if err != nil {
		t.Fatal(err)
	}
	return len(hits)
}

// A writer's Close saves the full-text index's image, and the next Open
// reads it instead of the tables, with the writes its Close left in the
// write-ahead log replayed; a reader's Close leaves a current image as it
// is. Searches give the same hits either way.
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
		return ix, imageCurrent(t, ix)
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
	s, _ := ix.acquire()
	path := s.path
	s.unref()
	before, err := os.ReadFile(imagePath(path))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(imagePath(path))
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, current = reopen()
	defer ix.Close()
	s, _ = ix.acquire()
	defer s.unref()
	after, err := os.ReadFile(imagePath(s.path))
	if err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(imagePath(s.path))
	if !current || !bytes.Equal(before, after) || !fi.ModTime().Equal(fi2.ModTime()) || s.path != path {
		t.Fatalf("a reader's Close changed the image (current %v, %d → %d bytes, %s → %s)", current, len(before), len(after), path, s.path)
	}
}

// A purge leaves no image with the purged document's terms: its copy
// of the file gets none (the purge's commit made the image stale), and the
// generation whose image, saved by a writer's Close, held every term of
// the dictionary is removed with its file.
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
	// The images under dir holding the term.
	holding := func() []string {
		t.Helper()
		var out []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".fts-image") {
				return err
			}
			b, err := os.ReadFile(p)
			if bytes.Contains(b, []byte(secret)) {
				out = append(out, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if len(holding()) == 0 {
		t.Fatal("the writer's Close saved no image with the term: the test proves nothing")
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Purge(ctx, "/gone.md"); err != nil {
		t.Fatal(err)
	}
	if h := holding(); len(h) > 0 {
		t.Fatalf("after the purge, images hold the purged document's term: %q", h)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if h := holding(); len(h) > 0 {
		t.Fatalf("after the purge and a Close, images hold the purged document's term: %q", h)
	}
}

// A Close after a small write leaves DuckDB's write-ahead log for the
// next open to replay, instead of a checkpoint that rewrites the last row
// group of every keyed table (closeCheckpointBytes); the next open sees
// every write, reads the image, and a reader's Close leaves the log too.
// A log of closeCheckpointBytes or more is folded into the file.
func TestCloseLeavesSmallLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")), Embedder: embed.None}
	open := func() (*Index, string) {
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
		return ix, s.path
	}
	ix, path := open()
	mustIngest(t, ix, Input{Source: "/a.md", Data: []byte("# A\n\nplatypus ledger\n")})
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	wal := fileSize(path + ".wal")
	if wal == 0 {
		t.Fatal("Close after a small write folded its log")
	}
	ix, _ = open()
	if n := bm25Hits(t, ix, "platypus"); n != 1 {
		t.Fatalf("after the open replayed the log: %d hits, want 1", n)
	}
	if !imageCurrent(t, ix) {
		t.Fatal("the open did not read the image saved beside the log")
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(path + ".wal"); got != wal {
		t.Fatalf("a reader's Close changed the log: %d bytes, then %d", wal, got)
	}
	// A second writer appends to the log; from closeCheckpointBytes it is
	// folded.
	ix, _ = open()
	mustIngest(t, ix, Input{Source: "/b.md", Data: []byte("# B\n\nplatypus wombat\n")})
	defer func(n int64) { closeCheckpointBytes = n }(closeCheckpointBytes)
	closeCheckpointBytes = fileSize(path + ".wal")
	if closeCheckpointBytes <= wal {
		t.Fatalf("the second write did not append to the log (%d bytes, then %d)", wal, closeCheckpointBytes)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(path + ".wal"); got != 0 {
		t.Fatalf("a log of closeCheckpointBytes was left: %d bytes", got)
	}
	ix, _ = open()
	defer ix.Close()
	if n := bm25Hits(t, ix, "platypus"); n != 2 {
		t.Fatalf("after the log was folded: %d hits, want 2", n)
	}
}
