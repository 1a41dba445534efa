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
//     bytes, preferring, in order, a line break (LF, CRLF or a lone CR), a
//     sentence end and a space
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

// Chunker names, as Spec.Name.
const (
	// Default is the section-aware, size-bounded chunker described above.
	Default = "default"
	// ParentChild ("small_to_big") makes small child blocks inside
	// parent sections: each child carries its parent's span (Block.Window)
	// so that search can hand the generator the whole section while the
	// citation stays on the child.
	ParentChild = "parent_child"
	// SentenceWindow makes one block per sentence, with the sentences
	// around it as its window.
	SentenceWindow = "sentence_window"
)

// Defaults of the chunkers' parameters.
const (
	DefaultChildMaxBytes  = 400  // parent_child: child bodies, bytes
	DefaultParentMaxBytes = 4000 // parent_child: parent sections, bytes
	DefaultWindow         = 3    // sentence_window: sentences each side
)

// Spec names a chunker and its parameters. Its String form is what the
// index manifest records, e.g. "default(max_bytes=1500)".
type Spec struct {
	Name string // Default, ParentChild or SentenceWindow
	// MaxBytes bounds a block's body, in bytes of UTF-8 text: the block of
	// default, the child of parent_child, the piece of a sentence longer
	// than it in sentence_window.
	MaxBytes int
	// ParentMaxBytes bounds a parent of parent_child, in bytes: a heading
	// section longer than it is split into several parents.
	ParentMaxBytes int
	// Window is the number of sentences each side of a sentence_window
	// block that its window holds.
	Window int
}

// DefaultSpec is the chunker used when none is configured.
var DefaultSpec = Spec{Name: Default, MaxBytes: DefaultMaxBytes}

// String returns the canonical form: "default(max_bytes=1500)",
// "parent_child(max_bytes=400,parent_max_bytes=4000)",
// "sentence_window(max_bytes=1500,window=3)".
func (s Spec) String() string {
	switch s.Name {
	case ParentChild:
		return fmt.Sprintf("%s(max_bytes=%d,parent_max_bytes=%d)", s.Name, s.MaxBytes, s.ParentMaxBytes)
	case SentenceWindow:
		return fmt.Sprintf("%s(max_bytes=%d,window=%d)", s.Name, s.MaxBytes, s.Window)
	}
	return fmt.Sprintf("%s(max_bytes=%d)", s.Name, s.MaxBytes)
}

var specPattern = regexp.MustCompile(`^([a-z_]+)(?:\(([a-z_]+=\d+(?:,[a-z_]+=\d+)*)?\))?$`)

// ParseSpec parses NAME or NAME(param=N,...): "default" (max_bytes),
// "parent_child" or its alias "small_to_big" (max_bytes of a child,
// parent_max_bytes), "sentence_window" (max_bytes, window). Missing
// parameters take their defaults. Unknown names or parameters, byte bounds
// below MinMaxBytes, a parent bound below the child's and a window below 0
// or above 50 are errors.
func ParseSpec(s string) (Spec, error) {
	m := specPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Spec{}, fmt.Errorf("chunker %q: want NAME or NAME(param=N,...); chunkers: default, parent_child, sentence_window", s)
	}
	var spec Spec
	allowed := map[string]bool{"max_bytes": true}
	switch m[1] {
	case Default:
		spec = DefaultSpec
	case ParentChild, "small_to_big":
		spec = Spec{Name: ParentChild, MaxBytes: DefaultChildMaxBytes, ParentMaxBytes: DefaultParentMaxBytes}
		allowed["parent_max_bytes"] = true
	case SentenceWindow:
		spec = Spec{Name: SentenceWindow, MaxBytes: DefaultMaxBytes, Window: DefaultWindow}
		allowed["window"] = true
	default:
		return Spec{}, fmt.Errorf("chunker %q: unknown; chunkers: default, parent_child (small_to_big), sentence_window", m[1])
	}
	seen := map[string]bool{}
	if m[2] != "" {
		for _, kv := range strings.Split(m[2], ",") {
			k, v, _ := strings.Cut(kv, "=")
			if !allowed[k] || seen[k] {
				return Spec{}, fmt.Errorf("chunker %q: parameter %s unknown or repeated for %s", s, k, spec.Name)
			}
			seen[k] = true
			n, err := strconv.Atoi(v)
			if err != nil {
				return Spec{}, fmt.Errorf("chunker %q: %s: %v", s, k, err)
			}
			switch k {
			case "max_bytes":
				spec.MaxBytes = n
			case "parent_max_bytes":
				spec.ParentMaxBytes = n
			case "window":
				spec.Window = n
			}
		}
	}
	if spec.MaxBytes < MinMaxBytes {
		return Spec{}, fmt.Errorf("chunker %q: max_bytes must be an integer ≥ %d", s, MinMaxBytes)
	}
	if spec.Name == ParentChild && spec.ParentMaxBytes < spec.MaxBytes {
		return Spec{}, fmt.Errorf("chunker %q: parent_max_bytes (%d) must be at least max_bytes (%d)", s, spec.ParentMaxBytes, spec.MaxBytes)
	}
	if spec.Name == SentenceWindow && (spec.Window < 0 || spec.Window > 50) {
		return Spec{}, fmt.Errorf("chunker %q: window must be from 0 to 50 sentences", s)
	}
	return spec, nil
}

