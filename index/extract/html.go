package extract

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"

	"github.com/escurel/escurel/internal/span"
)

// HTML extracts an HTML document. It is parsed as a browser parses it (the
// HTML5 algorithm of golang.org/x/net/html), so unclosed and misnested tags
// still give text.
//
// Encoding: a byte order mark decides (UTF-8 or UTF-16). Without one, the
// first <meta charset> or <meta http-equiv="Content-Type"> of the head, before
// any body content, names the charset; a charset other than UTF-8 (any WHATWG
// label: windows-1252, ISO-8859-x, Shift_JIS, GBK, …) is transcoded to
// UTF-8. A declared "utf-16" is read as UTF-8, as browsers do. Undeclared
// input must be UTF-8: nothing is guessed. Invalid UTF-8 fails with
// ErrInvalidUTF8 (naming a declared charset that is not a known label), a
// charset that cannot be decoded (ISO-2022-KR, HZ-GB-2312: WHATWG's
// "replacement") with ErrInvalidUTF8 naming it, a NUL with ErrBinary, markup
// nested deeper than 512 elements with ErrCorrupt.
//
// Doc.Text is built: the text of each block (p, div, section, li, dt, dd,
// pre, table, heading, …) is a paragraph, and paragraphs are separated by a
// blank line ("\n\n"). Outside <pre>, <textarea>, <listing>, <xmp> and
// <plaintext>, runs of white space (no-break spaces included) collapse to
// one space, as a browser renders them; inside they are kept verbatim.
// <br> is a line break. Character references are decoded.
//
// Units: each paragraph is a unit, except that these are one unit each,
// their inner blocks joined by "\n": an item (li, dt, dd; a nested list
// ends the item's unit and its items are units of their own), a <pre>-like
// block, and a data table, whose rows are lines with their cells joined by
// " | " (a caption is a line too; empty rows are left out). A table that
// holds a heading or another table, or has role presentation or none, is
// layout: its cells are blocks like div. Every unit is a trimmed span of
// Doc.Text; Page is 0, as is Doc.Pages.
//
// Headings: h1 to h6 outside lists, data tables, block quotes and <pre> are
// Headings, their text on one line (white space collapsed, <br> and inner
// blocks a space) so that Doc.Text[Start:End] == Text; they are in the text
// but not units, unless the document has no other content. Headings inside
// lists and block quotes are content: lines of the item, paragraphs of the
// quote.
//
// Not text: comments, <head> (but see Title), script, style, noscript,
// template, svg, iframe, object, embed, canvas, audio, video, img, form
// controls (input, select, option, button; a button inside a section
// heading, the accordion pattern, is kept), ruby annotations (rt, rp), a <dialog> that is
// not open, and any element with the hidden attribute (not
// hidden="until-found", which find-in-page reveals), aria-hidden="true", or
// an inline style display:none or visibility:hidden/collapse. MathML is
// replaced by its alttext attribute, or dropped. Page chrome is dropped: nav,
// elements with role navigation, banner or contentinfo, and a <header> or
// <footer> that is not inside article, aside, main, section (or an element
// of role article, complementary, main or region), the elements that ARIA
// maps to the page's banner and content info; the header of an article,
// often holding its h1, is kept. A page with no text but its chrome is
// extracted with the chrome kept.
//
// Title is the first <title> (white space collapsed) if not blank, else the
// first h1 heading, else the file name without extension. Language is the
// <html> element's lang (else xml:lang) attribute when it is well-formed
// BCP 47 syntax, trimmed, underscores read as hyphens and case kept, else
// "". A document left without text fails with ErrEmpty.
func HTML(name string, data []byte) (*Doc, error) {
	return htmlExtract(context.Background(), name, data)
}

// htmlMaxNodes caps the nodes of an HTML document (elements, text runs,
// comments): the parsed tree takes a few hundred bytes per node (25 MiB of
// "<p>a" would take 2 GB), and a real page has thousands.
const htmlMaxNodes = 2_000_000

