package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/testdocs"
	"github.com/escurel/escurel/rebuild"
)

const htmlPage = `<!doctype html>
<html lang="en"><head><title>Numbat Field Notes</title>
<style>p { color: red }</style><script>var echidna = "dingo";</script></head>
<body><nav><a href="/">Wallaroo</a> · <a href="/about">Bilby</a></nav>
<main><h1>Numbats</h1>
<p>The numbat eats <em>termites</em>, up to twenty thousand a day.</p>
<h2>Habitat</h2>
<p>Eucalypt woodland in the south-west of Western Australia.</p>
<div hidden>lorikeet</div>
</main><footer>Copyright kookaburra society</footer></body></html>
`

// mixedCorpus writes the built documents of the format tests: an HTML page,
// and one file for each kind of bad input that is not in the shared data.
func mixedCorpus(t *testing.T, maxFileBytes int) string {
	return writeFiles(t, map[string]string{
		"page.html":   htmlPage,
		"notzip.docx": "this is not a zip archive",
		"bomb.docx":   string(testdocs.ZipBomb(4 << 20)),
		"locked.pdf":  string(testdocs.PDF([]string{"secret numbat"}, true)),
		"scan.pdf":    string(testdocs.PDF([]string{"", ""}, false)),
		"huge.md":     strings.Repeat("numbat ", maxFileBytes/7+1),
	})
}

