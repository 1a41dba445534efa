// Package unlinked tests the index as a library that imports none of the
// provider packages the CLI ships (embed/onnx, index/extract/pdf): what a
// PDF or an onnx spec does there. It must never import them.
package unlinked

import (
	"context"
	"errors"
	"strings"
	"testing"

	_ "gocloud.dev/blob/fileblob"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/onnxtest"
	"github.com/escurel/escurel/internal/testdocs"
)

func open(t *testing.T, opts index.Options) (*index.Index, error) {
	t.Helper()
	ix, err := index.Open(context.Background(), t.TempDir(), &opts)
	if err == nil {
		t.Cleanup(func() { ix.Close() })
	}
	return ix, err
}

// A PDF is detected as a PDF and refused with the import to add: nothing
// is stored, and it never becomes a text document. Markdown still ingests,
// and the manifest lists the extractors this program has.
func TestPDFWithoutExtractor(t *testing.T) {
	ix, err := open(t, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pdf := testdocs.PDF([]string{"Numbats eat termites."}, false)
	for _, name := range []string{"report.pdf", "report.txt"} {
		res, err := ix.Ingest(ctx, index.Input{Source: "/docs/" + name, Data: pdf})
		var de *index.DocumentError
		if !errors.As(err, &de) || !errors.Is(err, extract.ErrNotLinked) ||
			!strings.Contains(err.Error(), `import _ "github.com/escurel/escurel/index/extract/pdf"`) {
			t.Errorf("%s: err = %v; want a DocumentError wrapping extract.ErrNotLinked naming the import", name, err)
		}
		if res.Status != "" || res.Blocks != 0 {
			t.Errorf("%s: stored as %+v", name, res)
		}
	}
	if _, err := ix.Ingest(ctx, index.Input{Source: "/docs/a.md", Data: []byte("# Numbats\n\nThey eat termites.\n")}); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search(ctx, "termites", &index.SearchOptions{K: 5})
	if err != nil || len(hits) != 1 || hits[0].Source != "/docs/a.md" {
		t.Errorf("search: %v, %v; want the Markdown page only", hits, err)
	}
	if got := ix.Manifest().Extractors; got != "docx/2 html/2 markdown/2 text/2" {
		t.Errorf("manifest extractors %q", got)
	}
}

// An onnx spec parses, but an index cannot be created with it: the error
// names the import that links the provider.
func TestONNXWithoutProvider(t *testing.T) {
	dir := t.TempDir()
	if err := onnxtest.Write(dir); err != nil {
		t.Fatal(err)
	}
	spec, err := embed.ParseSpec("onnx:test-model?path=" + dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = open(t, index.Options{Embedder: spec})
	if !errors.Is(err, embed.ErrNotLinked) || !strings.Contains(err.Error(), `import _ "github.com/escurel/escurel/embed/onnx"`) {
		t.Errorf("open with %s: %v; want embed.ErrNotLinked naming the import", spec, err)
	}
}
