package extract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/klippa-app/go-pdfium"
	pdferrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/responses"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// PDF extraction runs PDFium compiled to WebAssembly (go-pdfium's
// webassembly build on the wazero runtime): no cgo and no system library.
// Compiling the module takes seconds, so the compiled code is cached on disk
// (SetCacheDir) and one pool of PDFium instances serves the whole process.

// pdfEngine is the process's PDFium pool, started on the first PDF.
var pdfEngine struct {
	mu       sync.Mutex
	cacheDir string // "" = the default, see SetCacheDir
	pool     pdfium.Pool
	err      error // why the pool could not start; kept, so every PDF reports it
}

// SetCacheDir sets the directory where the compiled PDFium module is cached
// between processes. "" means the default, "<user cache dir>/escurel/wasm"
// (os.UserCacheDir, e.g. ~/.cache/escurel/wasm); "off" disables the cache,
// so each process compiles the module again (seconds). It applies to the
// first PDF extracted afterwards; once PDF extraction has started it fails
// unless dir is the directory already in use.
func SetCacheDir(dir string) error {
	pdfEngine.mu.Lock()
	defer pdfEngine.mu.Unlock()
	if dir == pdfEngine.cacheDir {
		return nil
	}
	if pdfEngine.pool != nil || pdfEngine.err != nil {
		return fmt.Errorf("extract: cache directory %q: the PDF engine already started with %q", dir, pdfEngine.cacheDir)
	}
	pdfEngine.cacheDir = dir
	return nil
}

// pdfPool returns the PDFium pool, starting it on first use: up to
// GOMAXPROCS instances, reused between documents.
func pdfPool() (pdfium.Pool, error) {
	pdfEngine.mu.Lock()
	defer pdfEngine.mu.Unlock()
	if pdfEngine.pool != nil || pdfEngine.err != nil {
		return pdfEngine.pool, pdfEngine.err
	}
	rc := wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithCloseOnContextDone(true) // Kill interrupts a running extraction
	dir := pdfEngine.cacheDir
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "escurel", "wasm")
		}
	}
	if dir != "" && dir != "off" {
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			pdfEngine.err = fmt.Errorf("PDF engine: compilation cache %s: %w (set ESCUREL_CACHE_DIR, or off)", dir, err)
			return nil, pdfEngine.err
		}
		rc = rc.WithCompilationCache(cache)
	}
	n := runtime.GOMAXPROCS(0)
	pool, err := webassembly.Init(webassembly.Config{
		MaxIdle: n, MaxTotal: n, ReuseWorkers: true,
		RuntimeConfig: rc,
		FSConfig:      wazero.NewFSConfig(), // no host files: documents come as bytes
		Stdout:        io.Discard, Stderr: io.Discard,
	})
	if err != nil {
		pdfEngine.err = fmt.Errorf("PDF engine: %w", err)
		return nil, pdfEngine.err
	}
	pdfEngine.pool = pool
	return pool, nil
}

// pdfExtract extracts a PDF's text layer page by page with PDFium.
//
// The text of each page is PDFium's, with line ends normalized to "\n",
// control characters dropped and trailing spaces trimmed; pages are joined
// by a blank line. Lines are grouped into paragraphs (units) by layout: a
// blank line, a line much shorter than the page's usual line (the end of a
// paragraph, a heading, a caption), or a next line starting with a list
// bullet ends a paragraph. Each unit lies on one page (Unit.Page, from 1);
// a paragraph continued on the next page is two units.
//
// Headings come from the document outline (bookmarks), the outline depth
// being the level: each entry is looked for as a line of its target page,
// and that line becomes the heading. An entry not found on its page opens
// at the start of the page. Without an outline a PDF has no headings, and
// its blocks' context is the title and the page alone.
//
// The title is the document information Title unless blank or "untitled",
// else the file name without its extension.
//
// Errors: ErrEncrypted for a document that needs a password; ErrCorrupt for
// bytes PDFium cannot open (a truncated file) or a page it cannot read;
// ErrEmpty for a PDF with no text layer (scanned pages need OCR, which
// escurel does not do). Damaged files PDFium repairs (a bad xref table)
// extract normally.
func pdfExtract(ctx context.Context, name string, data []byte, _ Limits) (doc *Doc, err error) {
	pool, err := pdfPool()
	if err != nil {
		return nil, err
	}
	inst, err := pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("PDF engine: %w", err)
	}
	// Past the deadline, kill the instance: wazero then stops the running
	// call, and the pool makes a fresh instance for the next document.
	stop := context.AfterFunc(ctx, func() { inst.Kill() })
	defer func() {
		if stop() {
			if p := recover(); p != nil {
				inst.Kill()
				panic(p) // Extract turns it into ErrPanic
			}
			inst.Close()
		}
		if err != nil && ctx.Err() != nil {
			doc, err = nil, ctx.Err()
		}
	}()
	return pdfRead(inst, name, data)
}

