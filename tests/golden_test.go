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

// TestDefaultChunkerGolden pins the default chunker's output on the 155
// FastAPI pages: per page, a SHA-256 of its blocks (span, context, heading
// path, page, and the search hit's JSON keys). A chunker change that moves
// one byte of one block fails here, naming the page.
func TestDefaultChunkerGolden(t *testing.T) {
	pages := sharedData(t, "markdown/fastapi")
	e := newEnv(t, index.Options{Embedder: embed.None})
	if _, err := e.ix.IngestFiles(context.Background(), []string{pages}, index.IngestOptions{}); err != nil {
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
		rel, _ := filepath.Rel(pages, r.Source)
		got[rel] = fmt.Sprintf("%d %s", len(blocks), hex.EncodeToString(h.Sum(nil)))
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
