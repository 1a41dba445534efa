package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
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
	doc.Title = ClipHeading(doc.Title)
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
			if bl.table {
				doc.setHeader(start)
			}
			continue
		}
		h := Heading{Level: min(max(bl.level, 1), 6), Text: strings.Join(strings.Fields(bl.text), " "), Start: start, End: end}
		doc.Headings = append(doc.Headings, h)
		if bl.title && doc.Title == "" {
			doc.Title = h.Text
		}
	}
	doc.finish() // headings over empty sections become units
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