// htmlExtract is HTML under ctx: it stops with ctx's error once ctx ends
// (checked while counting the elements, before the tree is built).
func htmlExtract(ctx context.Context, name string, data []byte) (*Doc, error) {
	data, note, err := htmlDecode(data)
	if err != nil {
		return nil, err
	}
	off, err := checkText(data)
	if err != nil {
		if note != "" {
			return nil, fmt.Errorf("%w (%s)", err, note)
		}
		return nil, err
	}
	if err := htmlCountNodes(ctx, data[off:]); err != nil {
		return nil, err
	}
	root, err := html.Parse(bytes.NewReader(data[off:]))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	doc := htmlBody(root, false)
	if len(doc.Units) == 0 && len(doc.Headings) == 0 {
		// Nothing but page chrome: that is the content.
		doc = htmlBody(root, true)
	}
	if len(doc.Units) == 0 {
		// Headings and nothing else: the headings are the content.
		for _, h := range doc.Headings {
			doc.Units = append(doc.Units, Unit{Start: h.Start, End: h.End})
		}
	}
	if len(doc.Units) == 0 {
		return nil, fmt.Errorf("%w: no visible text in the HTML", ErrEmpty)
	}
	doc.Title, _ = htmlTitle(root)
	for _, h := range doc.Headings {
		if doc.Title == "" && h.Level == 1 {
			doc.Title = h.Text
		}
	}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	doc.Language = htmlLanguage(root)
	return doc, nil
}

// htmlDecode transcodes data to UTF-8 by its byte order mark or declared
// charset (see HTML). note, when not empty, says how data was read, for an
// error about the result.
// htmlCountNodes fails with ErrTooLarge when data would parse into more
// than htmlMaxNodes nodes, and with ctx's error once ctx ends.
func htmlCountNodes(ctx context.Context, data []byte) error {
	z := html.NewTokenizer(bytes.NewReader(data))
	n := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return nil // io.EOF, or an error html.Parse reports itself
		case html.StartTagToken, html.SelfClosingTagToken, html.TextToken, html.CommentToken, html.DoctypeToken:
			n++
			if n > htmlMaxNodes {
				return fmt.Errorf("%w: more than %d HTML nodes (elements, text runs, comments)", ErrTooLarge, htmlMaxNodes)
			}
			if n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
	}
}

func htmlDecode(data []byte) (out []byte, note string, err error) {
	var label string
	bom := true
	switch {
	case bytes.HasPrefix(data, []byte("\uFEFF")):
		return data, "", nil
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		label, data = "utf-16be", data[2:]
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		label, data = "utf-16le", data[2:]
	default:
		bom = false
		label = declaredCharset(data)
		if label == "" {
			return data, "", nil
		}
	}
	enc, encName := charset.Lookup(label)
	switch {
	case enc == nil:
		return data, fmt.Sprintf("declared charset %q is not a known label", label), nil
	case encName == "utf-8":
		return data, "", nil
	case encName == "replacement":
		return nil, "", fmt.Errorf("%w: charset %q is not supported", ErrInvalidUTF8, label)
	case strings.HasPrefix(encName, "utf-16") && !bom:
		// Declared in a <meta>, which UTF-16 text could not hold: the
		// HTML standard reads such a page as UTF-8.
		return data, "", nil
	}
	if strings.HasPrefix(encName, "utf-16") && len(data)%2 == 1 {
		return nil, "", fmt.Errorf("%w: odd number of bytes for %s", ErrInvalidUTF8, encName)
	}
	if encName == "x-user-defined" {
		enc, encName = charset.Lookup("windows-1252") // as the HTML standard says
	}
	out, err = enc.NewDecoder().Bytes(data)
	if err != nil {
		return nil, "", fmt.Errorf("%w: cannot decode as %s: %v", ErrInvalidUTF8, encName, err)
	}
	return out, "decoded from " + encName, nil
}

