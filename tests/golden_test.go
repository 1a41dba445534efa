package tests

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite tests/testdata/*.golden from the current code")

// chunkerDigests ingests the pages under dir into a fresh index and
// returns, per page (its path relative to dir), the number of its blocks
// and a SHA-256 of them.
func chunkerDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	e := newEnv(t, index.Options{Embedder: embed.None})
	if _, err := e.ix.IngestFiles(context.Background(), []string{dir}, index.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	// Sources are absolute paths with symbolic links resolved: so must
	// the directory they are named relative to be.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if real, err = filepath.Abs(real); err != nil {
		t.Fatal(err)
	}
	recs, err := e.ix.Blobs().Records(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		blocks, err := e.ix.DocumentBlocks(context.Background(), r.DocID, index.Restricted)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		for _, b := range blocks {
			fmt.Fprintf(h, "%d %d %q %q %d %q\n", b.ByteStart, b.ByteEnd, b.Context, b.HeadingPath, b.Page, b.Body)
		}
		rel, err := filepath.Rel(real, r.Source)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("source %s is not under %s (%v)", r.Source, real, err)
		}
		got[rel] = fmt.Sprintf("%d %s", len(blocks), hex.EncodeToString(h.Sum(nil)))
	}
	return got
}

// TestDefaultChunkerGolden pins the default chunker's output on the 155
// FastAPI pages: per page, a SHA-256 of its blocks (span, context, heading
// path, page, and the search hit's JSON keys). A chunker change that moves
// one byte of one block fails here, naming the page.
func TestDefaultChunkerGolden(t *testing.T) {
	pages := sharedData(t, "markdown/fastapi")
	got := chunkerDigests(t, pages)
	// The same pages named through a symbolic link (a ../shared that is
	// one) give the same digests under the same names.
	link := filepath.Join(t.TempDir(), "fastapi")
	if err := os.Symlink(pages, link); err != nil {
		t.Fatal(err)
	}
	viaLink := chunkerDigests(t, link)
	if len(viaLink) != len(got) {
		t.Errorf("through a symbolic link: %d pages, directly %d", len(viaLink), len(got))
	}
	for name, d := range got {
		if viaLink[name] != d {
			t.Errorf("through a symbolic link, %s: %q, directly %q", name, viaLink[name], d)
			break
		}
	}
	path := filepath.Join("testdata", "default_chunker_fastapi.golden")
	if *updateGolden {
		var lines []string
		for k, v := range got {
			lines = append(lines, k+" "+v)
		}
		sort.Strings(lines)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), " ")
		want[name] = rest
	}
	if len(want) != len(got) {
		t.Errorf("%d pages, the golden file has %d", len(got), len(want))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: blocks %q, golden %q", name, got[name], w)
		}
	}
}