// Chunker splits an extracted document into blocks. Live ingest and
// rebuild both call it (index derives every document through one
// function), so a rebuild makes the blocks an ingest made.
type Chunker interface {
	Chunk(doc *extract.Doc) []Block
}

// Chunker returns the chunker s names.
func (s Spec) Chunker() Chunker {
	switch s.Name {
	case ParentChild:
		return parentChild{child: s.MaxBytes, parent: s.ParentMaxBytes}
	case SentenceWindow:
		return sentenceWindow{max: s.MaxBytes, window: s.Window}
	}
	return defaultChunker{max: s.MaxBytes}
}

type defaultChunker struct{ max int }

func (c defaultChunker) Chunk(doc *extract.Doc) []Block { return Split(doc, c.max) }

// Block is a span of a document's text with its place in the structure.
type Block struct {
	Start, End  int      // bytes into the document text, End exclusive
	HeadingPath []string // headings open at Start, outermost first; nil when none
	Page        int      // 1-based; 0 when the format has no pages
	// The window of a small-to-big block: Window is the span of the text
	// the generator should get (the parent section, or the sentences
	// around), which contains [Start, End); Units the content units it
	// covers, [first, last+1); Parent numbers the parent in the document
	// (parent_child; -1 otherwise); Heading is the parent's innermost
	// heading. All zero (Parent -1 is not set) for the default chunker:
	// HasWindow tells.
	Window  [2]int
	Units   [2]int
	Parent  int
	Heading string
	// TableHeader is the header row of the table the block starts inside,
	// when the block does not hold it (a long table cut into blocks): see
	// extract.Unit.Header. BlockContext names it.
	TableHeader string
}

// HasWindow reports whether b carries a window.
func (b Block) HasWindow() bool { return b.Window[1] > b.Window[0] }

// Split cuts doc into blocks with the default chunker; see the package
// documentation for the rules. maxBytes must be at least MinMaxBytes.
// The blocks carry no window.
func Split(doc *extract.Doc, maxBytes int) []Block {
	var blocks []Block
	cur := Block{Start: -1}
	curSection := -1
	// section: the number of headings that start before the unit, or at
	// it (a heading over an empty section is a unit, of its own section).
	section := 0
	paths := pathCursor{headings: doc.Headings}
	flush := func() {
		if cur.Start >= 0 {
			cur.HeadingPath = paths.at(cur.Start)
			blocks = append(blocks, cur)
		}
		cur = Block{Start: -1}
	}
	for _, u := range doc.Units {
		for section < len(doc.Headings) && doc.Headings[section].Start <= u.Start {
			section++
		}
		for _, p := range pieces(doc.Text, u.Start, u.End, maxBytes) {
			if cur.Start >= 0 && section == curSection && u.Page == cur.Page && p[1]-cur.Start <= maxBytes &&
				onlySpace(doc.Text[cur.End:p[0]]) {
				cur.End = p[1]
				continue
			}
			flush()
			cur = Block{Start: p[0], End: p[1], Page: u.Page, TableHeader: continued(doc.Text, u, p[0])}
			curSection = section
		}
	}
	flush()
	return blocks
}

