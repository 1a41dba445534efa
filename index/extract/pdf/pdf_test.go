package pdf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/extracttest"
	"github.com/escurel/escurel/internal/testdocs"
)

// units returns the verbatim text of each unit.
func units(d *extract.Doc) []string {
	var out []string
	for _, u := range d.Units {
		out = append(out, d.Text[u.Start:u.End])
	}
	return out
}

// extractFile detects and extracts a file with the default limits.
func extractFile(t *testing.T, path string) (*extract.Doc, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := extract.Detect(path, data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return extract.Extract(context.Background(), mt, filepath.Base(path), data, extract.Limits{})
}

// checkSpans fails the test unless every unit and heading is a trimmed,
// ordered span of d.Text and every unit of a paged document has a page.
func checkSpans(t *testing.T, name string, d *extract.Doc) {
	t.Helper()
	end := 0
	for i, u := range d.Units {
		if u.Start < end || u.End <= u.Start || u.End > len(d.Text) {
			t.Fatalf("%s: unit %d [%d,%d) out of order or range (text %d bytes)", name, i, u.Start, u.End, len(d.Text))
		}
		s := d.Text[u.Start:u.End]
		if strings.TrimSpace(s) != s {
			t.Fatalf("%s: unit %d %q not trimmed", name, i, s)
		}
		if d.Pages > 0 && (u.Page < 1 || u.Page > d.Pages) {
			t.Fatalf("%s: unit %d page %d, want 1..%d", name, i, u.Page, d.Pages)
		}
		end = u.End
	}
	for i, h := range d.Headings {
		if h.Start > h.End || h.End > len(d.Text) || (i > 0 && h.Start < d.Headings[i-1].Start) {
			t.Fatalf("%s: heading %d %+v out of order or range", name, i, h)
		}
	}
}

// wordsOf returns the case-folded words (runs of letters and digits) of s.
func wordsOf(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}

// coverage is the share of want's words (with repeats) found among got's.
func coverage(want, got string) (float64, []string) {
	have := map[string]bool{}
	for _, w := range wordsOf(got) {
		have[w] = true
	}
	ws := wordsOf(want)
	found, missing := 0, map[string]bool{}
	for _, w := range ws {
		if have[w] {
			found++
		} else {
			missing[w] = true
		}
	}
	var miss []string
	for w := range missing {
		miss = append(miss, w)
	}
	if len(ws) == 0 {
		return 1, nil
	}
	return float64(found) / float64(len(ws)), miss
}

func TestPDFRealFiles(t *testing.T) {
	dir := extracttest.SharedDocs(t)
	for _, tc := range []struct {
		file     string
		pages    int
		title    string
		expected string // file in expected/, "" for none
	}{
		{"amt_handbook_sample.pdf", 1, "AMT General Handbook", "amt_handbook_sample.md"},
		{"bookmark_sample.pdf", 3, "bookmark_sample", ""},
		{"multi_page.pdf", 5, "multi_page", "multi_page.md"},
		{"normal_4pages.pdf", 4, "코로나-19 관련 보험약관상 재해보험금 지급문제 및 개선과제", "normal_4pages.md"},
		{"redp5110_sampled.pdf", 18, "redp5110_sampled", "redp5110_sampled.md"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			d, err := extractFile(t, filepath.Join(dir, "pdf", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			checkSpans(t, tc.file, d)
			if d.Pages != tc.pages || d.Title != tc.title {
				t.Errorf("pages %d title %q, want %d %q", d.Pages, d.Title, tc.pages, tc.title)
			}
			if last := d.Units[len(d.Units)-1].Page; last != tc.pages {
				t.Errorf("last unit on page %d, want %d", last, tc.pages)
			}
			if tc.expected == "" {
				return
			}
			want, err := os.ReadFile(filepath.Join(dir, "expected", tc.expected))
			if err != nil {
				t.Fatal(err)
			}
			cov, miss := coverage(string(want), d.Text)
			// The units are what blocks are cut from: their words are the
			// ones a search finds in a body.
			unitCov, _ := coverage(string(want), strings.Join(units(d), "\n"))
			t.Logf("%s: %d pages, %d units, %.2f%% of the expected words in the text, %.2f%% in units",
				tc.file, d.Pages, len(d.Units), 100*cov, 100*unitCov)
			if cov < 0.95 {
				t.Errorf("%.1f%% of the expected words, want ≥ 95%%; missing e.g. %q", 100*cov, miss[:min(len(miss), 20)])
			}
		})
	}
}

func TestPDFOutlineHeadings(t *testing.T) {
	d, err := extractFile(t, filepath.Join(extracttest.SharedDocs(t), "pdf", "bookmark_sample.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range d.Headings {
		got = append(got, fmt.Sprintf("%d %s", h.Level, h.Text))
		if line := d.Text[h.Start:h.End]; line != h.Text {
			t.Errorf("heading %q spans %q", h.Text, line)
		}
	}
	want := []string{"1 PART I - DEFINITIONS", "2 1. Interpretation", "2 2. Construction of Terms",
		"1 PART II - OBLIGATIONS", "2 3. Payment Terms", "3 3.1 Payment Schedule", "2 4. Termination",
		"1 PART III - MISCELLANEOUS"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("headings\n got %q\nwant %q", got, want)
	}
	// A heading line is not a unit; the text under it is.
	for _, u := range d.Units {
		if strings.HasPrefix(d.Text[u.Start:u.End], "PART") {
			t.Errorf("heading line in unit %q", d.Text[u.Start:u.End])
		}
	}
}

func TestPDFDamaged(t *testing.T) {
	dir := filepath.Join(extracttest.SharedDocs(t), "corrupt")
	for _, f := range []string{"qpdf_bad-xref-entry.pdf", "qpdf_bad-xref.pdf", "qpdf_damaged-stream.pdf", "qpdf_eof-reading-token.pdf"} {
		d, err := extractFile(t, filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v, want PDFium to repair it", f, err)
			continue
		}
		if !strings.Contains(d.Text, "Potato") {
			t.Errorf("%s: text %q, want the page's word", f, d.Text)
		}
	}
	for _, f := range []string{"derived_truncated_4KiB_employee_handbook.pdf", "derived_truncated_60pct_Northwind_Standard_Benefits_Details.pdf"} {
		_, err := extractFile(t, filepath.Join(dir, f))
		if !errors.Is(err, extract.ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%s: err = %v, want extract.ErrCorrupt saying truncated", f, err)
		}
	}
}

func TestPDFBuilt(t *testing.T) {
	ctx := context.Background()
	d, err := extract.Extract(ctx, extract.MediaPDF, "built.pdf", testdocs.PDF([]string{"Hello page one.", "", "Third page text."}, false), extract.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkSpans(t, "built.pdf", d)
	if got := units(d); strings.Join(got, "|") != "Hello page one.|Third page text." || d.Units[1].Page != 3 || d.Pages != 3 {
		t.Errorf("units %q pages %+v of %d", got, d.Units, d.Pages)
	}
	if d.Title != "built" {
		t.Errorf("title %q, want the file name", d.Title)
	}

	_, err = extract.Extract(ctx, extract.MediaPDF, "locked.pdf", testdocs.PDF([]string{"secret"}, true), extract.Limits{})
	if !errors.Is(err, extract.ErrEncrypted) {
		t.Errorf("encrypted: err = %v, want extract.ErrEncrypted", err)
	}
	_, err = extract.Extract(ctx, extract.MediaPDF, "scan.pdf", testdocs.PDF([]string{"", ""}, false), extract.Limits{})
	if !errors.Is(err, extract.ErrEmpty) || !strings.Contains(err.Error(), "2 pages") {
		t.Errorf("no text layer: err = %v, want extract.ErrEmpty naming the pages", err)
	}
	_, err = extract.Extract(ctx, extract.MediaPDF, "fake.pdf", []byte("this is not a PDF at all"), extract.Limits{})
	if !errors.Is(err, extract.ErrCorrupt) {
		t.Errorf("not a PDF: err = %v, want extract.ErrCorrupt", err)
	}
}

// TestPDFTimeout checks that an extraction past its time limit fails with
// ErrTimeout promptly, and that the engine still works afterwards (the
// instance that was stopped is replaced).
func TestPDFTimeout(t *testing.T) {
	ctx := context.Background()
	pages := make([]string, 3000)
	for i := range pages {
		pages[i] = fmt.Sprintf("Page %d of a long document about timeouts.", i+1)
	}
	big := testdocs.PDF(pages, false)
	if _, err := extract.Extract(ctx, extract.MediaPDF, "warm.pdf", testdocs.PDF([]string{"warm"}, false), extract.Limits{}); err != nil {
		t.Fatal(err) // start the engine outside the measured call
	}
	start := time.Now()
	_, err := extract.Extract(ctx, extract.MediaPDF, "big.pdf", big, extract.Limits{Timeout: 20 * time.Millisecond})
	if !errors.Is(err, extract.ErrTimeout) {
		t.Fatalf("err = %v, want extract.ErrTimeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("timed out after %v, want about the limit", el)
	}
	for i := 0; i < 3; i++ { // every instance of the pool still serves
		d, err := extract.Extract(ctx, extract.MediaPDF, "after.pdf", testdocs.PDF([]string{"still working"}, false), extract.Limits{})
		if err != nil || !strings.Contains(d.Text, "still working") {
			t.Fatalf("after a timeout: %v", err)
		}
	}
	d, err := extract.Extract(ctx, extract.MediaPDF, "big.pdf", big, extract.Limits{})
	if err != nil || d.Pages != len(pages) {
		t.Fatalf("big PDF without a tight limit: %v", err)
	}
}

func TestPDFTypeHeadings(t *testing.T) {
	body := func(s string) pdfLine { return pdfLine{text: s, size: 10} }
	pages := [][]pdfLine{{
		{text: "Annual Report", size: 18},
		{text: "of the Numbat", size: 18},
		body("Numbats eat termites every day of the year, and a great many of them."),
		body("They live in the south-west."),
		{text: "Diet", size: 10, bold: true},
		body("Termites, mostly."),
		{text: "SELECT name", size: 10, bold: true, mono: true},
		body("Code is not a heading."),
		{text: "Bold one", size: 10, bold: true},
		{text: "Bold two", size: 10, bold: true},
		{text: "Bold three", size: 10, bold: true},
		{text: "Bold four", size: 10, bold: true},
		body("A run of four bold lines is emphasis, not a heading."),
	}, {
		{text: "Habitat", size: 14},
		body("Woodland."),
	}}
	d, err := buildPDFDoc("numbat.pdf", "", pages, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSpans(t, "numbat.pdf", d)
	var got []string
	for _, h := range d.Headings {
		got = append(got, fmt.Sprintf("%d %s", h.Level, h.Text))
	}
	want := []string{"1 Annual Report of the Numbat", "3 Diet", "2 Habitat"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("headings %q, want %q", got, want)
	}
	if h := d.Headings[0]; d.Text[h.Start:h.End] != "Annual Report\nof the Numbat" {
		t.Errorf("two-line heading spans %q", d.Text[h.Start:h.End])
	}
	for _, u := range units(d) {
		if u == "Diet" || u == "Habitat" || strings.HasPrefix(u, "Annual") {
			t.Errorf("heading line %q in a unit", u)
		}
	}
	if !strings.Contains(strings.Join(units(d), "|"), "SELECT name") {
		t.Errorf("code line lost from the units: %q", units(d))
	}
	// With an outline, the outline decides and type is ignored.
	d, err = buildPDFDoc("numbat.pdf", "", pages, []pdfHeading{{title: "Habitat", level: 1, page: 1}})
	if err != nil || len(d.Headings) != 1 || d.Headings[0].Text != "Habitat" {
		t.Errorf("with an outline: %+v, %v", d.Headings, err)
	}
}

// Without an outline, the headings of a real PDF come from its type: all
// eleven section titles of multi_page.pdf.
func TestPDFTypeHeadingsReal(t *testing.T) {
	d, err := extractFile(t, filepath.Join(extracttest.SharedDocs(t), "pdf", "multi_page.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range d.Headings {
		got = append(got, h.Text)
	}
	want := []string{"The Evolution of the Word Processor", "Pre-Digital Era (19th - Early 20th Century)",
		"The Birth of Word Processing (1960s - 1970s)", "The Rise of Personal Computers (1980s)", "The Modern Era (1990s - Present)",
		"Future of Word Processing", "Specialized Word Processing Tools", "Key Features That Changed Word Processing",
		"The Cultural Impact of Word Processors", "Word Processors in a Post-Digital Era", "A Glimpse Into the Future"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("headings\n got %q\nwant %q", got, want)
	}
}

func TestPDFRunningHeadersAndFooters(t *testing.T) {
	var pages [][]pdfLine
	for p, word := range []string{"alpha", "beta", "gamma", "delta"} {
		pages = append(pages, []pdfLine{
			{text: fmt.Sprintf("Numbat Report — page %d", p+1), size: 10},
			{text: "The same boilerplate paragraph closes every page of this report.", size: 10},
			{text: "Body text about numbats, part " + word + ".", size: 10},
			{},
			{text: "Numbats are marsupials of Western Australia.", size: 10},
			{text: "Confidential", size: 8},
		})
	}
	d, err := buildPDFDoc("report.pdf", "", pages, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSpans(t, "report.pdf", d)
	got := strings.Join(units(d), "|")
	if strings.Contains(got, "Numbat Report") || strings.Contains(got, "Confidential") {
		t.Errorf("running header or footer in a unit: %q", units(d))
	}
	if strings.Count(got, "The same boilerplate paragraph") != 4 || !strings.Contains(got, "part delta") {
		t.Errorf("body lost: %q", units(d))
	}
	if !strings.Contains(d.Text, "Numbat Report — page 3") {
		t.Error("furniture dropped from the text; it stays, outside the units")
	}
	// Not furniture: a "Chapter N" heading atop each page (set large), a
	// paragraph repeated on every page (body size, no number), a row of
	// numbers at the foot of each page (no letter).
	var book [][]pdfLine
	for p, title := range []string{"Getting started", "Installing", "Configuring", "Reading"} {
		book = append(book, []pdfLine{
			{text: fmt.Sprintf("Chapter %d", p+1), size: 18},
			{text: title, size: 14},
			{text: "Body text of this chapter, long enough to be prose on its page.", size: 10},
			{text: "More prose follows here, describing the steps for the reader.", size: 10},
			{text: fmt.Sprintf("%d %d %d", 1990+p, 400+p, 7+p), size: 10},
		})
	}
	d, err = buildPDFDoc("book.pdf", "", book, nil)
	if err != nil {
		t.Fatal(err)
	}
	var heads []string
	for _, h := range d.Headings {
		heads = append(heads, h.Text)
	}
	if got := strings.Join(heads, "|") + "|" + strings.Join(units(d), "|"); !strings.Contains(got, "Chapter 3") || !strings.Contains(got, "1992 402 9") {
		t.Errorf("chapter headings or number rows lost: headings %q units %q", heads, units(d))
	}
	// Two pages: too few to tell furniture from content.
	d, _ = buildPDFDoc("short.pdf", "", pages[:2], nil)
	if !strings.Contains(strings.Join(units(d), "|"), "Numbat Report — page 1") {
		t.Errorf("two-page document lost its first line: %q", units(d))
	}
}

// A PDF whose content stream inflates past an instance's memory cap fails
// as one document, and the engine's memory goes back: the next PDFs
// extract, and the process does not keep the peak.
func TestPDFMemoryBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("inflates 768 MiB")
	}
	ctx := context.Background()
	bomb := testdocs.FlateBombPDF(3 << 28)
	start := time.Now()
	_, err := extract.Extract(ctx, extract.MediaPDF, "bomb.pdf", bomb, extract.Limits{Timeout: 5 * time.Minute})
	if !errors.Is(err, extract.ErrCorrupt) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "512 MiB") {
		t.Fatalf("a 768 MiB content stream under a 512 MiB cap: %v; want one line naming the cap", err)
	}
	t.Logf("bomb (%d bytes on disk): %v after %v; VmHWM %s", len(bomb), err, time.Since(start).Round(time.Millisecond), procStatus("VmHWM"))
	for i := 0; i < 3; i++ {
		d, err := extract.Extract(ctx, extract.MediaPDF, "after.pdf", testdocs.PDF([]string{"still working"}, false), extract.Limits{})
		if err != nil || !strings.Contains(d.Text, "still working") {
			t.Fatalf("after the bomb: %v", err)
		}
	}
	t.Logf("after: VmRSS %s", procStatus("VmRSS"))
	// On Linux: the process peaked near the 512 MiB cap, not at gigabytes,
	// and gave the instance's memory back.
	if hwm := procKiB("VmHWM"); hwm > 1<<20 {
		t.Errorf("peak RSS %d MiB, want about the 512 MiB cap", hwm>>10)
	}
	if rss := procKiB("VmRSS"); rss > 400<<10 {
		t.Errorf("RSS %d MiB after the bomb, want the instance's memory returned", rss>>10)
	}
}

// procKiB reads a "NNN kB" field of /proc/self/status; 0 where there is none.
func procKiB(field string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(procStatus(field), " kB"))
	return n
}

// procStatus reads a field of /proc/self/status ("" where there is none).
func procStatus(field string) string {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Extractions killed at random moments (opening the file, reading a page)
// never crash the process, even though the memory of a killed instance is
// given back while the extraction that used it may still be running; and
// the engine works afterwards. (Unmapping that memory at once crashed the
// tests with SIGSEGV.)
func TestPDFKilledAtRandom(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(extracttest.SharedDocs(t), "pdf", "redp5110_sampled.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				limit := time.Duration(1+(w*15+i)*37%5000) * time.Microsecond
				_, err := extract.Extract(ctx, extract.MediaPDF, "r.pdf", data, extract.Limits{Timeout: limit})
				if err != nil && !errors.Is(err, extract.ErrTimeout) {
					t.Errorf("limit %v: %v", limit, err)
				}
			}
		}(w)
	}
	wg.Wait()
	d, err := extract.Extract(ctx, extract.MediaPDF, "r.pdf", data, extract.Limits{})
	if err != nil || d.Pages != 18 {
		t.Fatalf("after 60 killed extractions: %v", err)
	}
}

// Importing the package registers the extractor: For finds it, IDs lists
// it, and a second registration under its media type panics.
func TestRegistered(t *testing.T) {
	e, err := extract.For(extract.MediaPDF)
	if err != nil || e.ID() != "pdf/2" || e.Name != "pdf" {
		t.Fatalf("For(application/pdf) = %+v, %v", e, err)
	}
	if got := extract.IDs(); got != "docx/2 html/2 markdown/2 pdf/2 text/2" {
		t.Errorf("IDs() = %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second PDF extractor registered without a panic")
		}
	}()
	extract.Register(&extract.Extractor{MediaType: extract.MediaPDF, Name: "pdf2", Version: 1, Func: pdfExtract})
}
