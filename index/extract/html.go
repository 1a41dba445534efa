package extract

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
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
	doc.finish() // headings over empty sections become units
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
	doc.Title = ClipHeading(doc.Title)
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