// declaredCharset returns the charset label of the first <meta charset> or
// <meta http-equiv="Content-Type" content="…; charset=…"> of the head: before
// </head>, <body> or any other tag that starts body content. A label that
// charset.Lookup knows wins over an earlier unknown one, which is returned
// when there is no known one.
func declaredCharset(data []byte) string {
	z := html.NewTokenizer(bytes.NewReader(data))
	unknown := ""
	for {
		switch z.Next() {
		case html.ErrorToken:
			return unknown
		case html.EndTagToken:
			if name, _ := z.TagName(); atom.Lookup(name) == atom.Head {
				return unknown
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch atom.Lookup(name) {
			case atom.Meta:
				if label := metaCharset(z, hasAttr); label != "" {
					if enc, _ := charset.Lookup(label); enc != nil {
						return label
					}
					if unknown == "" {
						unknown = label
					}
				}
			case atom.Html, atom.Head, atom.Title, atom.Link, atom.Style, atom.Script,
				atom.Noscript, atom.Base, atom.Basefont, atom.Bgsound, atom.Template:
			default:
				return unknown
			}
		}
	}
}

// metaCharset returns the charset a <meta> tag declares, or "".
func metaCharset(z *html.Tokenizer, hasAttr bool) string {
	var cs, content string
	pragma := false
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case "charset":
			if cs == "" {
				cs = strings.TrimSpace(string(v))
			}
		case "http-equiv":
			pragma = pragma || strings.EqualFold(strings.TrimSpace(string(v)), "content-type")
		case "content":
			if content == "" {
				content = string(v)
			}
		}
	}
	if cs != "" {
		return cs
	}
	if pragma {
		return contentCharset(content)
	}
	return ""
}

// contentCharset returns the charset parameter of a Content-Type value, as
// the HTML standard's "extracting a character encoding from a meta element"
// reads it, or "".
func contentCharset(s string) string {
	lower := strings.ToLower(s)
	for {
		i := strings.Index(lower, "charset")
		if i < 0 {
			return ""
		}
		s, lower = s[i+len("charset"):], lower[i+len("charset"):]
		rest := strings.TrimLeft(s, " \t\n\f\r")
		if !strings.HasPrefix(rest, "=") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " \t\n\f\r")
		if rest == "" {
			return ""
		}
		if q := rest[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(rest[1:], q)
			if end < 0 {
				return ""
			}
			return strings.TrimSpace(rest[1 : 1+end])
		}
		if end := strings.IndexAny(rest, "; \t\n\f\r"); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
}

// htmlBody builds the text, units and headings of a parsed document.
// keepChrome keeps nav and page-level header and footer.
func htmlBody(root *html.Node, keepChrome bool) *Doc {
	w := &htmlWriter{keepChrome: keepChrome, unitStart: -1}
	w.walk(root)
	w.block()
	return &Doc{Text: w.text.String(), Headings: w.headings, Units: w.units}
}

// htmlWriter builds a document's text from its parse tree, in one walk.
// Text goes into line, the paragraph or line being built, which a block
// boundary flushes into text: as a paragraph of its own, or as the next
// line of the open unit (inside li, dt, dd, pre or a data table).
type htmlWriter struct {
	keepChrome bool

	text      strings.Builder // Doc.Text
	units     []Unit
	headings  []Heading
	unitStart int // offset in text of the open unit's first line, -1 before it

	line    strings.Builder
	space   bool // a collapsed space is due before the next character of line
	linePre bool // line holds preformatted text
	row     []string

	unit    int // depth of unit containers: li, dt, dd, pre, data tables
	pre     int // depth of pre-like elements: text kept verbatim
	flat    int // depth of headings and data-table cells: all on one line
	heading int // depth of section headings
	quote   int // depth of blockquote: headings are content
	sect    int // depth of sectioning elements: header and footer are content
	table   int // depth of data tables
}

// asciiSpace is the white space span.Trim trims.
const asciiSpace = " \t\n\r\f\v"

// htmlBlocks are the elements that start and end a paragraph.
var htmlBlocks = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Body: true, atom.Caption: true, atom.Center: true, atom.Dd: true,
	atom.Details: true, atom.Dialog: true, atom.Dir: true, atom.Div: true,
	atom.Dl: true, atom.Dt: true, atom.Fieldset: true, atom.Figcaption: true,
	atom.Figure: true, atom.Footer: true, atom.Form: true, atom.H1: true,
	atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Header: true, atom.Hgroup: true, atom.Hr: true, atom.Html: true,
	atom.Legend: true, atom.Li: true, atom.Listing: true, atom.Main: true,
	atom.Menu: true, atom.Nav: true, atom.Ol: true, atom.P: true,
	atom.Plaintext: true, atom.Pre: true, atom.Search: true, atom.Section: true,
	atom.Summary: true, atom.Table: true, atom.Tbody: true, atom.Td: true,
	atom.Textarea: true, atom.Tfoot: true, atom.Th: true, atom.Thead: true,
	atom.Tr: true, atom.Ul: true, atom.Xmp: true,
}

