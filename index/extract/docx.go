package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parts of a DOCX package that DOCX reads, by their conventional names.
const (
	docxDocumentPart  = "word/document.xml"
	docxStylesPart    = "word/styles.xml"
	docxNumberingPart = "word/numbering.xml"
	docxCorePart      = "docProps/core.xml"
)

// docxBullet is how a bullet list label is rendered, whatever symbol the
// document draws.
const docxBullet = "•"

// XML namespaces of WordprocessingML (transitional and strict), Office Math
// and markup compatibility.
const (
	nsW          = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsWStrict    = "http://purl.oclc.org/ooxml/wordprocessingml/main"
	nsMath       = "http://schemas.openxmlformats.org/officeDocument/2006/math"
	nsMathStrict = "http://purl.oclc.org/ooxml/officeDocument/math"
	nsMC         = "http://schemas.openxmlformats.org/markup-compatibility/2006"
)

// Bounds on what a document may ask of the extractor.
const (
	docxMaxDepth      = 256 // nesting of the elements DOCX descends into
	docxMaxStyleChain = 32  // w:basedOn links followed from one style
	docxMaxLvlText    = 64  // bytes of a w:lvlText; longer ones are ignored
	docxMaxLetters    = 10  // repeats of a letter label ("aaa…"); past it, decimal
)

// oleMagic starts an OLE compound file: what Word writes for a password
// protected DOCX (and for a Word 97–2003 .doc).
var oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}

// DOCX extracts an Office Open XML word-processing document (.docx), with
// the standard library only.
//
// Parts are found by their conventional names in the zip (word/document.xml,
// word/styles.xml, word/numbering.xml, docProps/core.xml), not through the
// package relationships; only word/document.xml is required.
//
// Doc.Text is built from word/document.xml: every paragraph and every table
// of the body, in reading order, is one block of text, and blocks are
// separated by a blank line ("\n\n"). Paragraphs inside content controls
// (w:sdt), custom XML, inserted runs (w:ins), hyperlinks, smart tags, simple
// fields and field results count; deleted text (w:del), field instructions
// (w:instrText), ruby annotations and the fallback branch of
// mc:AlternateContent do not. Within a paragraph w:tab is "\t", w:br and
// w:cr are "\n", w:noBreakHyphen is "-", and w:sym is left out. Text boxes
// are read as paragraphs of their own, after the paragraph that anchors
// them. Pictures (and their alt text), comments, footnotes, endnotes,
// headers and footers are left out.
//
// A table is one Unit: one line per row, cells joined by " | ", the
// paragraphs of a cell joined by a space, white space in a cell collapsed;
// a table nested in a cell is flattened into that cell's text in reading
// order. Rows with no text are left out.
//
// A paragraph is a heading when its paragraph style, resolved through
// word/styles.xml by style id, is named "heading 1" to "heading 9"
// (case-insensitively), or when it has an outline level (w:outlineLvl 0–8)
// of its own or from its style or a style it is based on (w:basedOn), as
// localized Word styles have; outline level 9 means body text. Without
// word/styles.xml the style id itself is matched ("Heading2"). Levels 7 to
// 9 are Level 6. A paragraph styled "Title" is a level-1 heading (so the
// text between it and the first "heading 1" has it as heading path;
// heading 1 sections are its siblings, levels are not shifted), and the
// first one is Doc.Title. Headings and titles inside tables and text boxes
// are content. Headings are in Doc.Text and are not units, as in Markdown;
// a document with headings and nothing else has its headings as units.
//
// A paragraph with numbering (w:numPr, its own or its style's) starts with
// its list label and a space: the level's w:lvlText with %1…%9 replaced by
// the counters, each in its level's w:numFmt (decimal, decimalZero,
// lower/upperLetter, lower/upperRoman; other formats are decimal), and "•"
// for every bullet level. Counters are kept per w:numId and level (two
// w:num of one w:abstractNum count apart, where Word may continue one
// list): a level starts at w:start (or w:startOverride), deeper levels
// restart when a shallower one advances, and a level skipped on the way
// down takes its start value, so "2", "2.1.1", then "2.2". A numbered
// paragraph without text is left out but advances its counter, as Word
// shows a number for it. A heading's label loses one trailing dot ("1.2
// Scope", not "1.2. Scope"), and Heading.Text includes the label. Without
// word/numbering.xml, or for an undefined list, labels are decimal
// ("%N."). Numbering never fails a document.
//
// Doc.Title is the first Title paragraph, else docProps/core.xml's
// dc:title, else the first level-1 heading, else the file name without its
// extension. Doc.Language and Doc.Sensitivity are "", Page is 0 and
// Doc.Pages is 0.
//
// Errors: ErrEncrypted for a password-protected DOCX (an OLE container
// holding an EncryptedPackage); ErrCorrupt for data that is not a zip (an
// OLE file that is not encrypted, such as a .doc, included), a zip without
// word/document.xml, a part that cannot be decompressed, malformed XML or
// elements nested deeper than 256 (the error names the part); ErrTooLarge
// when the parts read (styles, numbering, document, core properties)
// decompress to more than lim.MaxDecompressedBytes in total, whatever sizes
// the zip declares, or when Doc.Text would exceed it; ErrEmpty when the
// document has no text. A zero lim means the defaults.
func DOCX(name string, data []byte, lim Limits) (*Doc, error) {
	return docx(context.Background(), name, data, lim)
}

