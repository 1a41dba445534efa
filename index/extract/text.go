package extract

import (
	"strings"

	"github.com/escurel/escurel/internal/span"
)

// Text extracts plain text: each run of non-blank lines is one unit, and the
// title is the file name without its extension. There are no headings.
// Front matter is read as in Markdown (title, lang, sensitivity; see
// frontmatter.go) and is not a unit, so that no format drops a declared
// sensitivity.
func Text(name string, data []byte) (*Doc, error) {
	off, err := checkText(data)
	if err != nil {
		return nil, err
	}
	fm, bodyOff, err := parseFrontMatter(data, off)
	if err != nil {
		return nil, err
	}
	text := string(data)
	doc := &Doc{Text: text, Title: strings.TrimSpace(fm.Title), Language: strings.TrimSpace(fm.Lang), Sensitivity: fm.Sensitivity, Warnings: fm.Warnings}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	start := -1 // start of the current paragraph, -1 between paragraphs
	for pos := bodyOff; pos < len(text); {
		eol := strings.IndexByte(text[pos:], '\n')
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
	return doc, nil
}

// addUnit appends the trimmed span [start, end) unless it is empty.
func (d *Doc) addUnit(start, end int) {
	start, end = span.Trim(d.Text, start, end)
	if start < end {
		d.Units = append(d.Units, Unit{Start: start, End: end})
	}
}
