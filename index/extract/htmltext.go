package extract

// The text an HTML document becomes: white space collapsed as a browser
// does, lines, paragraphs, headings and units written into Doc.Text.

import (
	"strings"
	"unicode"

	"github.com/escurel/escurel/internal/span"
)

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
