package pdf

// The layout of a PDF's text: lines into paragraphs, headings from the
// outline or from type, running headers and footers. Nothing here touches
// PDFium: it works on the lines pdfPageLines read.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/span"
)

// buildPDFDoc assembles an extract.Doc from the pages' lines and the outline. It
// touches no PDFium state, so it is tested on its own.
func buildPDFDoc(name, title string, pages [][]pdfLine, outline []pdfHeading) (*extract.Doc, error) {
	doc := &extract.Doc{Title: title, Pages: len(pages)}
	if doc.Title == "" {
		doc.Title = extract.BaseTitle(name)
	}
	// The headings of each page, by the index of their first line.
	heads := make([]map[int]pdfHeading, len(pages))
	var missing [][]pdfHeading // outline entries not found on their page
	furniture := pageFurniture(pages)
	if len(outline) > 0 {
		heads, missing = placeOutline(pages, outline)
	} else {
		heads = typeHeadings(pages, furniture)
	}
	words := pdfWords(pages)
	var b bytes.Buffer       // a Buffer: a hyphen that goes is truncated away
	var paras []extract.Unit // untrimmed; trimmed once the text is whole
	for i, lines := range pages {
		if b.Len() > 0 && len(lines) > 0 {
			b.WriteString("\n\n")
		}
		pageStart := b.Len()
		pageParas, pageHeads := len(paras), len(doc.Headings)
		if i < len(missing) {
			for _, h := range missing[i] {
				// Open the entry just before the page's first byte (the
				// separator), so that the page's first unit is inside it.
				at := max(pageStart-1, 0)
				doc.Headings = append(doc.Headings, extract.Heading{Level: h.level, Text: h.title, Start: at, End: at})
			}
		}
		typical := typicalLineLength(lines)
		paraStart := -1
		endPara := func(end int) {
			if paraStart >= 0 {
				paras = append(paras, extract.Unit{Start: paraStart, End: end, Page: i + 1})
			}
			paraStart = -1
		}
		prev := ""     // the line before, "" after a blank line or a heading
		split := false // prev ends with a hyphen at a line break (endsHyphenated)
		for j := 0; j < len(lines); j++ {
			line := lines[j].text
			if line == "" {
				endPara(b.Len())
				prev, split = "", false
				continue
			}
			if furniture[i][j] {
				// A running header or footer: kept in the text, in no
				// unit and no heading.
				endPara(b.Len())
				if b.Len() > pageStart {
					b.WriteString("\n\n")
				}
				b.WriteString(line)
				prev, split = "", false
				continue
			}
			h, isHead := heads[i][j]
			if b.Len() > pageStart {
				if paraStart >= 0 && !isHead && split {
					// A word or compound broken at the line end: one
					// word again, its hyphen dropped if it only split it.
					if !keepHyphen(prev, line, words) {
						_, n := utf8.DecodeLastRuneInString(prev)
						b.Truncate(b.Len() - n)
					}
				} else if paraStart >= 0 && !isHead && !breakAfter(prev, line, typical) {
					b.WriteByte('\n')
				} else {
					endPara(b.Len())
					b.WriteString("\n\n")
				}
			}
			start := b.Len()
			b.WriteString(line)
			prev, split = line, endsHyphenated(lines[j])
			if isHead {
				for k := 1; k < h.lines; k++ { // a heading set on several lines
					j++
					b.WriteByte('\n')
					b.WriteString(lines[j].text)
				}
				lead := len(line) - len(strings.TrimLeftFunc(line, unicode.IsSpace))
				doc.Headings = append(doc.Headings, extract.Heading{Level: h.level, Text: h.title, Start: start + lead, End: b.Len()})
				prev, split = "", false
				continue
			}
			if paraStart < 0 {
				paraStart = start
			}
		}
		endPara(b.Len())
		if u, ok := headingsUnit(b.Bytes(), paras[pageParas:], doc.Headings[pageHeads:], i+1); ok {
			paras = append(paras[:pageParas], u)
		}
	}
	doc.Text = b.String()
	for _, u := range paras {
		addUnitPage(doc, u.Start, u.End, u.Page)
	}
	sort.SliceStable(doc.Headings, func(i, j int) bool { return doc.Headings[i].Start < doc.Headings[j].Start })
	if len(doc.Units) == 0 {
		if len(pages) == 0 {
			return nil, fmt.Errorf("%w: the PDF has no pages", extract.ErrEmpty)
		}
		return nil, fmt.Errorf("%w: no text layer on any of %d pages (scanned pages need OCR, which escurel does not do)", extract.ErrEmpty, len(pages))
	}
	return doc, nil
}