// docxMaxBlocks caps the paragraphs and tables of a DOCX body: each costs
// about a hundred bytes beyond its text (a 600 KB file of one-letter
// paragraphs would take 860 MiB), and a long real document has thousands.
const docxMaxBlocks = 1_000_000

// docxSidePartMax caps each of styles.xml, numbering.xml and core.xml:
// decoded into Go values they take about ten times their size, and real
// ones are tens of KiB.
const docxSidePartMax = 4 << 20

// docx is DOCX under ctx: reading stops with ctx's error once it ends.
func docx(ctx context.Context, name string, data []byte, lim Limits) (*Doc, error) {
	lim = lim.withDefaults()
	if bytes.HasPrefix(data, oleMagic) {
		if bytes.Contains(data, utf16LE("EncryptedPackage")) {
			return nil, fmt.Errorf("%w: password protected DOCX (an OLE container, not a zip)", ErrEncrypted)
		}
		return nil, fmt.Errorf("%w: an OLE compound file (a Word 97-2003 .doc?), not a zip", ErrCorrupt)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, fmt.Errorf("%w: not a zip: %v", ErrCorrupt, err)
	}
	pkg := &docxPackage{ctx: ctx, zr: zr, left: lim.MaxDecompressedBytes, max: lim.MaxDecompressedBytes}
	if pkg.file(docxDocumentPart) == nil {
		return nil, fmt.Errorf("%w: zip without %s (not a DOCX)", ErrCorrupt, docxDocumentPart)
	}

	styles := docxStyles{byID: map[string]*xStyle{}}
	var xs xStylesPart
	if ok, err := pkg.decode(docxStylesPart, &xs); err != nil {
		return nil, err
	} else if ok {
		styles = newDocxStyles(&xs)
	}
	var xn xNumberingPart
	if _, err := pkg.decode(docxNumberingPart, &xn); err != nil {
		return nil, err
	}
	p := &docxParser{styles: &styles, num: newDocxNumbering(&xn, &styles)}
	blocks, err := pkg.body(p)
	if err != nil {
		return nil, err
	}

	doc, err := assembleDOCX(blocks, lim.MaxDecompressedBytes)
	if err != nil {
		return nil, err
	}
	if doc.Title == "" {
		var core xCorePart
		if _, err := pkg.decode(docxCorePart, &core); err != nil {
			return nil, err
		}
		doc.Title = strings.Join(strings.Fields(core.Title), " ")
	}
	if doc.Title == "" {
		for _, h := range doc.Headings {
			if h.Level == 1 {
				doc.Title = h.Text
				break
			}
		}
	}
	if doc.Title == "" {
		doc.Title = baseTitle(name)
	}
	return doc, nil
}

