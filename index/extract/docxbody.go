package extract

// The body of word/document.xml, read as a stream of XML tokens into
// paragraphs and tables in reading order.

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// docxBlock is a paragraph or a table of the body, as text.
type docxBlock struct {
	text  string // trimmed, never empty
	level int    // heading level 1–9, or 0 for content
	title bool   // a Title paragraph
	table bool   // a table: one line per row, the first its header
}

// docxParser walks word/document.xml token by token.
type docxParser struct {
	dec    *xml.Decoder
	styles *docxStyles
	num    *docxNumbering
	depth  int // nesting of the parser's own recursion
}

// enter and leave bound the parser's recursion, and so its stack, on
// deeply nested input.
func (p *docxParser) enter() error {
	p.depth++
	if p.depth > docxMaxDepth {
		return fmt.Errorf("elements nested deeper than %d", docxMaxDepth)
	}
	return nil
}

func (p *docxParser) leave() { p.depth-- }

func isW(n xml.Name, local string) bool {
	return n.Local == local && (n.Space == nsW || n.Space == nsWStrict)
}

func isMath(n xml.Name, local string) bool {
	return n.Local == local && (n.Space == nsMath || n.Space == nsMathStrict)
}

func isMC(n xml.Name, local string) bool {
	return n.Local == local && n.Space == nsMC
}

// items reads the children of the element whose start was just read, up to
// its end. item reads a child it knows and reports true; wrappers that only
// carry such children (content controls, custom XML, insertions, moves) and
// mc:AlternateContent are read through with the same item; anything else
// (properties, deleted or moved-away content, bookmarks, the unknown) is
// skipped. Nesting is bounded by enter.
func (p *docxParser) items(item func(start xml.StartElement) (bool, error)) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return eofError(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil
		case xml.StartElement:
			ok, err := item(t)
			if !ok && err == nil {
				switch n := t.Name; {
				case isW(n, "sdt"), isW(n, "sdtContent"), isW(n, "customXml"), isW(n, "ins"), isW(n, "moveTo"):
					err = p.items(item)
				case isMC(n, "AlternateContent"):
					err = p.alternate(func() error { return p.items(item) })
				default:
					err = p.dec.Skip()
				}
			}
			if err != nil {
				return err
			}
		}
	}
}

// container reads block-level content up to the end of the element whose
// start was just read, passing each non-empty block to emit. Headings are
// recognized only where headings is true (the body, not table cells or
// text boxes).
func (p *docxParser) container(headings bool, emit func(docxBlock)) error {
	return p.items(func(start xml.StartElement) (bool, error) { return p.block(start, headings, emit) })
}

// block reads one block-level element whose start was just read, and
// reports whether it is one (a paragraph, a table, display math).
func (p *docxParser) block(start xml.StartElement, headings bool, emit func(docxBlock)) (bool, error) {
	n := start.Name
	switch {
	case isW(n, "p"):
		return true, p.paragraph(headings, emit)
	case isW(n, "tbl"):
		var rows []string
		if err := p.tableRows(&rows); err != nil {
			return true, err
		}
		if text := strings.TrimSpace(strings.Join(rows, "\n")); text != "" {
			emit(docxBlock{text: text, table: true})
		}
		return true, nil
	case isMath(n, "oMathPara"):
		// Display math between paragraphs: its text is a paragraph.
		var b strings.Builder
		var extras []docxBlock
		if err := p.inlineChildren(&b, &extras); err != nil {
			return true, err
		}
		if text := strings.TrimSpace(b.String()); text != "" {
			emit(docxBlock{text: text})
		}
		return true, nil
	}
	return false, nil
}

// alternate reads an mc:AlternateContent whose start was just read: the
// first mc:Choice, or the mc:Fallback when there is no choice, is read by
// read; the other branches are skipped.
func (p *docxParser) alternate(read func() error) error {
	done := false
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return eofError(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil
		case xml.StartElement:
			if !done && (isMC(t.Name, "Choice") || isMC(t.Name, "Fallback")) {
				done = true
				if err := read(); err != nil {
					return err
				}
				continue
			}
			if err := p.dec.Skip(); err != nil {
				return err
			}
		}
	}
}

// paragraph reads a w:p whose start was just read and emits it, then the
// paragraphs of the text boxes anchored in it.
func (p *docxParser) paragraph(headings bool, emit func(docxBlock)) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	var (
		ppr    xPPr
		b      strings.Builder
		extras []docxBlock
	)