// TestFormats ingests every shared PDF and DOCX (real, damaged, truncated)
// with built HTML and bad files, and checks what lands, what fails and
// why, the verbatim spans, page contexts, the extraction quality against
// the reference Markdown, and that a rebuild reproduces it all.
func TestFormats(t *testing.T) {
	docs := sharedData(t, "documents")
	const maxFile = 2 << 20
	built := mixedCorpus(t, maxFile)
	limits := extract.Limits{MaxDecompressedBytes: 1 << 20}
	e := newEnv(t, index.Options{Extract: limits})
	ctx := context.Background()
	sum, err := e.ix.IngestFiles(ctx, []string{filepath.Join(docs, "pdf"), filepath.Join(docs, "docx"), filepath.Join(docs, "corrupt"), built},
		index.IngestOptions{MaxFileBytes: maxFile})
	if err != nil {
		t.Fatal(err)
	}
	wantFail := map[string]string{ // file → what the reason says
		"derived_truncated_4KiB_employee_handbook.pdf":                    "corrupt document",
		"derived_truncated_60pct_Northwind_Standard_Benefits_Details.pdf": "corrupt document",
		"notzip.docx": "not a zip",
		"bomb.docx":   "document too large",
		"locked.pdf":  "encrypted document",
		"scan.pdf":    "no text layer on any of 2 pages",
		"huge.md":     "over the size cap",
	}
	if sum.Added != 14 || len(sum.Failed) != len(wantFail) {
		t.Errorf("added %d, failed %d; want 14 and %d", sum.Added, len(sum.Failed), len(wantFail))
	}
	for _, f := range sum.Failed {
		name := filepath.Base(f.Path)
		if want, ok := wantFail[name]; !ok || !strings.Contains(f.Err.Error(), want) || !strings.Contains(f.Err.Error(), name) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", name, f.Err, want)
		}
		if f.Status != index.Failed {
			t.Errorf("%s: status %q, want failed (kept)", name, f.Status)
		}
	}
	for name, want := range map[string]index.FormatSummary{
		"pdf":      {Documents: 13, Pages: 35, Failed: 4},
		"docx":     {Documents: 6, Failed: 2},
		"html":     {Documents: 1},
		"markdown": {Documents: 1, Failed: 1},
	} {
		got := sum.Formats[name]
		if got == nil || got.Documents != want.Documents || got.Pages != want.Pages || got.Failed != want.Failed || (got.Blocks == 0) != (want.Documents == want.Failed) {
			t.Errorf("format %s: %+v, want %+v", name, got, want)
		}
	}

	// Failed documents: listed with their reason; the blob kept, except
	// for the file over the cap, which was never read.
	failed, err := e.ix.Failed(ctx, index.Restricted)
	if err != nil || len(failed) != len(wantFail) {
		t.Fatalf("Failed: %d (%v), want %d", len(failed), err, len(wantFail))
	}
	for _, f := range failed {
		rec := mustRecord(t, e, f.DocID)
		name := filepath.Base(f.Source)
		if !strings.Contains(f.Reason, wantFail[name]) {
			t.Errorf("%s: reason %q", name, f.Reason)
		}
		if name == "huge.md" {
			if rec.BlobID != "" || rec.Error == "" || f.Extractor != "" {
				t.Errorf("huge.md: record %+v, extractor %q; want no blob and the reason", rec, f.Extractor)
			}
			continue
		}
		if _, err := e.ix.Blobs().Get(ctx, rec.BlobID); err != nil {
			t.Errorf("%s: blob not kept: %v", name, err)
		}
	}
	st, err := e.ix.Stats(ctx)
	if err != nil || st.Documents != 21 || st.Failed != 7 || st.Extractors["pdf/2"] != 13 {
		t.Errorf("stats %+v, %v", st, err)
	}

	n := e.checkVerbatim()
	t.Logf("%d documents, %d blocks, all verbatim spans of their text", st.Documents, n)

	// Every block of a PDF has a page, and its context ends with it.
	blocksOf := map[string][]index.Hit{} // by file name
	for _, rec := range mustRecords(t, e) {
		hits, err := e.ix.DocumentBlocks(ctx, rec.DocID, index.Restricted)
		if err != nil {
			t.Fatal(err)
		}
		blocksOf[filepath.Base(rec.Source)] = hits
		if rec.MediaType != extract.MediaPDF {
			continue
		}
		for _, h := range hits {
			if h.Page < 1 || !strings.HasSuffix(h.Context, fmt.Sprintf(" › p.%d]", h.Page)) {
				t.Fatalf("%s block %s: page %d, context %q", rec.Source, h.BlockID, h.Page, h.Context)
			}
		}
	}

	// Quality against the reference converter's Markdown: every heading it
	// lists is in some block's heading path (DOCX, and multi_page.pdf,
	// whose headings come from its type; the other PDFs have no outline and
	// a reference whose headings differ from their text), and ≥ 95% of its
	// words are in the extracted text.
	for _, tc := range []struct {
		file, expected string
		headings       bool
	}{
		{"amt_handbook_sample.pdf", "amt_handbook_sample.md", false},
		{"multi_page.pdf", "multi_page.md", false},
		{"normal_4pages.pdf", "normal_4pages.md", false},
		{"redp5110_sampled.pdf", "redp5110_sampled.md", false},
		{"lorem_ipsum.docx", "lorem_ipsum.docx.md", true},
		{"unit_test_headers.docx", "unit_test_headers.docx.md", true},
		{"unit_test_headers_numbered.docx", "unit_test_headers_numbered.docx.md", true},
		{"word_sample.docx", "word_sample.docx.md", true},
	} {
		want, err := os.ReadFile(filepath.Join(docs, "expected", tc.expected))
		if err != nil {
			t.Fatal(err)
		}
		hits := blocksOf[tc.file]
		if len(hits) == 0 {
			t.Errorf("%s: no blocks", tc.file)
			continue
		}
		text, err := e.ix.DocumentText(ctx, hits[0].DocID, index.Restricted)
		if err != nil {
			t.Fatal(err)
		}
		cov := wordCoverage(string(want), text)
		found, total, missing := headingCoverage(string(want), hits)
		t.Logf("%-34s %3d blocks, %5.1f%% of the reference words, headings %d/%d", tc.file, len(hits), 100*cov, found, total)
		if cov < 0.95 {
			t.Errorf("%s: %.1f%% of the reference words, want ≥ 95%%", tc.file, 100*cov)
		}
		if (tc.headings || tc.file == "multi_page.pdf") && found != total {
			t.Errorf("%s: headings missing from every heading path: %q", tc.file, missing)
		}
	}
	outline := []string{"PART I - DEFINITIONS", "1. Interpretation", "2. Construction of Terms", "PART II - OBLIGATIONS",
		"3. Payment Terms", "3.1 Payment Schedule", "4. Termination", "PART III - MISCELLANEOUS"}
	md := "# " + strings.Join(outline, "\n# ")
	if found, total, missing := headingCoverage(md, blocksOf["bookmark_sample.pdf"]); found != total {
		t.Errorf("bookmark_sample.pdf: outline entries missing from heading paths: %q", missing)
	}

	// HTML: title and headings in the context, navigation, scripts,
	// hidden text and the footer left out.
	hits := e.search("numbat termites", 3)
	if len(hits) == 0 || hits[0].Context != "[Numbat Field Notes › Numbats]" {
		t.Errorf("HTML hit %+v", hits)
	}
	for _, q := range []string{"echidna dingo", "lorikeet", "kookaburra", "wallaroo bilby"} {
		for _, h := range e.search(q, 5) {
			if strings.HasSuffix(h.Source, "page.html") {
				t.Errorf("%q found in the HTML page: %q", q, h.Body)
			}
		}
	}

	// Rebuild: the same extraction code, the same rows.
	ingested := e.digest()
	rb := e.rebuild(index.Options{Extract: limits})
	if rb.Verify.Digest != ingested || rb.Failed != len(wantFail) {
		t.Errorf("rebuild: digest %s, %d failed; ingest: %s, %d failed", rb.Verify.Digest, rb.Failed, ingested, len(wantFail))
	}
}