// htmlDropped are the elements whose content is never text.
var htmlDropped = map[atom.Atom]bool{
	atom.Head: true, atom.Title: true, atom.Script: true, atom.Style: true,
	atom.Noscript: true, atom.Template: true, atom.Iframe: true, atom.Object: true,
	atom.Embed: true, atom.Canvas: true, atom.Audio: true, atom.Video: true,
	atom.Img: true, atom.Picture: true, atom.Input: true, atom.Select: true,
	atom.Option: true, atom.Optgroup: true, atom.Datalist: true, atom.Rt: true,
	atom.Rp: true, atom.Noembed: true, atom.Noframes: true, atom.Frameset: true,
}

func (w *htmlWriter) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		w.addText(n.Data)
		return
	case html.DocumentNode:
		w.children(n)
		return
	case html.ElementNode:
	default: // comments, doctypes
		return
	}
	switch n.Namespace {
	case "svg":
		return
	case "math":
		w.addText(attr(n, "alttext"))
		return
	}
	if w.skip(n) {
		return
	}
	if sectioning(n) {
		w.sect++
		defer func() { w.sect-- }()
	}
	a := n.DataAtom
	switch a {
	case atom.Br:
		w.lineBreak()
		return
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if w.flat == 0 && w.pre == 0 && w.unit == 0 && w.quote == 0 {
			w.block()
			w.flat++
			w.heading++
			w.children(n)
			w.flat--
			w.heading--
			w.addHeading(int(n.Data[1] - '0'))
			return
		}
	case atom.Li, atom.Dt, atom.Dd:
		if w.flat == 0 && w.pre == 0 {
			w.openUnit()
			w.children(n)
			w.closeUnit()
			return
		}
	case atom.Pre, atom.Listing, atom.Xmp, atom.Plaintext, atom.Textarea:
		if w.flat == 0 && w.pre == 0 {
			w.group(func() {
				w.pre++
				w.children(n)
				w.pre--
			})
			return
		}
	case atom.Table:
		if w.flat == 0 && w.pre == 0 && !layoutTable(n) {
			w.group(func() {
				w.table++
				w.children(n)
				w.table--
			})
			return
		}
	case atom.Tr:
		if w.table > 0 && w.flat == 0 {
			w.block()
			w.row = w.row[:0]
			w.children(n)
			if strings.Join(w.row, "") != "" {
				w.emit(joinCells(w.row))
			}
			w.row = w.row[:0]
			return
		}
	case atom.Td, atom.Th:
		if w.table > 0 && w.flat == 0 {
			w.block()
			w.flat++
			w.children(n)
			w.flat--
			w.row = append(w.row, w.takeLine())
			return
		}
	case atom.Blockquote:
		w.quote++
		defer func() { w.quote-- }()
	}
	if htmlBlocks[a] {
		w.block()
		w.children(n)
		w.block()
		return
	}
	w.children(n)
}

func (w *htmlWriter) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c)
	}
}

// skip reports whether element n and its content are not text.
func (w *htmlWriter) skip(n *html.Node) bool {
	switch a := n.DataAtom; {
	case htmlDropped[a]:
		return true
	case a == atom.Button && w.heading == 0:
		return true
	case a == atom.Nav && !w.keepChrome:
		return true
	case (a == atom.Header || a == atom.Footer) && !w.keepChrome && w.sect == 0:
		return true
	case a == atom.Dialog && !hasAttr(n, "open"):
		return true
	}
	if !w.keepChrome {
		switch role(n) {
		case "navigation", "banner", "contentinfo":
			return true
		}
	}
	return hidden(n)
}

// sectioning reports whether n scopes the header and footer inside it to
// itself, so that they are not the page's.
func sectioning(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Article, atom.Aside, atom.Main, atom.Nav, atom.Section:
		return true
	}
	switch role(n) {
	case "article", "complementary", "main", "navigation", "region":
		return true
	}
	return false
}

