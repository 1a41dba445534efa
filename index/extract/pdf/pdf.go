// Package pdf is escurel's PDF extractor ("pdf/2", media type
// application/pdf): the text layer of each page read by PDFium compiled to
// WebAssembly and run on wazero, with paragraphs, headings (from the
// outline, else from type) and running headers and footers found from the
// layout.
//
// Importing it, usually for its side effect alone,
//
//	import _ "github.com/escurel/escurel/index/extract/pdf"
//
// registers the extractor with extract.Register in its init function, as
// a database/sql driver does; extract.Extract then reads PDFs. It links
// go-pdfium and wazero, which programs that read no PDFs need not carry;
// without it, extract.Extract fails on a PDF with extract.ErrNotLinked.
package pdf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/enums"
	pdferrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/responses"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/escurel/escurel/index/extract"
)

// version is the extractor's version: its ID is "pdf/<version>". Raise it
// when the same bytes would extract to another Doc.
const version = 2

func init() {
	extract.Register(&extract.Extractor{MediaType: extract.MediaPDF, Name: "pdf", Version: version,
		Func: pdfExtract, Start: pdfStart, LateClock: true})
}

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
		return fmt.Errorf("pdf: cache directory %q: the PDF engine already started with %q", dir, pdfEngine.cacheDir)
	}
	pdfEngine.cacheDir = dir
	return nil
}

// pdfMemoryPages caps one PDFium instance's memory: 8192 WebAssembly
// pages of 64 KiB, 512 MiB. A PDF that needs more (a content stream that
// inflates to gigabytes) fails as corrupt instead of taking the process's
// memory.
const pdfMemoryPages = 8192

// pdfPool returns the PDFium pool, starting it on first use: up to
// GOMAXPROCS instances (more would share the cores, and a time limit
// would then depend on load), each used for one document.
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
		base, err := os.UserCacheDir()
		if err != nil {
			slog.Warn("PDF engine: no user cache directory; compiling PDFium on every start (seconds): set ESCUREL_CACHE_DIR", "err", err)
		} else {
			dir = filepath.Join(base, "escurel", "wasm")
		}
	}
	if dir != "" && dir != "off" {
		// A cache that cannot be used costs seconds per process, not
		// correctness: warn and go on without it.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			slog.Warn("PDF engine: cannot use the compilation cache; compiling PDFium on every start (seconds): set ESCUREL_CACHE_DIR to a writable directory, or off", "dir", dir, "err", err)
		} else if cache, err := wazero.NewCompilationCacheWithDir(dir); err != nil {
			slog.Warn("PDF engine: cannot use the compilation cache; compiling PDFium on every start (seconds): set ESCUREL_CACHE_DIR to a writable directory, or off", "dir", dir, "err", err)
		} else {
			rc = rc.WithCompilationCache(cache)
		}
	}
	rc = rc.WithMemoryLimitPages(pdfMemoryPages)
	n := runtime.GOMAXPROCS(0)
	pool, err := webassembly.Init(webassembly.Config{
		Context: experimental.WithMemoryAllocator(context.Background(), pdfMemory),
		// Each document gets a fresh instance (about 10 ms with the
		// compiled module): WebAssembly memory never shrinks, so a reused
		// instance would keep the peak of the largest PDF it ever read.
		MaxIdle: n, MaxTotal: n, ReuseWorkers: false,
		RuntimeConfig: rc,
		FSConfig:      wazero.NewFSConfig(), // no host files: documents come as bytes
		Stdout:        io.Discard, Stderr: io.Discard,
	})
	if err != nil {
		pdfEngine.err = fmt.Errorf("%w: %v", extract.ErrEngine, err)
		return nil, pdfEngine.err
	}
	pdfEngine.pool = pool
	return pool, nil
}