// placeOutline finds each outline entry as a line of its target page, in
// outline order. It returns the entries found, by page and line, and the
// ones not found, by page.
func placeOutline(pages [][]pdfLine, outline []pdfHeading) ([]map[int]pdfHeading, [][]pdfHeading) {
	heads := make([]map[int]pdfHeading, len(pages))
	missing := make([][]pdfHeading, len(pages))
	from := make([]int, len(pages)) // per page: where the next entry is looked for
	for _, h := range outline {
		if h.page < 0 || h.page >= len(pages) || h.title == "" {
			continue
		}
		j := findLine(pages[h.page], from[h.page], h.title)
		if j < 0 {
			missing[h.page] = append(missing[h.page], h)
			continue
		}
		if heads[h.page] == nil {
			heads[h.page] = map[int]pdfHeading{}
		}
		h.lines = 1
		heads[h.page][j] = h
		from[h.page] = j + 1
	}
	return heads, missing
}

// Limits of a heading found by its type.
const (
	headingMaxRunes = 150 // a longer "heading" is an emphasized paragraph
	headingMaxLines = 3
)

// typeHeadings finds the headings of a PDF without an outline by their
// type: a line set larger than the body text (at least 15% above the size
// most characters have), or in bold at the body size, not in a fixed-pitch
// face (code), that stands on its
// own (blank lines or other type around it), is short, and has a letter.
// Consecutive lines in the same type are one heading. Levels rank the
// heading types: the largest size is level 1; at one size, bold ranks
// higher; bold at the body size comes last. At most 6 levels; smaller
// types share level 6.
func typeHeadings(pages [][]pdfLine, furniture []map[int]bool) []map[int]pdfHeading {
	body := bodySize(pages)
	heads := make([]map[int]pdfHeading, len(pages))
	if body == 0 {
		return heads
	}
	type style struct {
		size float64
		bold bool
	}
	isHeadType := func(l pdfLine) bool {
		return !l.mono && (l.size >= body*1.15 || l.bold && l.size >= body*0.95)
	}
	var found []struct {
		page, line int
		h          pdfHeading
		st         style
	}
	for p, lines := range pages {
		for j := 0; j < len(lines); j++ {
			l := lines[j]
			if l.text == "" || !isHeadType(l) || furniture[p][j] {
				continue
			}
			st := style{l.size, l.bold}
			n := 1
			for j+n < len(lines) && n < headingMaxLines && lines[j+n].text != "" && (style{lines[j+n].size, lines[j+n].bold}) == st {
				n++
			}
			// The line after must not continue it in the same type.
			if j+n < len(lines) && lines[j+n].text != "" && (style{lines[j+n].size, lines[j+n].bold}) == st {
				j += n
				continue
			}
			var parts []string
			for k := j; k < j+n; k++ {
				parts = append(parts, strings.TrimSpace(lines[k].text))
			}
			text := strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
			if utf8.RuneCountInString(text) <= headingMaxRunes && strings.IndexFunc(text, unicode.IsLetter) >= 0 {
				found = append(found, struct {
					page, line int
					h          pdfHeading
					st         style
				}{p, j, pdfHeading{title: text, page: p, lines: n}, st})
			}
			j += n - 1
		}
	}
	var styles []style
	seen := map[style]bool{}
	for _, f := range found {
		if !seen[f.st] {
			seen[f.st] = true
			styles = append(styles, f.st)
		}
	}
	sort.Slice(styles, func(i, j int) bool {
		if styles[i].size != styles[j].size {
			return styles[i].size > styles[j].size
		}
		return styles[i].bold && !styles[j].bold
	})
	level := map[style]int{}
	for i, st := range styles {
		level[st] = min(i+1, 6)
	}
	for _, f := range found {
		if heads[f.page] == nil {
			heads[f.page] = map[int]pdfHeading{}
		}
		f.h.level = level[f.st]
		heads[f.page][f.line] = f.h
	}
	return heads
}

// bodySize is the font size most characters of the document are set in,
// or 0 when no size is known.
func bodySize(pages [][]pdfLine) float64 {
	weight := map[float64]int{}
	for _, lines := range pages {
		for _, l := range lines {
			if l.size > 0 {
				weight[l.size] += utf8.RuneCountInString(l.text)
			}
		}
	}
	body, most := 0.0, 0
	for size, n := range weight {
		if n > most || n == most && size < body {
			body, most = size, n
		}
	}
	return body
}