// hidden reports whether n is not rendered by its attributes: hidden,
// aria-hidden="true", or an inline style display:none or
// visibility:hidden or collapse.
func hidden(n *html.Node) bool {
	for _, at := range n.Attr {
		if at.Namespace != "" {
			continue
		}
		v := strings.ToLower(strings.TrimSpace(at.Val))
		switch at.Key {
		case "hidden":
			if v != "until-found" {
				return true
			}
		case "aria-hidden":
			if v == "true" {
				return true
			}
		case "style":
			var display, visibility string // the last declaration wins
			for decl := range strings.SplitSeq(v, ";") {
				prop, val, _ := strings.Cut(decl, ":")
				val = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(val), "!important"))
				switch strings.TrimSpace(prop) {
				case "display":
					display = val
				case "visibility":
					visibility = val
				}
			}
			if display == "none" || visibility == "hidden" || visibility == "collapse" {
				return true
			}
		}
	}
	return false
}

// layoutTable reports whether table t lays out a page rather than holding
// data: it has role presentation or none, or holds a heading or a table.
func layoutTable(t *html.Node) bool {
	switch role(t) {
	case "presentation", "none":
		return true
	}
	var found func(*html.Node) bool
	found = func(n *html.Node) bool {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Namespace == "" {
				switch c.DataAtom {
				case atom.Table, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
					return true
				}
			}
			if found(c) {
				return true
			}
		}
		return false
	}
	return found(t)
}

// attr returns the value of n's attribute key, or "".
func attr(n *html.Node, key string) string {
	for _, at := range n.Attr {
		if at.Namespace == "" && at.Key == key {
			return at.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, at := range n.Attr {
		if at.Namespace == "" && at.Key == key {
			return true
		}
	}
	return false
}

// role returns the first token of n's role attribute, lower case.
func role(n *html.Node) string {
	f := strings.Fields(strings.ToLower(attr(n, "role")))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// collapsible reports whether r is white space that collapses: HTML's
// white space, and the no-break space, which would otherwise leave
// paragraphs of nothing but &nbsp;.
func collapsible(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\u00A0':
		return true
	}
	return false
}

// visible reports whether r shows as something: not white space, a
// control or a format character (such as a zero-width space).
func visible(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r)
}

// addText appends the text of a text node to line.
func (w *htmlWriter) addText(s string) {
	if w.pre > 0 && w.flat == 0 {
		w.line.WriteString(s)
		w.linePre = true
		return
	}
	for _, r := range s {
		if collapsible(r) {
			w.space = true
			continue
		}
		if w.space {
			if l := w.line.String(); l != "" && l[len(l)-1] != '\n' {
				w.line.WriteByte(' ')
			}
			w.space = false
		}
		w.line.WriteRune(r)
	}
}

// lineBreak is a <br>: a new line, a space on a one-line heading or cell.
// More than one blank line in a row is kept as one.
func (w *htmlWriter) lineBreak() {
	switch {
	case w.flat > 0:
		w.space = true
	case w.pre > 0:
		w.line.WriteByte('\n')
		w.linePre = true
	default:
		if l := w.line.String(); l != "" && !strings.HasSuffix(l, "\n\n") {
			w.line.WriteByte('\n')
		}
		w.space = false
	}
}

// block is a block boundary: it ends the line, or starts a new line in
// preformatted text, or is a space on a one-line heading or cell.
func (w *htmlWriter) block() {
	switch {
	case w.flat > 0:
		w.space = true
	case w.pre > 0:
		if l := w.line.String(); l != "" && l[len(l)-1] != '\n' {
			w.line.WriteByte('\n')
		}
	default:
		if s := w.takeLine(); s != "" {
			w.emit(s)
		}
	}
}

// takeLine empties line and returns its text trimmed, or "" when nothing
// in it is visible. Preformatted text keeps the indentation of its first
// line.
func (w *htmlWriter) takeLine() string {
	s, pre := w.line.String(), w.linePre
	w.line.Reset()
	w.space, w.linePre = false, false
	if pre {
		s = strings.TrimRight(s, asciiSpace)
		lead := len(s) - len(strings.TrimLeft(s, asciiSpace))
		s = s[strings.LastIndexByte(s[:lead], '\n')+1:]
	} else {
		s = strings.Trim(s, asciiSpace)
	}
	if strings.IndexFunc(s, visible) < 0 {
		return ""
	}
	return s
}

// emit writes a line: the next line of the open unit, or a paragraph and
// unit of its own.
func (w *htmlWriter) emit(s string) {
	if w.unit > 0 && w.unitStart >= 0 {
		w.text.WriteByte('\n')
		w.text.WriteString(s)
		return
	}
	w.paragraph()
	start := w.text.Len()
	w.text.WriteString(s)
	if w.unit > 0 {
		w.unitStart = start
		return
	}
	w.addUnit(start, w.text.Len())
}

// addHeading writes line as a section heading.
func (w *htmlWriter) addHeading(level int) {
	s := w.takeLine()
	if s == "" {
		return
	}
	w.paragraph()
	start := w.text.Len()
	w.text.WriteString(s)
	w.headings = append(w.headings, Heading{Level: level, Text: s, Start: start, End: w.text.Len()})
}

// paragraph separates a new paragraph from the text before it.
func (w *htmlWriter) paragraph() {
	if w.text.Len() > 0 {
		w.text.WriteString("\n\n")
	}
}

// openUnit starts a unit container: the line before it, and the unit of an
// enclosing container so far, are done.
func (w *htmlWriter) openUnit() {
	w.block()
	w.endUnit()
	w.unit++
}

// closeUnit ends a unit container; what follows in an enclosing container
// is a new unit.
func (w *htmlWriter) closeUnit() {
	w.block()
	w.endUnit()
	w.unit--
}

// endUnit records the open unit, if it has any text.
func (w *htmlWriter) endUnit() {
	if w.unitStart >= 0 {
		w.addUnit(w.unitStart, w.text.Len())
		w.unitStart = -1
	}
}

// group runs f for a pre-like block or data table: a unit of its own, or
// lines of the enclosing unit.
func (w *htmlWriter) group(f func()) {
	if w.unit > 0 {
		w.block()
		f()
		w.block()
		return
	}
	w.openUnit()
	f()
	w.closeUnit()
}

// addUnit records the unit [start, end) of the text, trimmed.
func (w *htmlWriter) addUnit(start, end int) {
	start, end = span.Trim(w.text.String(), start, end)
	if start < end {
		w.units = append(w.units, Unit{Start: start, End: end})
	}
}

// joinCells joins a row's cells with " | ", an empty cell adding only its
// bar.
func joinCells(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString(" |")
		}
		if c != "" {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(c)
		}
	}
	return strings.Trim(b.String(), " ")
}