// pdfStart starts the PDF engine (outside any extraction's time limit: it
// may take seconds without the compilation cache).
func pdfStart() error {
	_, err := pdfPool()
	return err
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
// Headings come from the document outline (bookmarks) when it has one, the
// outline depth being the level: each entry is looked for as a line of its
// target page, and that line becomes the heading; an entry not found on
// its page opens at the start of the page. Without an outline, headings
// come from the type (typeHeadings): short lines set larger than the body
// text, or in bold, standing on their own; levels rank the types, largest
// first. A PDF without either has no headings, and its blocks' context is
// the title and the page alone.
//
// The title is the document information Title unless blank or "untitled",
// else the file name without its extension.
//
// Errors: ErrEncrypted for a document that needs a password; ErrCorrupt for
// bytes PDFium cannot open (a truncated file) or a page it cannot read;
// ErrEmpty for a PDF with no text layer (scanned pages need OCR, which
// escurel does not do). Damaged files PDFium repairs (a bad xref table)
// extract normally.
func pdfExtract(ctx context.Context, name string, data []byte, _ extract.Limits) (doc *extract.Doc, err error) {
	pool, err := pdfPool()
	if err != nil {
		return nil, err
	}
	pdfEnter()
	defer pdfLeave() // runs last: after the instance is closed or killed
	inst, err := pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %v", extract.ErrEngine, err)
	}
	extract.BeginClock(ctx) // waiting for an instance was not this document's time
	// Past the deadline, kill the instance: wazero then stops the running
	// call. An instance that failed in any way is killed too, never
	// reused; the pool makes a fresh one (instances are not reused anyway:
	// see pdfPool).
	stop := context.AfterFunc(ctx, func() { inst.Kill() })
	defer func() {
		if stop() {
			if p := recover(); p != nil {
				inst.Kill()
				panic(p) // Extract turns it into ErrPanic
			}
			if err != nil {
				inst.Kill()
			} else {
				inst.Close()
			}
		}
		if err != nil && ctx.Err() != nil {
			doc, err = nil, ctx.Err()
		}
	}()
	return pdfRead(inst, name, data)
}

