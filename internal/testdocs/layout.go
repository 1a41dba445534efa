package testdocs

import (
	"fmt"
	"strings"
)

// Page is a page of a PDF that LayoutPDF writes.
type Page struct {
	// Lines are the page's lines of text, top to bottom as a reader sees
	// them; a page without lines has no text layer (a scanned page).
	Lines []Line
	// Rotate is the page's /Rotate entry: 0, 90, 180 or 270 (degrees
	// clockwise), which a viewer applies when it shows the page.
	Rotate int
	// TextAngle is the angle the text is drawn at in the page's own
	// coordinates, in degrees counter-clockwise: 0, 90, 180 or 270. Equal
	// to Rotate, the text reads upright once the page is shown rotated (a
	// landscape page); 0 under a Rotate of 90, it is shown running down
	// the page.
	TextAngle int
}

// Line is a line of text on a Page.
type Line struct {
	// Text is written in Helvetica with WinAnsiEncoding: ASCII, and
	// U+00AD (a soft hyphen) as its WinAnsi byte.
	Text string
	Size float64 // font size in points; 0 means 12
	Bold bool    // Helvetica-Bold
	// Gap is extra space above the line, in points (a blank line: the
	// end of a paragraph).
	Gap float64
}

// Lines returns one 12-point line per string: a page's body text.
func Lines(text ...string) []Line {
	out := make([]Line, len(text))
	for i, t := range text {
		out[i] = Line{Text: t}
	}
	return out
}

// LayoutPDF writes a PDF of US Letter pages (612 × 792 points) whose lines
// are set from the top left margin down, 1.4 times their size apart, one
// text object each, in reading order.
func LayoutPDF(pages []Page) []byte {
	w := newPDFWriter()
	w.obj("<< /Type /Catalog /Pages 2 0 R >>")
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 5+2*i)
	}
	w.obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	w.obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	w.obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
	for _, p := range pages {
		// The lines are set on a frame h points high; cm turns the frame
		// by TextAngle onto the page's 612 × 792.
		h, cm := 792.0, "1 0 0 1 0 0"
		switch p.TextAngle {
		case 90:
			h, cm = 612, "0 1 -1 0 612 0"
		case 180:
			cm = "-1 0 0 -1 612 792"
		case 270:
			h, cm = 612, "0 -1 1 0 0 792"
		}
		var s strings.Builder
		if len(p.Lines) > 0 {
			fmt.Fprintf(&s, "q %s cm\n", cm)
			y := h - 72
			for _, l := range p.Lines {
				size := l.Size
				if size == 0 {
					size = 12
				}
				y -= l.Gap + size*1.4
				font := "F1"
				if l.Bold {
					font = "F2"
				}
				fmt.Fprintf(&s, "BT /%s %g Tf 1 0 0 1 72 %g Tm (%s) Tj ET\n", font, size, y, pdfString(l.Text))
			}
			s.WriteString("Q")
		}
		w.obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Rotate %d /Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>",
			p.Rotate, w.next()+1))
		w.obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", s.Len(), s.String()))
	}
	return w.finish("")
}

// pdfString escapes s for a PDF literal string, a soft hyphen as its
// WinAnsi byte.
func pdfString(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '(' || r == ')' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\u00ad':
			b.WriteString(`\255`)
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