func mustRecords(t *testing.T, e *env) []*blobstore.Record {
	t.Helper()
	recs, err := e.ix.Blobs().Records(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// wordsIn returns the case-folded words (runs of letters and digits) of s.
func wordsIn(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}

// wordCoverage is the share of ref's words, with repeats, that occur in
// text.
func wordCoverage(ref, text string) float64 {
	have := map[string]bool{}
	for _, w := range wordsIn(text) {
		have[w] = true
	}
	ws := wordsIn(ref)
	found := 0
	for _, w := range ws {
		if have[w] {
			found++
		}
	}
	return float64(found) / float64(max(len(ws), 1))
}

var mdHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// headingCoverage counts the Markdown headings of ref found, case-folded
// with white space collapsed, in the heading path of some block, or as
// the title that heads every block's context (a DOCX Title paragraph).
func headingCoverage(ref string, blocks []index.Hit) (found, total int, missing []string) {
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	have := map[string]bool{}
	for _, b := range blocks {
		have[norm(b.Title)] = true
		for _, h := range b.HeadingPath {
			have[norm(h)] = true
		}
	}
	for _, m := range mdHeading.FindAllStringSubmatch(ref, -1) {
		total++
		if have[norm(m[1])] {
			found++
		} else {
			missing = append(missing, m[1])
		}
	}
	return found, total, missing
}

// A rebuild tries failed documents again: PDFs that timed out at ingest
// extract under the rebuild's limits.
func TestRebuildRetriesFailed(t *testing.T) {
	docs := sharedData(t, "documents/pdf")
	e := newEnv(t, index.Options{Extract: extract.Limits{Timeout: time.Nanosecond}})
	ctx := context.Background()
	sum, err := e.ix.IngestFiles(ctx, []string{docs}, index.IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failed) != 5 || sum.Added != 0 {
		t.Fatalf("ingest under a 1 ns limit: added %d, failed %d, want 0 and 5", sum.Added, len(sum.Failed))
	}
	for _, f := range sum.Failed {
		if !errors.Is(f.Err, extract.ErrTimeout) {
			t.Errorf("%s: %v, want ErrTimeout", f.Path, f.Err)
		}
	}
	if hits := e.search("word processor", 5); len(hits) != 0 {
		t.Errorf("failed documents searchable: %d hits", len(hits))
	}
	rb := e.rebuild(index.Options{})
	if rb.Failed != 0 || rb.Documents != 5 || rb.Blocks == 0 {
		t.Fatalf("rebuild: %d failed, %d documents, %d blocks", rb.Failed, rb.Documents, rb.Blocks)
	}
	if hits := e.search("word processor", 5); len(hits) == 0 || !strings.HasSuffix(hits[0].Source, "multi_page.pdf") {
		t.Errorf("after the rebuild: %+v", hits)
	}
	if failed, err := e.ix.Failed(ctx, index.Restricted); err != nil || len(failed) != 0 {
		t.Errorf("Failed after the rebuild: %v, %v", failed, err)
	}
	e.digest() // verifies: the records' titles were the file names, the rows now have the PDFs' own
}

// A new version of a served document that fails extraction is refused:
// the served version stays, and nothing of the bad bytes is stored.
func TestFailedVersionKeepsServedOne(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	good := testdocs.PDF([]string{"Quolls hunt at night."}, false)
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/quoll.pdf", Data: good}); err != nil {
		t.Fatal(err)
	}
	res, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/quoll.pdf", Data: []byte("%PDF-1.4 truncated")})
	if !errors.Is(err, extract.ErrCorrupt) || !strings.Contains(err.Error(), "stays indexed") || res.Status != "" {
		t.Fatalf("bad new version: %+v, %v", res, err)
	}
	if hits := e.search("quolls night", 3); len(hits) != 1 || hits[0].Body != "Quolls hunt at night." {
		t.Errorf("served version lost: %+v", hits)
	}
	rec := mustRecord(t, e, res.DocID)
	if rec.BlobID != blobstore.BlobID(good) {
		t.Errorf("record points at %s, want the good version", rec.BlobID)
	}
	if failed, _ := e.ix.Failed(ctx, index.Restricted); len(failed) != 0 {
		t.Errorf("failed %v", failed)
	}
	e.digest()
}

// A rebuild under which served documents would fail is refused, with or
// without a Live index, and the live generation keeps serving them.
func TestRebuildRefusesNewFailures(t *testing.T) {
	docs := sharedData(t, "documents/pdf")
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	if _, err := e.ix.IngestFiles(ctx, []string{docs}, index.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	before := e.digest()
	tight := index.Options{Extract: extract.Limits{Timeout: time.Nanosecond}}
	// Live: the open index serves during the attempt.
	_, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Index: tight, Live: e.ix})
	if !errors.Is(err, rebuild.ErrNewFailures) || !strings.Contains(err.Error(), "5 documents the live index serves") {
		t.Fatalf("Live rebuild under 1 ns: %v, want ErrNewFailures", err)
	}
	if got := e.digest(); got != before {
		t.Errorf("live digest changed: %s, was %s", got, before)
	}
	// Without Live, from the directory.
	if err := e.ix.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Index: tight})
	if !errors.Is(err, rebuild.ErrNewFailures) {
		t.Fatalf("rebuild under 1 ns: %v, want ErrNewFailures", err)
	}
	e.open()
	if got := e.digest(); got != before || len(e.search("word processor", 3)) == 0 {
		t.Errorf("after the refused rebuilds: digest %s (was %s)", got, before)
	}
	if e.ix.Close() != nil {
		t.Fatal("close")
	}
	sum, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), Index: tight, AllowFailures: true})
	if err != nil || sum.Failed != 5 {
		t.Fatalf("AllowFailures: %+v, %v", sum, err)
	}
	e.open()
}

