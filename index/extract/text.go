package extract

import (
	"strings"

	"github.com/escurel/escurel/internal/span"
)

// Text extracts plain text: each run of non-blank lines is one unit, and the
// title is the file name without its extension. A line ends at LF, CRLF or
// a lone CR. Text with a UTF-16 byte order mark is transcoded to UTF-8
// first (as Markdown). There are no headings. Front matter is read as in
// Markdown (title, lang, sensitivity; see frontmatter.go) and is not a
// unit, so that no format drops a declared sensitivity.
func Text(name string, data []byte) (*Doc, error) {
	data, err := fromUTF16(data)
	if err != nil {
		return nil, err
	}
	off, err := checkText(data)
	if err != nil {
		return nil, err
	}
	lf := loneCRToLF(data) // a lone CR ends a line too; same length, same offsets
	fm, bodyOff, err := parseFrontMatter(lf, off)
	if err != nil {
		return nil, err
	}
	text, lines := string(data), string(lf)
	doc := &Doc{Text: text, Title: strings.TrimSpace(fm.Title), Language: strings.TrimSpace(fm.Lang), Sensitivity: fm.Sensitivity, Warnings: fm.Warnings, Meta: fm.Meta}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	start := -1 // start of the current paragraph, -1 between paragraphs
	for pos := bodyOff; pos < len(text); {
		eol := strings.IndexByte(lines[pos:], '\n')
		next := len(text)
		if eol >= 0 {
			next = pos + eol + 1
		}
		blank := strings.TrimSpace(text[pos:next]) == ""
		if !blank && start < 0 {
			start = pos
		}
		if blank && start >= 0 {
			doc.addUnit(start, pos)
			start = -1
		}
		pos = next
	}
	if start >= 0 {
		doc.addUnit(start, len(text))
	}
	doc.finish()
	return doc, nil
}

// addUnit appends the trimmed span [start, end) unless it is empty.
func (d *Doc) addUnit(start, end int) {
	start, end = span.Trim(d.Text, start, end)
	if start < end {
		d.Units = append(d.Units, Unit{Start: start, End: end})
	}
}
