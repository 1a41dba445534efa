package tests

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rebuild"
)

// Everything an index and its file:// blob store create is private to the
// owner, whatever the umask lets through: files 0600, directories 0700
// (issue 19, item 7: another local user read a restricted document's raw
// bytes). The WAL and DuckDB's other files lie in a generation directory
// that only the owner may enter.
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the common default, which let others read
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "idx")
	store := filepath.Join(t.TempDir(), "store", "blobs") // outside the index: its own root
	ix, err := index.Open(ctx, dir, &index.Options{BlobURL: (&url.URL{Scheme: "file", Path: store}).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i, text := range []string{"# Secret\n\nmerger plans\n", "# Other\n\ntext\n"} {
		sens := index.Public
		if i == 0 {
			sens = index.Restricted
		}
		if _, err := ix.Ingest(ctx, index.Input{Source: filepath.Join("/docs", string(rune('a'+i))+".md"), Data: []byte(text), Sensitivity: sens}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.IngestFiles(ctx, []string{writeDocs(t)}, index.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Run(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Purge(ctx, "/docs/a.md"); err != nil { // a generation written by COPY FROM DATABASE
		t.Fatal(err)
	}
	n := 0
	for _, root := range []string{dir, filepath.Dir(store)} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == filepath.Dir(store) {
				return nil // the test's own directory
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			} else if d.Name() != "index.duckdb" && strings.HasPrefix(filepath.Base(filepath.Dir(p)), "gen-") {
				// DuckDB's own files (the WAL) follow the umask, which a
				// library leaves alone: the 0700 generation directory,
				// checked too, keeps them from others.
				want = 0o644
			}
			if fi.Mode().Perm()&^want != 0 {
				t.Errorf("%s: mode %v, want at most %v", p, fi.Mode().Perm(), want)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Fatalf("only %d files and directories checked", n)
	}
}

// writeDocs writes two Markdown files into a new directory and returns it.
func writeDocs(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	for name, text := range map[string]string{"one.md": "# One\n\nfirst\n", "two.md": "# Two\n\nsecond\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// A live rebuild while the same index ingests a directory: listing the
// record store meets the batches' temporary files being renamed, and once
// failed every time (issue 19, item 2). Every rebuild succeeds, and the
// index ends complete and verified.
func TestLiveRebuildDuringBulkIngest(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	const n = 1500
	for i := range n {
		text := fmt.Sprintf("# Note %d\n\nplatypus %d fact number %d\n", i, i, i*7)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("n%04d.md", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, index.Options{})
	e.ingest("/seed.md", "# Seed\n\nfirst\n")
	done := make(chan error, 1)
	go func() {
		_, err := e.ix.IngestFiles(ctx, []string{src}, index.IngestOptions{})
		done <- err
	}()
	rebuilds := 0
	for finished := false; !finished; {
		if _, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix}); err != nil {
			t.Fatalf("rebuild %d during the ingest: %v", rebuilds+1, err)
		}
		rebuilds++
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
	}
	v, err := e.ix.Verify(ctx, nil)
	if err != nil || !v.OK() || v.Documents != n+1 {
		t.Fatalf("after %d rebuilds: %+v, %v; want %d documents, OK", rebuilds, v, err, n+1)
	}
	t.Logf("%d live rebuilds during the ingest of %d files", rebuilds, n)
}