// pageFurniture finds the running headers and footers of a document of at
// least 3 pages: among the first and last two lines of each page of at
// least 5 lines, a line
// that recurs, digits aside (page numbers), case folded, on at least 3
// pages and at least 10% of them, has a letter, and either carries numbers
// that grow page after page (page numbers) and is not set larger than the
// body text, or is not set in the body size (a paragraph repeated page
// after page, "Chapter N" headings, a row of numbers are not furniture).
// It returns them by page and line.
func pageFurniture(pages [][]pdfLine) []map[int]bool {
	out := make([]map[int]bool, len(pages))
	if len(pages) < 3 {
		return out
	}
	body := bodySize(pages)
	// key folds case and white space and makes each run of digits "#":
	// "10 Report" and "2 Report" are one running footer.
	key := func(s string) string {
		var b strings.Builder
		digits := false
		for _, r := range strings.ToLower(strings.Join(strings.Fields(s), " ")) {
			if unicode.IsDigit(r) {
				if !digits {
					b.WriteByte('#')
				}
				digits = true
				continue
			}
			digits = false
			b.WriteRune(r)
		}
		return b.String()
	}
	// edges lists the indexes of a page's first two and last two lines;
	// none on a page of fewer than 5 lines, which would be all edge.
	edges := func(lines []pdfLine) []int {
		n := 0
		for _, l := range lines {
			if l.text != "" {
				n++
			}
		}
		if n < 5 {
			return nil
		}
		var idx []int
		for j := 0; j < len(lines) && len(idx) < 2; j++ {
			if lines[j].text != "" {
				idx = append(idx, j)
			}
		}
		var tail []int
		for j := len(lines) - 1; j >= 0 && len(tail) < 2; j-- {
			if lines[j].text != "" && !slices.Contains(idx, j) {
				tail = append(tail, j)
			}
		}
		return append(idx, tail...)
	}
	// Per key, the pages it is on and the numbers it carries there.
	type seen struct {
		pages int
		nums  [][]int
	}
	keys := map[string]*seen{}
	for _, lines := range pages {
		onPage := map[string]bool{}
		for _, j := range edges(lines) {
			k := key(lines[j].text)
			if onPage[k] {
				continue
			}
			onPage[k] = true
			if keys[k] == nil {
				keys[k] = &seen{}
			}
			keys[k].pages++
			keys[k].nums = append(keys[k].nums, lineNumbers(lines[j].text))
		}
	}
	min := max(3, (len(pages)+9)/10)
	running := func(k string, size float64) bool {
		sn := keys[k]
		if sn.pages < min || strings.IndexFunc(k, unicode.IsLetter) < 0 {
			return false // a table row of numbers is not furniture
		}
		if !strings.Contains(k, "#") {
			return size > 0 && size != body
		}
		if size > body && body > 0 {
			return false // set larger: a heading ("Chapter 2" atop its first page)
		}
		// Page numbers grow page after page; a "Chapter 2" heading on
		// each page of chapter 2 does not.
		for i := 1; i < len(sn.nums); i++ {
			if slices.Compare(sn.nums[i-1], sn.nums[i]) >= 0 {
				return false
			}
		}
		return true
	}
	for p, lines := range pages {
		for _, j := range edges(lines) {
			if running(key(lines[j].text), lines[j].size) {
				if out[p] == nil {
					out[p] = map[int]bool{}
				}
				out[p][j] = true
			}
		}
	}
	return out
}

// lineNumbers returns the numbers (runs of ASCII digits) of s, in order.
func lineNumbers(s string) []int {
	var out []int
	n, in := 0, false
	for _, r := range s + " " {
		if r >= '0' && r <= '9' {
			n, in = min(n*10+int(r-'0'), 1<<30), true
			continue
		}
		if in {
			out = append(out, n)
		}
		n, in = 0, false
	}
	return out
}

// addUnitPage appends to d the span [start, end) of d.Text, trimmed, on
// page page, unless it is empty or has no letter or digit (a stray "." or
// a rule of dashes: nothing to retrieve).
func addUnitPage(d *extract.Doc, start, end, page int) {
	if strings.IndexFunc(d.Text[start:end], isWordRune) < 0 {
		return
	}
	if start, end = span.Trim(d.Text, start, end); start < end {
		d.Units = append(d.Units, extract.Unit{Start: start, End: end, Page: page})
	}
}

// cleanLine cleans a line of PDFium's text: control and non-characters
// are dropped (PDFium marks soft hyphens and unknown glyphs with them),
// invalid UTF-8 is dropped, trailing white space is trimmed, and a line of
// white space only becomes "".
func cleanLine(l string) string {
	l = strings.ToValidUTF8(l, "")
	l = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return r
		case unicode.IsControl(r), r == 0xFFFE, r == 0xFFFF, r == utf8.RuneError:
			return -1
		}
		return r
	}, l)
	l = strings.TrimRightFunc(l, unicode.IsSpace)
	if strings.TrimSpace(l) == "" {
		return ""
	}
	return l
}

// tidyLines drops leading and trailing blank lines and makes each run of
// blank lines one.
func tidyLines(lines []pdfLine) []pdfLine {
	var out []pdfLine
	for _, l := range lines {
		if l.text == "" && (len(out) == 0 || out[len(out)-1].text == "") {
			continue
		}
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1].text == "" {
		out = out[:len(out)-1]
	}
	return out
}