// continued returns u's table header when the piece of u starting at
// start does not begin with it, else "".
func continued(text string, u extract.Unit, start int) string {
	if u.Header == "" || strings.HasPrefix(text[start:], u.Header) {
		return ""
	}
	return u.Header
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
	if i := lastLineEnd(window, limit); i >= half {
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

// lastLineEnd returns the index of the last LF, or lone CR (an old Mac
// line end), in window[:limit], or -1. window[limit], when there, tells
// whether a CR ending window[:limit] is followed by an LF (CRLF).
func lastLineEnd(window string, limit int) int {
	i := strings.LastIndexByte(window[:limit], '\n')
	for j := limit - 1; j > i; j-- {
		if window[j] == '\r' && (j+1 >= len(window) || window[j+1] != '\n') {
			return j
		}
	}
	return i
}

// HeadingPath returns the texts of the headings open at offset: each heading
// that starts before offset opens, and closes every open heading of its level
// or deeper. Skipped levels leave no gap (an H3 under an H1 is the second
// element). Headings with empty text are left out, and each text is capped
// (extract.ClipHeading).
func HeadingPath(headings []extract.Heading, offset int) []string {
	c := pathCursor{headings: headings}
	return c.at(offset)
}

// pathCursor gives the heading paths (HeadingPath) at offsets that never
// decrease, in time linear in the headings passed and the paths' lengths:
// a chunker asks once per block, and a document may have as many headings
// as blocks.
type pathCursor struct {
	headings []extract.Heading
	next     int               // headings[:next] start before the last offset
	stack    []extract.Heading // the open headings
	path     []string          // the texts of stack; nil when stale
	fresh    bool
}

// at returns the path at offset, which is no smaller than the last one.
// Blocks may share the returned slice; it is never modified.
func (c *pathCursor) at(offset int) []string {
	for c.next < len(c.headings) && c.headings[c.next].Start < offset {
		h := c.headings[c.next]
		c.next++
		for len(c.stack) > 0 && c.stack[len(c.stack)-1].Level >= h.Level {
			c.stack = c.stack[:len(c.stack)-1]
		}
		c.stack = append(c.stack, h)
		c.fresh = false
	}
	if !c.fresh {
		c.path = nil
		for _, h := range c.stack {
			if h.Text != "" {
				c.path = append(c.path, extract.ClipHeading(h.Text))
			}
		}
		c.fresh = true
	}
	return c.path
}

// Separator joins the parts of a context.
const Separator = " › " // U+203A with a space either side

// BlockContext returns the structural context of b in a document titled
// title: Context of its heading path and page, with the table header it
// lacks (Block.TableHeader) after the headings, so that every block cut
// from a long table is retrieved with its column names.
func BlockContext(title string, b Block) string {
	path := b.HeadingPath
	if b.TableHeader != "" {
		path = append(path[:len(path):len(path)], b.TableHeader)
	}
	return Context(title, path, b.Page)
}

// MaxContextHeadings caps the headings a context names: the innermost
// ones are kept.
const MaxContextHeadings = 8

// Context returns the structural context "[<title> › <heading path> ›
// p.<page>]". Parts empty after trimming are dropped, a part equal to the
// part before it (ignoring case) is dropped, and page 0 adds no part. With no
// parts left the context is "". Every part is capped (extract.ClipHeading)
// and at most MaxContextHeadings headings are named, so a context is never
// longer than a few KB whatever the document holds.
func Context(title string, headingPath []string, page int) string {
	if len(headingPath) > MaxContextHeadings {
		headingPath = headingPath[len(headingPath)-MaxContextHeadings:]
	}
	parts := make([]string, 0, len(headingPath)+2)
	add := func(p string) {
		p = strings.TrimSpace(extract.ClipHeading(p))
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