// assembleDOCX lays the blocks out as Doc.Text, one after the other with a
// blank line between, and makes them headings or units. Doc.Title is the
// first title block's text, or "".
func assembleDOCX(blocks []docxBlock, maxBytes int64) (*Doc, error) {
	var b strings.Builder
	starts := make([]int, len(blocks))
	for i, bl := range blocks {
		if i > 0 {
			b.WriteString("\n\n")
		}
		starts[i] = b.Len()
		b.WriteString(bl.text)
		if int64(b.Len()) > maxBytes {
			return nil, fmt.Errorf("%w: extracted text over %d bytes (--max-unzipped-bytes)", ErrTooLarge, maxBytes)
		}
	}
	doc := &Doc{Text: b.String()}
	for i, bl := range blocks {
		start, end := starts[i], starts[i]+len(bl.text)
		if bl.level == 0 && !bl.title {
			doc.addUnit(start, end)
			continue
		}
		h := Heading{Level: min(max(bl.level, 1), 6), Text: strings.Join(strings.Fields(bl.text), " "), Start: start, End: end}
		doc.Headings = append(doc.Headings, h)
		if bl.title && doc.Title == "" {
			doc.Title = h.Text
		}
	}
	if len(doc.Units) == 0 {
		// Headings and nothing else: the headings are the content.
		for _, h := range doc.Headings {
			doc.addUnit(h.Start, h.End)
		}
	}
	if len(doc.Units) == 0 {
		return nil, fmt.Errorf("%w: no text in %s", ErrEmpty, docxDocumentPart)
	}
	return doc, nil
}

// utf16LE encodes an ASCII string as UTF-16LE, as OLE directory entries
// name their streams.
func utf16LE(s string) []byte {
	b := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return b
}

// docxPackage reads parts out of a DOCX zip, counting the decompressed
// bytes of all of them against one budget.
type docxPackage struct {
	ctx       context.Context
	zr        *zip.Reader
	left, max int64 // bytes that may still be read; the budget
}

