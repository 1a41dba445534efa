// Package chunk splits an extracted document into blocks and builds each
// block's structural context.
//
// The default chunker is section aware and size bounded:
//   - a block never crosses a section heading or a page boundary, so every
//     block has one heading path and one page;
//   - consecutive content units (paragraphs, lists, code blocks, …) of one
//     section are packed greedily into a block while the block's span stays
//     within MaxBytes bytes of text (white space between units included)
//     and only white space separates them, so text the extractor left out
//     (an HTML comment, a link definition) never enters a body;
//   - a unit longer than MaxBytes is cut into pieces of at most MaxBytes
//     bytes, preferring, in order, a line break, a sentence end and a space
//     in the second half of the window, then any space, then the last UTF-8
//     rune boundary; a cut never falls inside a UTF-8 sequence.
//
// Every block is a span [Start, End) of the document text with no leading or
// trailing white space, so text[Start:End] is the block's verbatim body.
package chunk

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/span"
)

// DefaultMaxBytes is the default upper bound of a block's body, in bytes of
// UTF-8 text (about 250 English words).
const DefaultMaxBytes = 1500

// MinMaxBytes is the smallest MaxBytes a Spec accepts.
const MinMaxBytes = 64

// Spec names a chunker and its parameters. Its String form is what the
// index manifest records, e.g. "default(max_bytes=1500)".
type Spec struct {
	Name     string // "default"
	MaxBytes int    // upper bound of a block body, bytes
}

// DefaultSpec is the chunker used when none is configured.
var DefaultSpec = Spec{Name: "default", MaxBytes: DefaultMaxBytes}

// String returns the canonical form, e.g. "default(max_bytes=1500)".
func (s Spec) String() string { return fmt.Sprintf("%s(max_bytes=%d)", s.Name, s.MaxBytes) }

var specPattern = regexp.MustCompile(`^([a-z_]+)(?:\(max_bytes=(\d+)\))?$`)

// ParseSpec parses "default" or "default(max_bytes=N)". A missing max_bytes
// means DefaultMaxBytes. Unknown names and N below MinMaxBytes are errors.
func ParseSpec(s string) (Spec, error) {
	m := specPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Spec{}, fmt.Errorf("chunker %q: want NAME or NAME(max_bytes=N); chunkers: default", s)
	}
	if m[1] != "default" {
		return Spec{}, fmt.Errorf("chunker %q: unknown; chunkers: default", m[1])
	}
	spec := Spec{Name: m[1], MaxBytes: DefaultMaxBytes}
	if m[2] != "" {
		n, err := strconv.Atoi(m[2])
		if err != nil || n < MinMaxBytes {
			return Spec{}, fmt.Errorf("chunker %q: max_bytes must be an integer ≥ %d", s, MinMaxBytes)
		}
		spec.MaxBytes = n
	}
	return spec, nil
}

// Block is a span of a document's text with its place in the structure.
type Block struct {
	Start, End  int      // bytes into the document text, End exclusive
	HeadingPath []string // headings open at Start, outermost first; nil when none
	Page        int      // 1-based; 0 when the format has no pages
}

// Split cuts doc into blocks with the default chunker; see the package
// documentation for the rules. maxBytes must be at least MinMaxBytes.
func Split(doc *extract.Doc, maxBytes int) []Block {
	var blocks []Block
	cur := Block{Start: -1}
	curSection := -1
	section := 0 // number of headings that start before the unit
	flush := func() {
		if cur.Start >= 0 {
			cur.HeadingPath = HeadingPath(doc.Headings, cur.Start)
			blocks = append(blocks, cur)
		}
		cur = Block{Start: -1}
	}
	for _, u := range doc.Units {
		for section < len(doc.Headings) && doc.Headings[section].Start < u.Start {
			section++
		}
		for _, p := range pieces(doc.Text, u.Start, u.End, maxBytes) {
			if cur.Start >= 0 && section == curSection && u.Page == cur.Page && p[1]-cur.Start <= maxBytes &&
				onlySpace(doc.Text[cur.End:p[0]]) {
				cur.End = p[1]
				continue
			}
			flush()
			cur = Block{Start: p[0], End: p[1], Page: u.Page}
			curSection = section
		}
	}
	flush()
	return blocks
}

// onlySpace reports whether s is all ASCII white space.
func onlySpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if !span.IsSpace(s[i]) {
			return false
		}
	}
	return true
}

// pieces cuts [start, end) of text into trimmed spans of at most maxBytes.
func pieces(text string, start, end, maxBytes int) [][2]int {
	var out [][2]int
	for end-start > maxBytes {
		cut := cutPoint(text[start:start+maxBytes+1], maxBytes) + start
		s, e := span.Trim(text, start, cut)
		if s < e {
			out = append(out, [2]int{s, e})
		}
		start = cut
		for start < end && span.IsSpace(text[start]) {
			start++
		}
	}
	if s, e := span.Trim(text, start, end); s < e {
		out = append(out, [2]int{s, e})
	}
	return out
}

// cutPoint returns where to end a piece of window[:limit] (window holds one
// byte more, to see what follows the limit): after a line break, a sentence
// end or a space in the second half, else after any space, else at the last
// rune boundary at or before limit.
func cutPoint(window string, limit int) int {
	half := limit / 2
	if i := strings.LastIndexByte(window[:limit], '\n'); i >= half {
		return i + 1
	}
	for i := limit - 1; i >= half; i-- {
		if (window[i] == '.' || window[i] == '!' || window[i] == '?') && span.IsSpace(window[i+1]) {
			return i + 1
		}
	}
	for i := limit - 1; i > 0; i-- {
		if span.IsSpace(window[i]) {
			return i + 1
		}
	}
	i := limit
	for i > 1 && !utf8.RuneStart(window[i]) {
		i--
	}
	return i
}

// HeadingPath returns the texts of the headings open at offset: each heading
// that starts before offset opens, and closes every open heading of its level
// or deeper. Skipped levels leave no gap (an H3 under an H1 is the second
// element). Headings with empty text are left out.
func HeadingPath(headings []extract.Heading, offset int) []string {
	var stack []extract.Heading
	for _, h := range headings {
		if h.Start >= offset {
			break
		}
		for len(stack) > 0 && stack[len(stack)-1].Level >= h.Level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, h)
	}
	var path []string
	for _, h := range stack {
		if h.Text != "" {
			path = append(path, h.Text)
		}
	}
	return path
}

// Separator joins the parts of a context.
const Separator = " › " // U+203A with a space either side

// Context returns the structural context "[<title> › <heading path> ›
// p.<page>]". Parts empty after trimming are dropped, a part equal to the
// part before it (ignoring case) is dropped, and page 0 adds no part. With no
// parts left the context is "".
func Context(title string, headingPath []string, page int) string {
	parts := make([]string, 0, len(headingPath)+2)
	add := func(p string) {
		p = strings.TrimSpace(p)
		if p == "" || (len(parts) > 0 && strings.EqualFold(parts[len(parts)-1], p)) {
			return
		}
		parts = append(parts, p)
	}
	add(title)
	for _, h := range headingPath {
		add(h)
	}
	if page > 0 {
		add("p." + strconv.Itoa(page))
	}
	if len(parts) == 0 {
		return ""
	}
	return "[" + strings.Join(parts, Separator) + "]"
}