// pdfRead extracts data with a PDFium instance.
func pdfRead(inst pdfium.Pdfium, name string, data []byte) (*extract.Doc, error) {
	opened, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		switch {
		case errors.Is(err, pdferrors.ErrPassword), errors.Is(err, pdferrors.ErrSecurity):
			return nil, fmt.Errorf("%w: the PDF needs a password (PDFium: %v)", extract.ErrEncrypted, err)
		case errors.Is(err, pdferrors.ErrFormat), errors.Is(err, pdferrors.ErrFile):
			return nil, fmt.Errorf("%w: PDFium cannot open the file (%v): truncated or not a PDF", extract.ErrCorrupt, err)
		}
		return nil, fmt.Errorf("%w: PDFium cannot open the file: %s", extract.ErrCorrupt, engineError(err))
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: opened.Document})
	count, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: opened.Document})
	if err != nil {
		return nil, fmt.Errorf("%w: page count: %s", extract.ErrCorrupt, engineError(err))
	}
	pages := make([][]pdfLine, count.PageCount)
	for i := range pages {
		if pages[i], err = pdfPageLines(inst, requests.Page{ByIndex: &requests.PageByIndex{Document: opened.Document, Index: i}}); err != nil {
			return nil, fmt.Errorf("%w: page %d: %s", extract.ErrCorrupt, i+1, engineError(err))
		}
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

// engineError is an engine error as one line for a document's reason: the
// first line (a WebAssembly trap adds a stack trace), and for PDFium's
// abort, the likely cause.
func engineError(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if strings.Contains(msg, "wasm error: unreachable") {
		msg += fmt.Sprintf(" (PDFium aborted; a document that needs more than the %d MiB an engine instance may use ends so)", pdfMemoryPages*64>>10)
	}
	return msg
}

// pdfHeading is a heading: an outline entry, with the index of its target
// page (-1 when it has none), or a line set in a heading's type.
type pdfHeading struct {
	title string
	level int // from 1
	page  int
	lines int // lines of text it spans (1 for an outline entry)
}

// pdfLine is a line of a page's text, clean (see cleanLine), with the type
// it is set in: the rendered font size in points (0 when unknown), whether
// it is all bold, and whether it is all in a fixed-pitch face (code).
// hyphen: the line ends with a '-' that PDFium took for hyphenation (see
// pdfiumHyphen); the next line continues its word or compound.
type pdfLine struct {
	text       string
	size       float64
	bold, mono bool
	hyphen     bool
}

// pdfPageLines reads a page's text and the type of each line. The text is
// PDFium's (FPDFText_GetText, one call for the page), whose UTF-16 units
// are its character indexes (when GetText leaves characters out, the page
// is read a character at a time instead); the type of a line is sampled
// at its first, middle and last visible characters: the median rendered
// size (font size times the text matrix's vertical scale), and bold when
// all three are in a bold face.
//
// PDFium orders a page's text as the page is shown, after its /Rotate:
// text that is shown running down the page (drawn upright on a page with
// /Rotate 90, or turned a quarter on a page without) it reads as vertical
// writing, its lines in reverse order. So a page whose text, by most
// characters, is not upright as shown is first given the /Rotate that
// shows it upright (uprightRotation; in memory only), then read.
func pdfPageLines(inst pdfium.Pdfium, page requests.Page) ([]pdfLine, error) {
	tp, err := inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: page})
	if err != nil {
		return nil, err
	}
	defer func() { inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage}) }()
	count, err := inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil {
		return nil, err
	}
	if count.Count <= 0 {
		return nil, nil
	}
	if rot, ok := uprightRotation(inst, page, tp.TextPage, count.Count); ok {
		if _, err := inst.FPDFPage_SetRotation(&requests.FPDFPage_SetRotation{Page: page, Rotate: rot}); err != nil {
			return nil, err
		}
		inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage})
		if tp, err = inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: page}); err != nil {
			return nil, err
		}
		if count, err = inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage}); err != nil {
			return nil, err
		}
	}
	t, err := inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, StartIndex: 0, Count: count.Count})
	if err != nil {
		return nil, err
	}
	raw := t.Text
	units := 0
	for _, r := range raw {
		units += max(utf16.RuneLen(r), 1)
	}
	if units != count.Count {
		// GetText left characters out (those without a Unicode value):
		// read the page a character at a time, so that each rune is one
		// character index again, NUL standing for the ones left out
		// (cleanLine drops it).
		var b strings.Builder
		for i := 0; i < count.Count; i++ {
			u, err := inst.FPDFText_GetUnicode(&requests.FPDFText_GetUnicode{TextPage: tp.TextPage, Index: i})
			if err != nil {
				return nil, err
			}
			r := rune(u.Unicode)
			if !utf8.ValidRune(r) || utf16.RuneLen(r) != 1 {
				r = 0 // one index, one rune: a pair or an invalid value is dropped
			}
			b.WriteRune(r)
		}
		raw = b.String()
	}
	style := func(idx []int) (size float64, bold, mono bool) {
		var sizes []float64
		bold, mono = len(idx) > 0, len(idx) > 0
		for _, i := range idx {
			fs, err := inst.FPDFText_GetFontSize(&requests.FPDFText_GetFontSize{TextPage: tp.TextPage, Index: i})
			if err != nil {
				return 0, false, false
			}
			size := fs.FontSize
			if m, err := inst.FPDFText_GetMatrix(&requests.FPDFText_GetMatrix{TextPage: tp.TextPage, Index: i}); err == nil {
				if scale := math.Hypot(float64(m.Matrix.C), float64(m.Matrix.D)); scale > 0 {
					size *= scale
				}
			}
			sizes = append(sizes, math.Round(size*2)/2)
			fi, err := inst.FPDFText_GetFontInfo(&requests.FPDFText_GetFontInfo{TextPage: tp.TextPage, Index: i})
			bold = bold && err == nil && isBoldFont(fi.FontName, fi.Flags)
			mono = mono && err == nil && isFixedPitch(fi.FontName, fi.Flags)
		}
		sort.Float64s(sizes)
		if len(sizes) == 0 {
			return 0, false, false
		}
		return sizes[len(sizes)/2], bold, mono
	}
	var lines []pdfLine
	idx := 0 // character index of the rune being read
	var visible []int
	var b strings.Builder
	flush := func(hyphen bool) {
		l := pdfLine{text: cleanLine(b.String()), hyphen: hyphen}
		if l.text != "" && len(visible) > 0 {
			l.size, l.bold, l.mono = style([]int{visible[0], visible[len(visible)/2], visible[len(visible)-1]})
		}
		lines = append(lines, l)
		b.Reset()
		visible = visible[:0]
	}
	for i, r := range raw {
		switch {
		case r == '\r' && strings.HasPrefix(raw[i+1:], "\n"):
		case r == '\n' || r == '\r':
			flush(false)
		case (r == pdfiumHyphen || r == pdfiumHyphenChar) && endsInLetter(b.String()):
			// A hyphen at a line end that PDFium took for hyphenation:
			// it joined the lines. Split them again, the hyphen kept;
			// the layout decides whether it goes (keepHyphen). (A mark
			// after no letter is dropped, as cleanLine drops it.)
			b.WriteByte('-')
			visible = append(visible, idx)
			flush(true)
		default:
			b.WriteRune(r)
			if !unicode.IsSpace(r) && !unicode.IsControl(r) {
				visible = append(visible, idx)
			}
		}
		idx += max(utf16.RuneLen(r), 1)
	}
	flush(false)
	return tidyLines(lines), nil
}