// Ingesting the same files again extracts nothing: the index already holds
// these bytes, read by the same extractor. The per-format totals still
// count their pages and blocks.
func TestReingestSkipsExtraction(t *testing.T) {
	docs := sharedData(t, "documents")
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	paths := []string{filepath.Join(docs, "pdf"), filepath.Join(docs, "docx")}
	first, err := e.ix.IngestFiles(ctx, paths, index.IngestOptions{})
	if err != nil || first.Added != 9 {
		t.Fatalf("first ingest: %+v, %v", first, err)
	}
	second, err := e.ix.IngestFiles(ctx, paths, index.IngestOptions{})
	if err != nil || second.Unchanged != 9 || second.Added+second.Replaced != 0 {
		t.Fatalf("second ingest: %+v, %v", second, err)
	}
	for _, name := range []string{"pdf", "docx"} {
		a, b := first.Formats[name], second.Formats[name]
		if b.Extract != 0 || a.Pages != b.Pages || a.Blocks != b.Blocks || a.Documents != b.Documents {
			t.Errorf("%s: first %+v, second %+v; want no extraction and equal counts", name, a, b)
		}
	}
	// Bytes once read under a media type override are detected again
	// without it: the same bytes, another type.
	md := []byte("# Quoll\n\nQuolls hunt at night.\n")
	if res, err := e.ix.Ingest(ctx, index.Input{Source: "/notes/quoll.md", Data: md, MediaType: extract.MediaText}); err != nil || res.Status != index.Added {
		t.Fatalf("as text: %+v, %v", res, err)
	}
	if res, err := e.ix.Ingest(ctx, index.Input{Source: "/notes/quoll.md", Data: md}); err != nil || res.Status != index.Replaced || res.MediaType != extract.MediaMarkdown {
		t.Errorf("detected again: %+v, %v; want replaced as Markdown", res, err)
	}
	// A new sensitivity is a change: extracted and rewritten.
	third, err := e.ix.IngestFiles(ctx, []string{filepath.Join(docs, "pdf", "multi_page.pdf")}, index.IngestOptions{Sensitivity: index.Restricted})
	if err != nil || third.Replaced != 1 || third.Formats["pdf"].Extract == 0 {
		t.Errorf("re-ingest as restricted: %+v, %v", third, err)
	}
	e.digest()
}