loop:
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return eofError(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			break loop
		case xml.StartElement:
			if isW(t.Name, "pPr") {
				if err := p.dec.DecodeElement(&ppr, &t); err != nil {
					return err
				}
				continue
			}
			if err := p.inline(t, &b, &extras); err != nil {
				return err
			}
		}
	}

	props := p.styles.resolve(&ppr)
	label := ""
	if props.numID != "" {
		ilvl := props.ilvl
		if !props.ilvlSet {
			ilvl = p.num.levelOfStyle(props.numID, props.styleID)
		}
		label = p.num.next(props.numID, ilvl)
	}
	if text := strings.TrimSpace(b.String()); text != "" {
		var bl docxBlock
		if headings {
			bl.level, bl.title = props.level, props.title
		}
		if label != "" {
			if bl.level > 0 || bl.title {
				label = strings.TrimSuffix(label, ".")
			}
			text = label + " " + text
		}
		bl.text = text
		emit(bl)
	}
	for _, e := range extras {
		emit(e)
	}
	return nil
}

// inline reads one element of a paragraph's content whose start was just
// read, appending its text to b and the paragraphs of text boxes in it to
// extras. Elements it does not know are descended into, so that text in
// wrappers (w:r, w:hyperlink, w:ins, w:smartTag, w:fldSimple, w:sdt, math,
// drawings) is found.
func (p *docxParser) inline(start xml.StartElement, b *strings.Builder, extras *[]docxBlock) error {
	n := start.Name
	switch {
	case isW(n, "t"), isMath(n, "t"):
		return p.chars(b)
	case isW(n, "tab"), isW(n, "ptab"):
		b.WriteByte('\t')
		return p.dec.Skip()
	case isW(n, "br"), isW(n, "cr"):
		b.WriteByte('\n')
		return p.dec.Skip()
	case isW(n, "noBreakHyphen"):
		b.WriteByte('-')
		return p.dec.Skip()
	case isW(n, "txbxContent"):
		return p.container(false, func(bl docxBlock) { *extras = append(*extras, bl) })
	case isMC(n, "AlternateContent"):
		return p.alternate(func() error { return p.inlineChildren(b, extras) })
	case isW(n, "del"), isW(n, "moveFrom"), isW(n, "delText"), isW(n, "instrText"), isW(n, "delInstrText"),
		isW(n, "rPr"), isW(n, "pPr"), isW(n, "sdtPr"), isW(n, "sdtEndPr"), isW(n, "rt"), isW(n, "sym"),
		isW(n, "fldData"), isW(n, "customXmlPr"), isW(n, "smartTagPr"):
		return p.dec.Skip()
	}
	return p.inlineChildren(b, extras)
}

// inlineChildren reads the content of an inline element up to its end.
func (p *docxParser) inlineChildren(b *strings.Builder, extras *[]docxBlock) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return eofError(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil
		case xml.StartElement:
			if err := p.inline(t, b, extras); err != nil {
				return err
			}
		}
	}
}

// chars appends the character data of a text element (w:t, m:t) up to its
// end.
func (p *docxParser) chars(b *strings.Builder) error {
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return eofError(err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			b.Write(t)
		case xml.StartElement:
			if err := p.dec.Skip(); err != nil {
				return err
			}
		case xml.EndElement:
			return nil
		}
	}
}

// tableRows reads a w:tbl (or a wrapper of rows in it, such as a content
// control) whose start was just read, appending one line per row with text.
func (p *docxParser) tableRows(rows *[]string) error {
	return p.items(func(start xml.StartElement) (bool, error) {
		if !isW(start.Name, "tr") {
			return false, nil // w:tblPr, w:tblGrid, deleted rows, …
		}
		var cells []string
		if err := p.rowCells(&cells); err != nil {
			return true, err
		}
		if strings.Join(cells, "") != "" {
			*rows = append(*rows, strings.Join(cells, " | "))
		}
		return true, nil
	})
}

// rowCells reads a w:tr (or a wrapper of cells in it) whose start was just
// read, appending the text of each cell.
func (p *docxParser) rowCells(cells *[]string) error {
	return p.items(func(start xml.StartElement) (bool, error) {
		if !isW(start.Name, "tc") {
			return false, nil // w:trPr, w:tblPrEx, deleted cells, …
		}
		var parts []string
		err := p.container(false, func(b docxBlock) { parts = append(parts, b.text) })
		*cells = append(*cells, strings.Join(strings.Fields(strings.Join(parts, " ")), " "))
		return true, err
	})
}

// eofError turns the end of input inside an element into an error: the
// XML is truncated.
func eofError(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