// file returns the part called name (the first, if the zip repeats it), or
// nil.
func (pkg *docxPackage) file(name string) *zip.File {
	for _, f := range pkg.zr.File {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// open opens a part for reading through the budget, and at most partMax
// bytes of it (0: no cap of its own). It returns nil, nil when the part is
// missing.
func (pkg *docxPackage) open(name string, partMax int64) (io.ReadCloser, error) {
	f := pkg.file(name)
	if f == nil {
		return nil, nil
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	return &budgetReader{rc: rc, pkg: pkg, part: name, partMax: partMax, partLeft: partMax}, nil
}

// decode unmarshals part name, a side part (styles, numbering, core
// properties) capped at docxSidePartMax, into v. It reports whether the
// part exists.
func (pkg *docxPackage) decode(name string, v any) (bool, error) {
	r, err := pkg.open(name, docxSidePartMax)
	if r == nil || err != nil {
		return false, err
	}
	defer r.Close()
	if err := xml.NewDecoder(r).Decode(v); err != nil {
		return true, partError(name, err)
	}
	return true, nil
}

// body reads the blocks of word/document.xml's w:body in reading order.
func (pkg *docxPackage) body(p *docxParser) ([]docxBlock, error) {
	r, err := pkg.open(docxDocumentPart, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p.dec = xml.NewDecoder(r)
	var blocks []docxBlock
	tooMany := false
	emit := func(b docxBlock) {
		if len(blocks) >= docxMaxBlocks {
			tooMany = true
			return
		}
		blocks = append(blocks, b)
	}
	for {
		tok, err := p.dec.Token()
		if err == io.EOF {
			return blocks, nil
		}
		if err != nil {
			return nil, partError(docxDocumentPart, err)
		}
		if t, ok := tok.(xml.StartElement); ok && isW(t.Name, "body") {
			if err := p.container(true, emit); err != nil {
				return nil, partError(docxDocumentPart, err)
			}
			if tooMany {
				return nil, fmt.Errorf("%w: more than %d paragraphs and tables", ErrTooLarge, docxMaxBlocks)
			}
		}
	}
}

// partError wraps an error met reading part name: ErrTooLarge as is, any
// other (malformed XML, a broken deflate stream, a size mismatch in the zip)
// as ErrCorrupt.
func partError(name string, err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
}

// budgetReader reads a part and fails with ErrTooLarge as soon as the
// package's parts together have yielded more than the budget, or the part
// more than its own cap; and with ctx's error once the package's context
// ends (an extraction past its time limit stops reading).
type budgetReader struct {
	rc                io.ReadCloser
	pkg               *docxPackage
	part              string
	partMax, partLeft int64 // the part's own cap (0: none) and what is left of it
}

func (r *budgetReader) Read(p []byte) (int, error) {
	if err := r.pkg.ctx.Err(); err != nil {
		return 0, err
	}
	if r.pkg.left < 0 || r.partMax > 0 && r.partLeft < 0 {
		return 0, r.tooLarge()
	}
	if int64(len(p)) > r.pkg.left+1 {
		p = p[:r.pkg.left+1] // one byte more than allowed shows the excess
	}
	if r.partMax > 0 && int64(len(p)) > r.partLeft+1 {
		p = p[:r.partLeft+1]
	}
	n, err := r.rc.Read(p)
	r.pkg.left -= int64(n)
	r.partLeft -= int64(n)
	if r.pkg.left < 0 || r.partMax > 0 && r.partLeft < 0 {
		return 0, r.tooLarge()
	}
	return n, err
}

func (r *budgetReader) Close() error { return r.rc.Close() }

func (r *budgetReader) tooLarge() error {
	if r.partMax > 0 && r.partLeft < 0 {
		return fmt.Errorf("%w: %s decompresses to more than %d bytes (real ones are tens of KiB)", ErrTooLarge, r.part, r.partMax)
	}
	return fmt.Errorf("%w: DOCX parts decompress to more than %d bytes (limit reached in %s; --max-unzipped-bytes)", ErrTooLarge, r.pkg.max, r.part)
}

// docxBlock is a paragraph or a table of the body, as text.
type docxBlock struct {
	text  string // trimmed, never empty
	level int    // heading level 1–9, or 0 for content
	title bool   // a Title paragraph
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

// container reads block-level content up to the end of the element whose
// start was just read, passing each non-empty block to emit. Headings are
// recognized only where headings is true (the body, not table cells or
// text boxes).
func (p *docxParser) container(headings bool, emit func(docxBlock)) error {
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
			if err := p.block(t, headings, emit); err != nil {
				return err
			}
		}
	}
}

// block reads one block-level element whose start was just read.
func (p *docxParser) block(start xml.StartElement, headings bool, emit func(docxBlock)) error {
	n := start.Name
	switch {
	case isW(n, "p"):
		return p.paragraph(headings, emit)
	case isW(n, "tbl"):
		var rows []string
		if err := p.tableRows(&rows); err != nil {
			return err
		}
		if text := strings.TrimSpace(strings.Join(rows, "\n")); text != "" {
			emit(docxBlock{text: text})
		}
		return nil
	case isMath(n, "oMathPara"):
		// Display math between paragraphs: its text is a paragraph.
		var b strings.Builder
		var extras []docxBlock
		if err := p.inlineChildren(&b, &extras); err != nil {
			return err
		}
		if text := strings.TrimSpace(b.String()); text != "" {
			emit(docxBlock{text: text})
		}
		return nil
	case isW(n, "sdt"), isW(n, "sdtContent"), isW(n, "customXml"), isW(n, "ins"), isW(n, "moveTo"):
		return p.container(headings, emit)
	case isMC(n, "AlternateContent"):
		return p.alternate(func() error { return p.container(headings, emit) })
	}
	// Properties (w:sectPr, w:sdtPr, w:tcPr), deleted or moved-away
	// content, bookmarks and anything unknown.
	return p.dec.Skip()
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
			n := t.Name
			switch {
			case isW(n, "tr"):
				var cells []string
				if err := p.rowCells(&cells); err != nil {
					return err
				}
				if strings.Join(cells, "") != "" {
					*rows = append(*rows, strings.Join(cells, " | "))
				}
			case isW(n, "sdt"), isW(n, "sdtContent"), isW(n, "customXml"), isW(n, "ins"), isW(n, "moveTo"):
				err = p.tableRows(rows)
			case isMC(n, "AlternateContent"):
				err = p.alternate(func() error { return p.tableRows(rows) })
			default: // w:tblPr, w:tblGrid, deleted rows, …
				err = p.dec.Skip()
			}
			if err != nil {
				return err
			}
		}
	}
}

// rowCells reads a w:tr (or a wrapper of cells in it) whose start was just
// read, appending the text of each cell.
func (p *docxParser) rowCells(cells *[]string) error {
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
			n := t.Name
			switch {
			case isW(n, "tc"):
				var parts []string
				err = p.container(false, func(b docxBlock) { parts = append(parts, b.text) })
				*cells = append(*cells, strings.Join(strings.Fields(strings.Join(parts, " ")), " "))
			case isW(n, "sdt"), isW(n, "sdtContent"), isW(n, "customXml"), isW(n, "ins"), isW(n, "moveTo"):
				err = p.rowCells(cells)
			case isMC(n, "AlternateContent"):
				err = p.alternate(func() error { return p.rowCells(cells) })
			default: // w:trPr, w:tblPrEx, deleted cells, …
				err = p.dec.Skip()
			}
			if err != nil {
				return err
			}
		}
	}
}