// htmlTitle returns the collapsed text of the first HTML <title> element
// under n in tree order; ok reports whether there is one.
func htmlTitle(n *html.Node) (title string, ok bool) {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title && n.Namespace == "" {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		t := strings.Join(strings.FieldsFunc(b.String(), collapsible), " ")
		if strings.IndexFunc(t, visible) < 0 {
			t = ""
		}
		return t, true
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t, ok := htmlTitle(c); ok {
			return t, true
		}
	}
	return "", false
}

// htmlLanguage returns the language of the <html> element (see HTML).
func htmlLanguage(root *html.Node) string {
	for c := root.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.DataAtom == atom.Html {
			if hasAttr(c, "lang") {
				return languageTag(attr(c, "lang"))
			}
			return languageTag(attr(c, "xml:lang"))
		}
	}
	return ""
}

// languageTag returns s trimmed, with underscores as hyphens, if it has the
// syntax of a BCP 47 language tag (subtags of 1 to 8 letters or digits, the
// first of 2 to 8 letters, or "x" or "i" and more subtags), else "".
func languageTag(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "-")
	subtags := strings.Split(s, "-")
	if len(s) > 64 {
		return ""
	}
	for i, sub := range subtags {
		if len(sub) < 1 || len(sub) > 8 {
			return ""
		}
		for j := range len(sub) {
			c := sub[j]
			letter := 'a' <= c|0x20 && c|0x20 <= 'z'
			if !letter && (i == 0 || c < '0' || c > '9') {
				return ""
			}
		}
		if i == 0 && len(sub) == 1 && (len(subtags) == 1 || !strings.ContainsAny(sub, "xXiI")) {
			return ""
		}
	}
	return s
}