// PDFium marks a hyphen at a line end that it takes for hyphenation (a
// '-' or soft hyphen between letters) with U+FFFE in FPDFText_GetText and
// U+0002 from FPDFText_GetUnicode, and joins the two lines.
const (
	pdfiumHyphen     = '\uFFFE'
	pdfiumHyphenChar = '\u0002'
)

// endsInLetter reports whether s ends with a letter.
func endsInLetter(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsLetter(r)
}

// rotationSamples is how many characters of a page uprightRotation looks
// at.
const rotationSamples = 32

// uprightRotation returns the /Rotate that shows a page's text upright,
// and whether it differs from the page's own. The text's angle is read
// from the matrices of up to rotationSamples characters spread over the
// page (in the page's coordinates, whatever its /Rotate), rounded to a
// quarter turn; the angle most of them have wins (ties: the page's own
// rotation, else the smaller angle). Text drawn turned by a quarter
// counter-clockwise reads upright on a page turned a quarter clockwise.
func uprightRotation(inst pdfium.Pdfium, page requests.Page, tp references.FPDF_TEXTPAGE, count int) (enums.FPDF_PAGE_ROTATION, bool) {
	cur, err := inst.FPDFPage_GetRotation(&requests.FPDFPage_GetRotation{Page: page})
	if err != nil {
		return 0, false
	}
	var votes [4]int
	step := max(count/rotationSamples, 1)
	for i := step / 2; i < count; i += step {
		m, err := inst.FPDFText_GetMatrix(&requests.FPDFText_GetMatrix{TextPage: tp, Index: i})
		if err != nil || m.Matrix.A == 0 && m.Matrix.B == 0 {
			continue // a character PDFium made up (a space, a line end)
		}
		q := int(math.Round(math.Atan2(float64(m.Matrix.B), float64(m.Matrix.A)) / (math.Pi / 2)))
		votes[(q%4+4)%4]++
	}
	best := int(cur.PageRotation) & 3
	for q, n := range votes {
		if n > votes[best] {
			best = q
		}
	}
	return enums.FPDF_PAGE_ROTATION(best), best != int(cur.PageRotation)&3
}

// isFixedPitch reports whether a font is fixed pitch, by its FixedPitch
// flag (PDF 32000-1 §9.8.2: bit 1) or its name (Courier, "Mono", Consolas).
func isFixedPitch(name string, flags int) bool {
	n := strings.ToLower(name)
	return flags&1 != 0 || strings.Contains(n, "courier") || strings.Contains(n, "mono") || strings.Contains(n, "consol")
}

// isBoldFont reports whether a font is bold by its name (a "Bold", "Black",
// "Heavy" or "Semibold" face, as in "TimesNewRomanPS-BoldMT") or its
// ForceBold flag (PDF 32000-1 §9.8.2: bit 19).
func isBoldFont(name string, flags int) bool {
	n := strings.ToLower(name)
	return flags&(1<<18) != 0 || strings.Contains(n, "bold") || strings.Contains(n, "black") || strings.Contains(n, "heavy")
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