// pdfRead extracts data with a PDFium instance.
func pdfRead(inst pdfium.Pdfium, name string, data []byte) (*Doc, error) {
	opened, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		switch {
		case errors.Is(err, pdferrors.ErrPassword), errors.Is(err, pdferrors.ErrSecurity):
			return nil, fmt.Errorf("%w: the PDF needs a password (PDFium: %v)", ErrEncrypted, err)
		case errors.Is(err, pdferrors.ErrFormat), errors.Is(err, pdferrors.ErrFile):
			return nil, fmt.Errorf("%w: PDFium cannot open the file (%v): truncated or not a PDF", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("%w: PDFium cannot open the file: %v", ErrCorrupt, err)
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: opened.Document})
	count, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: opened.Document})
	if err != nil {
		return nil, fmt.Errorf("%w: page count: %v", ErrCorrupt, err)
	}
	pages := make([]string, count.PageCount)
	for i := range pages {
		t, err := inst.GetPageText(&requests.GetPageText{Page: requests.Page{ByIndex: &requests.PageByIndex{Document: opened.Document, Index: i}}})
		if err != nil {
			return nil, fmt.Errorf("%w: page %d: %v", ErrCorrupt, i+1, err)
		}
		pages[i] = t.Text
	}
	var outline []pdfHeading
	if bm, err := inst.GetBookmarks(&requests.GetBookmarks{Document: opened.Document}); err == nil {
		outline = flattenOutline(bm.Bookmarks, 1, nil)
	}
	title := ""
	if t, err := inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: opened.Document, Tag: "Title"}); err == nil {
		title = strings.Join(strings.Fields(t.Value), " ")
	}
	if strings.EqualFold(title, "untitled") {
		title = ""
	}
	return buildPDFDoc(name, title, pages, outline)
}

// pdfHeading is an outline entry: a title, its depth from 1 and the index
// of its target page (-1 when it has none).
type pdfHeading struct {
	title string
	level int
	page  int
}

// flattenOutline lists the bookmarks depth first, in outline order.
func flattenOutline(bms []responses.GetBookmarksBookmark, level int, out []pdfHeading) []pdfHeading {
	for _, b := range bms {
		page := -1
		if b.DestInfo != nil {
			page = b.DestInfo.PageIndex
		}
		out = append(out, pdfHeading{title: strings.Join(strings.Fields(b.Title), " "), level: min(level, 6), page: page})
		out = flattenOutline(b.Children, level+1, out)
	}
	return out
}

