package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/testdocs"
)

// scannedPDF is 21 pages of which only page 3 has a text layer: the rest
// are scans, which escurel cannot read without OCR.
func scannedPDF() string {
	pages := make([]string, 21)
	pages[2] = "Lentil yields of the northern plots rose again this year."
	return string(testdocs.PDF(pages, false))
}

// TestPDFPagesWithoutText checks that pages without a text layer are
// counted per document and shown where an operator looks: the ingest
// result and summary, Stats, and a list of such documents (issue 15: a
// PDF with 20 of 21 pages scanned was "ok" with one block and no word).
func TestPDFPagesWithoutText(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	dir := writeFiles(t, map[string]string{
		"scanned.pdf": scannedPDF(),
		"whole.pdf":   string(testdocs.PDF([]string{"Page one has text.", "Page two has text."}, false)),
		"notes.md":    "# Notes\n\nNo pages here.\n",
	})
	var files []index.FileResult
	sum, err := e.ix.IngestFiles(ctx, []string{dir}, index.IngestOptions{Progress: func(f index.FileResult) { files = append(files, f) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || len(sum.Textless) != 1 || filepath.Base(sum.Textless[0].Path) != "scanned.pdf" {
		t.Errorf("%d files, listed with pages without text %+v; want 3, scanned.pdf", len(files), sum.Textless)
	}
	for _, f := range files {
		want := 0
		if filepath.Base(f.Path) == "scanned.pdf" {
			want = 20
		}
		if f.Err != nil || f.TextlessPages != want {
			t.Errorf("%s: err %v, %d pages without text, want %d", filepath.Base(f.Path), f.Err, f.TextlessPages, want)
		}
	}
	if f := sum.Formats["pdf"]; f == nil || f.Pages != 23 || f.TextlessPages != 20 {
		t.Errorf("pdf summary %+v, want 23 pages, 20 without text", f)
	}
	// Unchanged on a second ingest: the count comes from the index.
	sum, err = e.ix.IngestFiles(ctx, []string{dir}, index.IngestOptions{})
	if err != nil || sum.Unchanged != 3 {
		t.Fatalf("second ingest: %v, %d unchanged", err, sum.Unchanged)
	}
	if f := sum.Formats["pdf"]; f == nil || f.TextlessPages != 20 {
		t.Errorf("pdf summary of unchanged files %+v, want 20 pages without text", f)
	}
	st, err := e.ix.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TextlessPages != 20 || st.TextlessDocuments != 1 {
		t.Errorf("stats: %d pages without text in %d documents, want 20 in 1", st.TextlessPages, st.TextlessDocuments)
	}
	list, err := e.ix.TextlessDocuments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !strings.HasSuffix(list[0].Source, "scanned.pdf") || list[0].Pages != 21 || list[0].TextlessPages != 20 {
		t.Errorf("documents with pages without text: %+v, want scanned.pdf, 20 of 21", list)
	}
}

// TestPDFTitlePageBlock checks that a title page, whose only text is its
// heading, has a block that cites it (issue 15).
func TestPDFTitlePageBlock(t *testing.T) {
	e := newEnv(t, index.Options{})
	body := testdocs.Lines(
		"The body of the report starts here and runs on for a full line,",
		"and it goes on in the same type for another line of the page.")
	pdf := testdocs.LayoutPDF([]testdocs.Page{
		{Lines: []testdocs.Line{{Text: "Quinoa Harvest Report", Size: 24}}},
		{Lines: append([]testdocs.Line{{Text: "Introduction", Size: 18}}, body...)},
	})
	res := e.ingest("/reports/title.pdf", string(pdf))
	if res.TextlessPages != 0 {
		t.Errorf("%d pages without text, want 0", res.TextlessPages)
	}
	hits := e.search("quinoa harvest", 5)
	if len(hits) == 0 || hits[0].Page != 1 || !strings.Contains(hits[0].Body, "Quinoa Harvest Report") {
		t.Fatalf("hits %+v, want page 1's block first", hits)
	}
	e.checkVerbatim()
}