// eofError turns the end of input inside an element into an error: the
// XML is truncated.
func eofError(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// XML shapes of the parts of styles.xml, numbering.xml and core.xml that
// DOCX reads. Element names carry no namespace, so that transitional and
// strict documents both match.
type (
	xVal struct {
		Val *string `xml:"val,attr"`
	}
	xNumPr struct {
		Ilvl  *xVal `xml:"ilvl"`
		NumID *xVal `xml:"numId"`
	}
	xPPr struct {
		PStyle     *xVal   `xml:"pStyle"`
		NumPr      *xNumPr `xml:"numPr"`
		OutlineLvl *xVal   `xml:"outlineLvl"`
	}
	xStyle struct {
		Type    string `xml:"type,attr"`
		ID      string `xml:"styleId,attr"`
		Default string `xml:"default,attr"`
		Name    xVal   `xml:"name"`
		BasedOn xVal   `xml:"basedOn"`
		PPr     xPPr   `xml:"pPr"`
	}
	xStylesPart struct {
		Styles []xStyle `xml:"style"`
	}
	xLvl struct {
		Ilvl    string `xml:"ilvl,attr"`
		Start   xVal   `xml:"start"`
		NumFmt  xVal   `xml:"numFmt"`
		LvlText xVal   `xml:"lvlText"`
		PStyle  xVal   `xml:"pStyle"`
	}
	xAbstractNum struct {
		ID           string `xml:"abstractNumId,attr"`
		NumStyleLink xVal   `xml:"numStyleLink"`
		Lvls         []xLvl `xml:"lvl"`
	}
	xLvlOverride struct {
		Ilvl          string `xml:"ilvl,attr"`
		StartOverride *xVal  `xml:"startOverride"`
		Lvl           *xLvl  `xml:"lvl"`
	}
	xNum struct {
		ID            string         `xml:"numId,attr"`
		AbstractNumID xVal           `xml:"abstractNumId"`
		Overrides     []xLvlOverride `xml:"lvlOverride"`
	}
	xNumberingPart struct {
		Abstract []xAbstractNum `xml:"abstractNum"`
		Nums     []xNum         `xml:"num"`
	}
	xCorePart struct {
		Title string `xml:"http://purl.org/dc/elements/1.1/ title"`
	}
)

func (v *xVal) get() string {
	if v == nil || v.Val == nil {
		return ""
	}
	return *v.Val
}

// present returns v, or nil when it has no value.
func present(v *xVal) *xVal {
	if v.get() == "" {
		return nil
	}
	return v
}

// docxStyles are the paragraph and numbering styles of styles.xml, by id.
type docxStyles struct {
	byID        map[string]*xStyle
	defaultPara string // id of the default paragraph style
}

func newDocxStyles(x *xStylesPart) docxStyles {
	s := docxStyles{byID: make(map[string]*xStyle, len(x.Styles))}
	for i := range x.Styles {
		st := &x.Styles[i]
		if st.Type != "" && st.Type != "paragraph" && st.Type != "numbering" {
			continue
		}
		if _, dup := s.byID[st.ID]; dup {
			continue
		}
		s.byID[st.ID] = st
		if s.defaultPara == "" && st.Type != "numbering" && onOff(st.Default) {
			s.defaultPara = st.ID
		}
	}
	return s
}

// onOff reads a WordprocessingML boolean attribute.
func onOff(v string) bool { return v == "1" || v == "true" || v == "on" }

// paraProps are the properties of a paragraph that DOCX uses.
type paraProps struct {
	styleID string
	level   int  // heading level 1–9, or 0
	title   bool // a Title paragraph
	numID   string
	ilvl    int
	ilvlSet bool // ilvl was given, by the paragraph or a style
}

// resolve combines a paragraph's own properties with those of its style
// and the styles it is based on; the paragraph's own win, then the nearest
// style's.
func (s *docxStyles) resolve(ppr *xPPr) paraProps {
	pp := paraProps{styleID: ppr.PStyle.get(), level: -1}
	if pp.styleID == "" {
		pp.styleID = s.defaultPara
	}
	if ppr.OutlineLvl != nil {
		pp.level = outlineLevel(ppr.OutlineLvl.get())
	}
	var numID, ilvl *xVal
	if np := ppr.NumPr; np != nil {
		numID, ilvl = present(np.NumID), present(np.Ilvl)
	}
	id := pp.styleID
	for range docxMaxStyleChain {
		if id == "" {
			break
		}
		st := s.byID[id]
		if st == nil {
			// No styles.xml, or a style it lacks: the id may still say
			// "Heading2" or "Title".
			if pp.level < 0 && !pp.title {
				if l, title, ok := styleNameLevel(id); ok {
					pp.level, pp.title = l, title
				}
			}
			break
		}
		if pp.level < 0 && !pp.title {
			if l, title, ok := styleNameLevel(st.Name.get()); ok {
				pp.level, pp.title = l, title
			} else if st.PPr.OutlineLvl != nil {
				pp.level = outlineLevel(st.PPr.OutlineLvl.get())
			}
		}
		if np := st.PPr.NumPr; np != nil {
			if numID == nil {
				numID = present(np.NumID)
			}
			if ilvl == nil {
				ilvl = present(np.Ilvl)
			}
		}
		id = st.BasedOn.get()
	}
	if pp.title || pp.level < 0 {
		pp.level = 0
	}
	if id := numID.get(); id != "" && id != "0" { // numId 0: numbering removed
		pp.numID = id
		if ilvl != nil {
			pp.ilvl, pp.ilvlSet = clampLevel(ilvl.get()), true
		}
	}
	return pp
}

// styleNameLevel reads a style name (or id): "heading 1" to "heading 9" are
// levels 1 to 9 and "Title" is the title, case and spaces aside.
func styleNameLevel(name string) (level int, title, ok bool) {
	n := strings.ToLower(strings.Join(strings.Fields(name), ""))
	if n == "title" {
		return 0, true, true
	}
	if len(n) == len("heading1") && strings.HasPrefix(n, "heading") && n[7] >= '1' && n[7] <= '9' {
		return int(n[7] - '0'), false, true
	}
	return 0, false, false
}

// outlineLevel maps a w:outlineLvl value to a heading level: 0–8 are levels
// 1–9, anything else (9 is body text) 0.
func outlineLevel(v string) int {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 8 {
		return n + 1
	}
	return 0
}

// clampLevel reads a w:ilvl: 0 to 8, out-of-range values clamped.
func clampLevel(v string) int {
	n, _ := strconv.Atoi(v)
	return min(max(n, 0), 8)
}

// docxLvl is one level of a list definition.
type docxLvl struct {
	start  int
	format string // w:numFmt
	text   string // w:lvlText
	pStyle string // the paragraph style linked to the level
}

// docxNumbering renders list labels from numbering.xml and keeps the
// counters, per w:numId.
type docxNumbering struct {
	defs     map[string]*[9]docxLvl // by numId
	counters map[string]*docxCounter
}

type docxCounter struct {
	n   [9]int
	set [9]bool // the level has a value since the last restart
}

// defaultLvls is the list definition used when there is none: decimal,
// from 1, "%N.".
var defaultLvls = func() (d [9]docxLvl) {
	for k := range d {
		d[k] = docxLvl{start: 1, format: "decimal", text: "%" + strconv.Itoa(k+1) + "."}
	}
	return d
}()

func newDocxNumbering(x *xNumberingPart, styles *docxStyles) *docxNumbering {
	abstract := map[string]*xAbstractNum{}
	for i := range x.Abstract {
		if _, dup := abstract[x.Abstract[i].ID]; !dup {
			abstract[x.Abstract[i].ID] = &x.Abstract[i]
		}
	}
	absOfNum := map[string]string{}
	for _, n := range x.Nums {
		if _, dup := absOfNum[n.ID]; !dup {
			absOfNum[n.ID] = n.AbstractNumID.get()
		}
	}
	num := &docxNumbering{defs: map[string]*[9]docxLvl{}, counters: map[string]*docxCounter{}}
	for _, n := range x.Nums {
		if _, dup := num.defs[n.ID]; dup {
			continue
		}
		a := abstract[n.AbstractNumID.get()]
		if a != nil && a.NumStyleLink.get() != "" {
			// The definition lives with the numbering style's list.
			if st := styles.byID[a.NumStyleLink.get()]; st != nil && st.PPr.NumPr != nil {
				if linked := abstract[absOfNum[st.PPr.NumPr.NumID.get()]]; linked != nil {
					a = linked
				}
			}
		}
		def := defaultLvls
		if a != nil {
			for _, l := range a.Lvls {
				setLvl(&def, l.Ilvl, &l)
			}
		}
		for _, o := range n.Overrides {
			if o.Lvl != nil {
				setLvl(&def, o.Ilvl, o.Lvl)
			}
			if o.StartOverride != nil {
				if s, err := strconv.Atoi(o.StartOverride.get()); err == nil && s >= 0 {
					def[clampLevel(o.Ilvl)].start = s
				}
			}
		}
		num.defs[n.ID] = &def
	}
	return num
}

// setLvl sets level ilvl of def from l; values l leaves out stay as they
// were.
func setLvl(def *[9]docxLvl, ilvl string, l *xLvl) {
	k, err := strconv.Atoi(ilvl)
	if err != nil || k < 0 || k > 8 {
		return
	}
	d := &def[k]
	if s, err := strconv.Atoi(l.Start.get()); err == nil && s >= 0 {
		d.start = s
	}
	if f := l.NumFmt.get(); f != "" {
		d.format = f
	}
	if l.LvlText.Val != nil && len(*l.LvlText.Val) <= docxMaxLvlText {
		d.text = *l.LvlText.Val
	}
	d.pStyle = l.PStyle.get()
}

// levelOfStyle returns the level of list numID linked to paragraph style
// styleID, or 0.
func (n *docxNumbering) levelOfStyle(numID, styleID string) int {
	if def := n.defs[numID]; def != nil && styleID != "" {
		for k := range def {
			if def[k].pStyle == styleID {
				return k
			}
		}
	}
	return 0
}

// next counts a paragraph at level ilvl of list numID and returns its
// label, trimmed ("" when the level shows none).
func (n *docxNumbering) next(numID string, ilvl int) string {
	def := n.defs[numID]
	if def == nil {
		def = &defaultLvls
	}
	c := n.counters[numID]
	if c == nil {
		c = &docxCounter{}
		n.counters[numID] = c
	}
	if c.set[ilvl] {
		c.n[ilvl]++
	} else {
		c.n[ilvl], c.set[ilvl] = def[ilvl].start, true
	}
	for k := ilvl + 1; k < len(c.n); k++ {
		c.set[k] = false // deeper levels restart
	}
	for k := range ilvl {
		if !c.set[k] { // a level skipped on the way down counts as used
			c.n[k], c.set[k] = def[k].start, true
		}
	}
	if def[ilvl].format == "bullet" {
		return docxBullet
	}
	text := def[ilvl].text
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '%' && i+1 < len(text) && text[i+1] >= '1' && text[i+1] <= '9' {
			k := int(text[i+1] - '1')
			b.WriteString(formatListNumber(c.n[k], def[k].format))
			i++
			continue
		}
		b.WriteByte(text[i])
	}
	return strings.TrimSpace(b.String())
}