// buildPDFDoc assembles a Doc from the pages' raw text and the outline. It
// touches no PDFium state, so it is tested on its own.
func buildPDFDoc(name, title string, pages []string, outline []pdfHeading) (*Doc, error) {
	doc := &Doc{Title: title, Pages: len(pages)}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	// Outline entries by target page, in outline order.
	byPage := map[int][]pdfHeading{}
	for _, h := range outline {
		if h.page >= 0 && h.page < len(pages) && h.title != "" {
			byPage[h.page] = append(byPage[h.page], h)
		}
	}
	var b strings.Builder
	var paras []Unit // untrimmed; trimmed once the text is whole
	for i, raw := range pages {
		lines := pageLines(raw)
		if b.Len() > 0 && len(lines) > 0 {
			b.WriteString("\n\n")
		}
		pageStart := b.Len()
		heads := byPage[i]
		// Find the outline entries among the page's lines, in order.
		headAt := map[int]pdfHeading{} // line index → entry
		from := 0
		var missing []pdfHeading
		for _, h := range heads {
			j := findLine(lines, from, h.title)
			if j < 0 {
				missing = append(missing, h)
				continue
			}
			headAt[j] = h
			from = j + 1
		}
		for _, h := range missing {
			// Open the entry just before the page's first byte (the
			// separator), so that the page's first unit is inside it.
			at := max(pageStart-1, 0)
			doc.Headings = append(doc.Headings, Heading{Level: h.level, Text: h.title, Start: at, End: at})
		}
		typical := typicalLineLength(lines)
		paraStart := -1
		endPara := func(end int) {
			if paraStart >= 0 {
				paras = append(paras, Unit{Start: paraStart, End: end, Page: i + 1})
			}
			paraStart = -1
		}
		prev := "" // the line before, "" after a blank line or a heading
		for j, line := range lines {
			if line == "" {
				endPara(b.Len())
				prev = ""
				continue
			}
			h, isHead := headAt[j]
			if b.Len() > pageStart {
				if paraStart >= 0 && !isHead && !breakAfter(prev, line, typical) {
					b.WriteByte('\n')
				} else {
					endPara(b.Len())
					b.WriteString("\n\n")
				}
			}
			start := b.Len()
			b.WriteString(line)
			prev = line
			if isHead {
				lead := len(line) - len(strings.TrimLeftFunc(line, unicode.IsSpace))
				doc.Headings = append(doc.Headings, Heading{Level: h.level, Text: h.title, Start: start + lead, End: b.Len()})
				prev = ""
				continue
			}
			if paraStart < 0 {
				paraStart = start
			}
		}
		endPara(b.Len())
	}
	doc.Text = b.String()
	for _, u := range paras {
		doc.addUnitPage(u.Start, u.End, u.Page)
	}
	sort.SliceStable(doc.Headings, func(i, j int) bool { return doc.Headings[i].Start < doc.Headings[j].Start })
	if len(doc.Units) == 0 {
		if len(pages) == 0 {
			return nil, fmt.Errorf("%w: the PDF has no pages", ErrEmpty)
		}
		return nil, fmt.Errorf("%w: no text layer on any of %d pages (scanned pages need OCR, which escurel does not do)", ErrEmpty, len(pages))
	}
	return doc, nil
}

// addUnitPage appends the trimmed span [start, end) on page page.
func (d *Doc) addUnitPage(start, end, page int) {
	n := len(d.Units)
	d.addUnit(start, end)
	if len(d.Units) > n {
		d.Units[n].Page = page
	}
}

// pageLines splits PDFium's text of a page into clean lines: CR LF and CR
// become line ends, control and non-characters are dropped (PDFium marks
// soft hyphens and unknown glyphs with them), invalid UTF-8 is dropped,
// and trailing white space is trimmed. Leading and trailing blank lines
// are dropped, and runs of blank lines become one.
func pageLines(raw string) []string {
	raw = strings.ToValidUTF8(raw, "")
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	raw = strings.ReplaceAll(raw, "\r", "\n")
	raw = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case unicode.IsControl(r), r == 0xFFFE, r == 0xFFFF, r == utf8.RuneError:
			return -1
		}
		return r
	}, raw)
	var out []string
	for _, l := range strings.Split(raw, "\n") {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if strings.TrimSpace(l) == "" {
			l = ""
		}
		if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// findLine returns the index of the first line at or after from whose
// text, white space collapsed and case folded, equals title or starts with
// it followed by a space (a heading line with a page number after it), or
// -1.
func findLine(lines []string, from int, title string) int {
	want := strings.ToLower(title)
	for j := from; j < len(lines); j++ {
		got := strings.ToLower(strings.Join(strings.Fields(lines[j]), " "))
		if got == want || strings.HasPrefix(got, want+" ") {
			return j
		}
	}
	return -1
}

// typicalLineLength is the 80th percentile of the page's line lengths in
// runes: the width of a full line of body text.
func typicalLineLength(lines []string) int {
	var n []int
	for _, l := range lines {
		if l != "" {
			n = append(n, utf8.RuneCountInString(strings.TrimSpace(l)))
		}
	}
	if len(n) == 0 {
		return 0
	}
	sort.Ints(n)
	return n[len(n)*8/10]
}

// breakAfter reports whether a paragraph ends between line prev and line
// next: either is blank, prev is much shorter than a full line (under 70 %
// of typical), or next starts with a list bullet.
func breakAfter(prev, next string, typical int) bool {
	if prev == "" || next == "" {
		return true
	}
	if utf8.RuneCountInString(strings.TrimSpace(prev))*10 < typical*7 {
		return true
	}
	r, _ := utf8.DecodeRuneInString(strings.TrimSpace(next))
	return strings.ContainsRune("•◦▪▫●○■□‣⁃–—", r)
}