// A failure reason can quote the document; above the caller's clearance
// Failed keeps only the kind of failure.
func TestFailedReasonsWithheldAboveClearance(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	md := "---\nsensitivity: restricted\nCEO bonus 4200000 EUR: 1\nCEO bonus 4200000 EUR: 2\n---\n\nSecret body.\n"
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/hr/payroll.md", Data: []byte(md), Sensitivity: index.Restricted}); !errors.Is(err, extract.ErrFrontMatter) {
		t.Fatalf("ingest: %v", err)
	}
	for _, tc := range []struct {
		clearance string
		leaks     bool
	}{{index.Public, false}, {index.Internal, false}, {index.Restricted, true}} {
		failed, err := e.ix.Failed(ctx, tc.clearance)
		if err != nil || len(failed) != 1 {
			t.Fatalf("%s: %v, %v", tc.clearance, failed, err)
		}
		r := failed[0].Reason
		if strings.Contains(r, "4200000") != tc.leaks || !strings.HasPrefix(r, "invalid front matter") {
			t.Errorf("clearance %s: reason %q", tc.clearance, r)
		}
	}
	if _, err := e.ix.Failed(ctx, "secret"); err == nil {
		t.Error("unknown clearance accepted")
	}
}

// A document ingested into the live index while a Live rebuild runs, and
// failing under the rebuild's limits, refuses the swap too: what is served
// is read again when writes are held back for the swap.
func TestLiveRebuildRefusesFailureOfDocumentIngestedDuring(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e) // Markdown and text: no DOCX limit applies to them
	ctx := context.Background()
	docx, err := os.ReadFile(filepath.Join(sharedData(t, "documents/docx"), "lorem_ipsum.docx"))
	if err != nil {
		t.Fatal(err)
	}
	ingested := false
	_, err = rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix,
		Index: index.Options{Extract: extract.Limits{MaxDecompressedBytes: 1000}},
		Progress: func(done, total int) {
			if ingested {
				return
			}
			ingested = true
			if res, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/lorem.docx", Data: docx}); err != nil || res.Status != index.Added {
				t.Errorf("ingest during the rebuild: %+v %v", res, err)
			}
		}})
	if !ingested || !errors.Is(err, rebuild.ErrNewFailures) || !strings.Contains(err.Error(), "lorem.docx") {
		t.Fatalf("rebuild: %v, want ErrNewFailures naming lorem.docx", err)
	}
	if hits := e.search("lorem ipsum dolor", 3); len(hits) == 0 {
		t.Error("the live index no longer serves the DOCX")
	}
}

// A file read as another type than its name says (its first bytes are a
// PDF header) names that in its failure.
func TestFailureSaysTypeCameFromContent(t *testing.T) {
	e := newEnv(t, index.Options{})
	_, err := e.ix.Ingest(context.Background(), index.Input{Source: "/notes/pdfstart.md", Data: []byte("%PDF-1.7 is the first line of every PDF file.\n")})
	if !errors.Is(err, extract.ErrCorrupt) || !strings.Contains(err.Error(), "read as pdf by its content, not as its name says") {
		t.Errorf("err = %v", err)
	}
}