// formatListNumber writes n in a w:numFmt. Formats it does not know, and
// numbers a format cannot show, are decimal.
func formatListNumber(n int, format string) string {
	switch format {
	case "bullet":
		return docxBullet
	case "none":
		return ""
	case "decimalZero":
		if n >= 0 && n < 10 {
			return "0" + strconv.Itoa(n)
		}
	case "lowerLetter", "upperLetter":
		// Word's letters: a…z, then aa…zz, then aaa….
		if n >= 1 && n <= 26*docxMaxLetters {
			s := strings.Repeat(string(rune('a'+(n-1)%26)), (n-1)/26+1)
			if format == "upperLetter" {
				s = strings.ToUpper(s)
			}
			return s
		}
	case "lowerRoman", "upperRoman":
		if n >= 1 && n < 4000 {
			s := roman(n)
			if format == "lowerRoman" {
				s = strings.ToLower(s)
			}
			return s
		}
	}
	return strconv.Itoa(n)
}

// roman writes 1 ≤ n < 4000 in upper-case Roman numerals.
func roman(n int) string {
	values := [...]int{1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1}
	symbols := [...]string{"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"}
	var b strings.Builder
	for i, v := range values {
		for n >= v {
			b.WriteString(symbols[i])
			n -= v
		}
	}
	return b.String()
}

// isDOCX reports whether data is a zip holding word/document.xml.
func isDOCX(data []byte) bool {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return false
	}
	for _, f := range zr.File {
		if f.Name == docxDocumentPart {
			return true
		}
	}
	return false
}
