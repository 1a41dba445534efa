package extract

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/escurel/escurel/internal/span"
)

// markdownParser parses CommonMark with GitHub tables, strikethrough and task
// lists, and heading attributes ({#id} and { #id }), which are dropped from
// heading text. A goldmark parser is safe for concurrent use.
var markdownParser = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList),
	goldmark.WithParserOptions(parser.WithAttribute()),
).Parser()

// Markdown extracts a CommonMark document (parsed with goldmark).
//
// A line ends at LF, CRLF or a lone CR (CommonMark's line endings). Text
// with a UTF-16 byte order mark is transcoded to UTF-8 first: Doc.Text is
// then not the bytes (see fromUTF16).
//
// Front matter (YAML between "---" lines, TOML between "+++" lines; see
// frontmatter.go for every form read and every near miss refused) supplies
// title, lang and sensitivity and is never part of a unit. Top-level headings
// (ATX and Setext) become Headings; every other top-level block (paragraph,
// list, block quote, code, table, HTML) becomes one Unit spanning its source
// lines, fences and markers included. Thematic breaks, link reference
// definitions, HTML comments and <script>/<style> blocks are not content and
// are skipped. A heading whose section holds no content (the next heading
// of its level or higher follows it, or the end) is a unit itself, so a
// document with headings and no other content has its heading lines as
// units. Titles and heading texts are capped (ClipHeading).
func Markdown(name string, data []byte) (*Doc, error) {
	data, err := fromUTF16(data)
	if err != nil {
		return nil, err
	}
	off, err := checkText(data)
	if err != nil {
		return nil, err
	}
	doc := &Doc{Text: string(data)}
	// Parse a copy whose lone CRs are LFs: the same length, so every offset
	// into it is an offset into the text, which stays verbatim.
	lf := loneCRToLF(data)
	lines := string(lf)
	fm, bodyOff, err := parseFrontMatter(lf, off)
	if err != nil {
		return nil, err
	}
	doc.Title, doc.Language, doc.Sensitivity = strings.TrimSpace(fm.Title), strings.TrimSpace(fm.Lang), fm.Sensitivity
	doc.Warnings, doc.Meta = fm.Warnings, fm.Meta

	src := lf[bodyOff:]
	root := markdownParser.Parse(text.NewReader(src))
	type item struct {
		n     ast.Node
		start int // in doc.Text
	}
	var items []item
	for n := root.FirstChild(); n != nil; n = n.NextSibling() {
		if s := blockStart(n); s >= 0 {
			items = append(items, item{n, bodyOff + s})
		}
	}
	for i, it := range items {
		end := len(doc.Text)
		if i+1 < len(items) {
			end = lineStart(lines, items[i+1].start)
		}
		switch n := it.n.(type) {
		case *ast.Heading:
			_, hend := span.Trim(doc.Text, it.start, end)
			doc.Headings = append(doc.Headings, Heading{Level: n.Level, Text: inlineText(n, src), Start: it.start, End: hend})
			if doc.Title == "" && n.Level == 1 {
				doc.Title = doc.Headings[len(doc.Headings)-1].Text
			}
		case *ast.LinkReferenceDefinition, *ast.ThematicBreak:
		case *ast.HTMLBlock:
			if !skipHTML(doc.Text[it.start:max(end, it.start)]) {
				doc.addUnit(it.start, end)
			}
		case *extast.Table:
			doc.addUnit(it.start, end)
			doc.setHeader(it.start)
		default:
			doc.addUnit(it.start, end)
		}
	}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	doc.finish() // headings over empty sections become units
	if len(doc.Units) == 0 {
		return nil, fmt.Errorf("%w: no text outside front matter", ErrEmpty)
	}
	return doc, nil
}

// loneCRToLF returns data with each CR that no LF follows replaced by an
// LF (a copy when there is one; data itself otherwise).
func loneCRToLF(data []byte) []byte {
	i := bytes.IndexByte(data, '\r')
	if i < 0 {
		return data
	}
	var out []byte
	for ; i >= 0; i = nextCR(data, i+1) {
		if i+1 < len(data) && data[i+1] == '\n' {
			continue
		}
		if out == nil {
			out = bytes.Clone(data)
		}
		out[i] = '\n'
	}
	if out == nil {
		return data
	}
	return out
}

// nextCR returns the index of the next CR at or after from, or -1.
func nextCR(data []byte, from int) int {
	if i := bytes.IndexByte(data[from:], '\r'); i >= 0 {
		return from + i
	}
	return -1
}

// cutLine splits b after its first line; ok reports whether a newline ended it.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

// blockStart returns a block node's first byte offset in the parsed source,
// or -1 when it has none.
func blockStart(n ast.Node) int {
	if p := n.Pos(); p >= 0 {
		return p
	}
	if l := n.Lines(); l != nil && l.Len() > 0 {
		return l.At(0).Start
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c.Type() == ast.TypeBlock {
			if s := blockStart(c); s >= 0 {
				return s
			}
		}
	}
	return -1
}

// lineStart returns the offset of the start of the line holding pos.
func lineStart(s string, pos int) int {
	return strings.LastIndexByte(s[:pos], '\n') + 1
}

// skipHTML reports whether an HTML block holds no readable content: a
// comment, a script or a style sheet.
func skipHTML(block string) bool {
	b := strings.ToLower(block)
	return strings.HasPrefix(b, "<!--") || strings.HasPrefix(b, "<script") || strings.HasPrefix(b, "<style")
}

// inlineText returns the plain text of a heading: text of its inline
// descendants with backslash escapes and character references resolved,
// raw HTML left out, runs of white space collapsed to one space.
func inlineText(n ast.Node, src []byte) string {
	var b strings.Builder
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch v := c.(type) {
			case *ast.Text:
				t := v.Segment.Value(src)
				if !v.IsRaw() {
					t = util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(t)))
				}
				b.Write(t)
				if v.SoftLineBreak() || v.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(v.Value)
			case *ast.AutoLink:
				b.Write(v.Label(src))
			case *ast.RawHTML:
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}