// findLine returns the index of the first line at or after from whose
// text, white space collapsed and case folded, equals title or starts with
// it followed by a space (a heading line with a page number after it), or
// -1.
func findLine(lines []pdfLine, from int, title string) int {
	want := strings.ToLower(title)
	for j := from; j < len(lines); j++ {
		got := strings.ToLower(strings.Join(strings.Fields(lines[j].text), " "))
		if got == want || strings.HasPrefix(got, want+" ") {
			return j
		}
	}
	return -1
}

// typicalLineLength is the 80th percentile of the page's line lengths in
// runes: the width of a full line of body text.
func typicalLineLength(lines []pdfLine) int {
	var n []int
	for _, l := range lines {
		if l.text != "" {
			n = append(n, utf8.RuneCountInString(strings.TrimSpace(l.text)))
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

// headingsUnit returns the unit of a page whose only text with a letter
// or digit is in headings (a title page): from its first heading line to
// its last, so that the page has a block to cite. ok is false when the
// page has a paragraph with a letter or digit, or no heading line.
// text is the document's text so far; paras and heads are the page's.
func headingsUnit(text []byte, paras []extract.Unit, heads []extract.Heading, page int) (u extract.Unit, ok bool) {
	for _, p := range paras {
		if bytes.IndexFunc(text[p.Start:p.End], isWordRune) >= 0 {
			return u, false
		}
	}
	u = extract.Unit{Start: -1, Page: page}
	for _, h := range heads {
		if h.End > h.Start { // an outline entry not found on the page spans nothing
			if u.Start < 0 {
				u.Start = h.Start
			}
			u.End = h.End
		}
	}
	return u, u.Start >= 0
}

// isWordRune reports whether r is a letter or a digit.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// endsHyphenated reports whether a line ends with a hyphen at a line
// break: one PDFium took for hyphenation (pdfLine.hyphen), or a soft
// hyphen (U+00AD), which only ever marks where a word may be split.
func endsHyphenated(l pdfLine) bool {
	return l.hyphen && strings.HasSuffix(l.text, "-") || strings.HasSuffix(l.text, "\u00ad")
}

// keepHyphen reports whether the hyphen that ends line prev (see
// endsHyphenated) is part of the text, so that joining prev and next
// keeps it ("state-of-the-" + "art": "state-of-the-art"), or only split
// a word at the line end, so that it goes ("exam-" + "ple": "example").
// It is kept when
//   - it is not a soft hyphen (U+00AD always goes),
//   - and the part before it, back to the white space, already has a
//     hyphen ("state-of-the-"): a compound,
//   - or next starts with a digit ("COVID-" + "19"), or with an
//     upper-case letter after a lower-case one ("Jean-" + "Paul",
//     "non-" + "English"; in upper-case text, "INTRODUC-" + "TION" is a
//     split word),
//   - or the document writes the compound with its hyphen on one line
//     elsewhere and never the joined word ("self-contained" and never
//     "selfcontained"; words is pdfWords).
//
// Otherwise it goes: a lower-case word broken in two is the common case,
// and a compound the document writes only once, broken at a line end
// ("self-" + "contained"), loses its hyphen; the terms an analyzer makes
// of it are then one word instead of two.
func keepHyphen(prev, next string, words map[string]bool) bool {
	if strings.HasSuffix(prev, "\u00ad") {
		return false
	}
	frag := prev[strings.LastIndexFunc(prev, unicode.IsSpace)+1:]
	frag = strings.TrimSuffix(strings.TrimLeftFunc(frag, notWordRune), "-")
	if strings.ContainsRune(frag, '-') {
		return true
	}
	first, _ := utf8.DecodeRuneInString(next)
	last, _ := utf8.DecodeLastRuneInString(frag)
	if unicode.IsDigit(first) || unicode.IsUpper(first) && unicode.IsLower(last) {
		return true
	}
	head := next
	if k := strings.IndexFunc(next, func(r rune) bool { return !unicode.IsLetter(r) }); k >= 0 {
		head = next[:k]
	}
	return head != "" && words[strings.ToLower(frag+"-"+head)] && !words[strings.ToLower(frag+head)]
}

// notWordRune reports whether r is neither a letter, a digit nor a hyphen.
func notWordRune(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '-'
}

// pdfWords returns the words of the pages' lines, case folded: runs
// between white space, punctuation around them and hyphens at either end
// trimmed ("(self-contained)," is "self-contained"). keepHyphen looks
// compounds up in it.
func pdfWords(pages [][]pdfLine) map[string]bool {
	words := map[string]bool{}
	for _, lines := range pages {
		for _, l := range lines {
			for _, f := range strings.Fields(l.text) {
				if w := strings.Trim(strings.TrimFunc(f, notWordRune), "-"); w != "" {
					words[strings.ToLower(w)] = true
				}
			}
		}
	}
	return words
}
