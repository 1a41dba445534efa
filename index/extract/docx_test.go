package extract

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/escurel/escurel/internal/span"
)

// sampleDocuments holds real DOCX files (docx/) and another converter's
// Markdown of them (expected/<file>.docx.md).
const sampleDocuments = "/work/shared/data/documents"

const contentTypesXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`

// docXML wraps body content in a word/document.xml.
func docXML(body string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"` +
		` xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math"` +
		` xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"` +
		` xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"` +
		` xmlns:v="urn:schemas-microsoft-com:vml"><w:body>` + body + `<w:sectPr/></w:body></w:document>`
}

// stylesXML wraps w:style elements in a word/styles.xml.
func stylesXML(styles ...string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">` + strings.Join(styles, "") + `</w:styles>`
}

// numberingXML wraps w:abstractNum and w:num elements in a
// word/numbering.xml.
func numberingXML(defs ...string) string {
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:numbering xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">` + strings.Join(defs, "") + `</w:numbering>`
}

// para is a paragraph of one run, with a style when style is not "".
func para(style, text string) string {
	ppr := ""
	if style != "" {
		ppr = `<w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>`
	}
	return `<w:p>` + ppr + `<w:r><w:t xml:space="preserve">` + text + `</w:t></w:r></w:p>`
}

// numPara is a paragraph with numbering (w:numId left out when numID is ""),
// and a style when style is not "".
func numPara(style, numID, ilvl, text string) string {
	ppr := ""
	if style != "" {
		ppr = `<w:pStyle w:val="` + style + `"/>`
	}
	num := ""
	if numID != "" {
		num = `<w:numId w:val="` + numID + `"/>`
	}
	return `<w:p><w:pPr>` + ppr + `<w:numPr><w:ilvl w:val="` + ilvl + `"/>` + num + `</w:numPr></w:pPr>` +
		`<w:r><w:t>` + text + `</w:t></w:r></w:p>`
}

// tbl is a table of rows of cells; each cell is paragraph XML.
func tbl(rows ...[]string) string {
	var b strings.Builder
	b.WriteString(`<w:tbl><w:tblPr><w:tblW w:w="0" w:type="auto"/></w:tblPr><w:tblGrid><w:gridCol/></w:tblGrid>`)
	for _, r := range rows {
		b.WriteString(`<w:tr><w:trPr/>`)
		for _, c := range r {
			b.WriteString(`<w:tc><w:tcPr><w:tcW w:w="0" w:type="auto"/></w:tcPr>` + c + `</w:tc>`)
		}
		b.WriteString(`</w:tr>`)
	}
	b.WriteString(`</w:tbl>`)
	return b.String()
}

// style is a paragraph style; ppr is the XML inside its w:pPr.
func style(id, name, basedOn, ppr string) string {
	s := `<w:style w:type="paragraph" w:styleId="` + id + `"><w:name w:val="` + name + `"/>`
	if basedOn != "" {
		s += `<w:basedOn w:val="` + basedOn + `"/>`
	}
	if ppr != "" {
		s += `<w:pPr>` + ppr + `</w:pPr>`
	}
	return s + `</w:style>`
}

const normalStyle = `<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>`

// docxZip writes parts (name → content) into a zip, in name order, with a
// [Content_Types].xml unless parts has one.
func docxZip(t testing.TB, parts map[string]string) []byte {
	t.Helper()
	if _, ok := parts["[Content_Types].xml"]; !ok {
		parts["[Content_Types].xml"] = contentTypesXML
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(parts[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// mustDOCX extracts parts as a DOCX named name and checks the span
// invariants of the result.
func mustDOCX(t *testing.T, name string, parts map[string]string) *Doc {
	t.Helper()
	d, err := DOCX(name, docxZip(t, parts), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkDOCXSpans(t, d)
	return d
}

// checkDOCXSpans checks what every Doc from DOCX must satisfy: units and
// headings are trimmed, non-empty spans of Text, in order and not
// overlapping, heading text is its line with white space collapsed, there
// are no pages, and Text is exactly the headings and units joined by blank
// lines (nothing is outside a span but the separators).
func checkDOCXSpans(t *testing.T, d *Doc) {
	t.Helper()
	if d.Pages != 0 {
		t.Errorf("Pages = %d, want 0", d.Pages)
	}
	trimmed := func(what string, start, end int) bool {
		if start < 0 || end > len(d.Text) || start >= end {
			t.Errorf("%s [%d,%d) is not a non-empty span of the %d-byte text", what, start, end, len(d.Text))
			return false
		}
		if span.IsSpace(d.Text[start]) || span.IsSpace(d.Text[end-1]) {
			t.Errorf("%s [%d,%d) = %q is not trimmed", what, start, end, d.Text[start:end])
		}
		return true
	}
	type sp struct{ start, end int }
	var all []sp
	prev := 0
	for i, u := range d.Units {
		if u.Page != 0 {
			t.Errorf("unit %d: Page = %d, want 0", i, u.Page)
		}
		if !trimmed("unit", u.Start, u.End) {
			continue
		}
		if u.Start < prev {
			t.Errorf("unit %d [%d,%d) starts before the previous unit ends (%d)", i, u.Start, u.End, prev)
		}
		prev = u.End
		all = append(all, sp{u.Start, u.End})
	}
	prev = 0
	for i, h := range d.Headings {
		if h.Level < 1 || h.Level > 6 {
			t.Errorf("heading %d %q: level %d not in 1..6", i, h.Text, h.Level)
		}
		if !trimmed("heading", h.Start, h.End) {
			continue
		}
		if h.Start < prev {
			t.Errorf("heading %d [%d,%d) starts before the previous heading ends (%d)", i, h.Start, h.End, prev)
		}
		prev = h.End
		if got := strings.Join(strings.Fields(d.Text[h.Start:h.End]), " "); got != h.Text {
			t.Errorf("heading %d: Text %q, but its span holds %q", i, h.Text, got)
		}
		all = append(all, sp{h.Start, h.End})
	}
	// Units and headings are disjoint, except that a document of headings
	// only has them as units too.
	slices.SortFunc(all, func(a, b sp) int { return a.start - b.start })
	all = slices.Compact(all)
	var rebuilt []string
	for i, s := range all {
		if i > 0 && s.start < all[i-1].end {
			t.Errorf("span [%d,%d) overlaps [%d,%d)", s.start, s.end, all[i-1].start, all[i-1].end)
			return
		}
		rebuilt = append(rebuilt, d.Text[s.start:s.end])
	}
	if got := strings.Join(rebuilt, "\n\n"); got != d.Text {
		t.Errorf("Text is not its headings and units joined by blank lines:\n%q\nspans give\n%q", d.Text, got)
	}
}

type lvlHeading struct {
	Level int
	Text  string
}

func docHeadings(d *Doc) []lvlHeading {
	var out []lvlHeading
	for _, h := range d.Headings {
		out = append(out, lvlHeading{h.Level, h.Text})
	}
	return out
}

func TestDOCXHeadingStyles(t *testing.T) {
	styles := stylesXML(normalStyle,
		style("Heading1", "heading 1", "Normal", `<w:outlineLvl w:val="0"/>`),
		style("Heading2", "Heading 2", "Normal", ""), // name case does not matter
		style("Heading7", "heading 7", "Normal", ""),
		style("Title", "Title", "Normal", ""),
		style("Subtitle", "Subtitle", "Normal", ""),
		`<w:style w:type="character" w:styleId="Heading1Char"><w:name w:val="Heading 1 Char"/></w:style>`,
	)
	body := para("Subtitle", "Annual figures") +
		para("Title", "My Report") +
		para("", "Intro text.") +
		para("Heading1", "Scope") +
		para("", "Scope text.") +
		`<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Det</w:t></w:r><w:r><w:t xml:space="preserve">ails  of  it </w:t></w:r></w:p>` +
		para("Heading7", "Deep") +
		para("", "Deep text.") +
		para("Title", "Second title") +
		tbl([]string{para("Heading1", "In a table")}) +
		para("Heading1", "   ") // blank: no heading
	d := mustDOCX(t, "report.docx", map[string]string{
		"word/document.xml": docXML(body),
		"word/styles.xml":   styles,
	})
	wantH := []lvlHeading{{1, "My Report"}, {1, "Scope"}, {2, "Details of it"}, {6, "Deep"}, {1, "Second title"}}
	if diff := cmp.Diff(wantH, docHeadings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	if d.Title != "My Report" {
		t.Errorf("Title = %q, want the first Title paragraph, %q", d.Title, "My Report")
	}
	wantU := []string{"Annual figures", "Intro text.", "Scope text.", "Deep text.", "In a table"}
	if diff := cmp.Diff(wantU, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if h := d.Headings[2]; d.Text[h.Start:h.End] != "Details  of  it" {
		t.Errorf("heading span holds %q, want the paragraph's text %q", d.Text[h.Start:h.End], "Details  of  it")
	}
}

func TestDOCXHeadingsWithoutStyles(t *testing.T) {
	// No styles.xml: the style ids are read as names.
	body := para("Title", "Plain") + para("Heading2", "Two") + para("heading3", "Three") +
		para("Heading10", "Not a heading") + para("ListParagraph", "Body")
	d := mustDOCX(t, "x.docx", map[string]string{"word/document.xml": docXML(body)})
	wantH := []lvlHeading{{1, "Plain"}, {2, "Two"}, {3, "Three"}}
	if diff := cmp.Diff(wantH, docHeadings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Not a heading", "Body"}, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

func TestDOCXLocalizedHeadings(t *testing.T) {
	// A German Word file: style ids and names are localized, the outline
	// level says which are headings.
	styles := stylesXML(
		`<w:style w:type="paragraph" w:default="1" w:styleId="Standard"><w:name w:val="Standard"/></w:style>`,
		style("berschrift1", "Überschrift 1", "Standard", `<w:keepNext/><w:outlineLvl w:val="0"/>`),
		style("berschrift2", "Überschrift 2", "berschrift1", `<w:outlineLvl w:val="1"/>`),
		style("Kapitel", "Kapitel", "berschrift2", `<w:spacing w:before="240"/>`), // level from its base
		style("Inhaltsverzeichnisberschrift", "Inhaltsverzeichnisüberschrift", "berschrift1", `<w:outlineLvl w:val="9"/>`),
		style("Tief", "Tief", "Standard", `<w:outlineLvl w:val="7"/>`), // level 8, shown as 6
	)
	body := para("berschrift1", "Einleitung") +
		para("", "Text eins.") +
		para("berschrift2", "Hintergrund") +
		para("Kapitel", "Kapitel A") +
		`<w:p><w:pPr><w:outlineLvl w:val="2"/></w:pPr><w:r><w:t>Direkt</w:t></w:r></w:p>` +
		`<w:p><w:pPr><w:pStyle w:val="berschrift1"/><w:outlineLvl w:val="9"/></w:pPr><w:r><w:t>Kein Titel</w:t></w:r></w:p>` +
		para("Inhaltsverzeichnisberschrift", "Inhalt") +
		para("Tief", "Ganz tief") +
		para("Standard", "Text zwei.")
	d := mustDOCX(t, "bericht.docx", map[string]string{
		"word/document.xml": docXML(body),
		"word/styles.xml":   styles,
	})
	wantH := []lvlHeading{{1, "Einleitung"}, {2, "Hintergrund"}, {2, "Kapitel A"}, {3, "Direkt"}, {6, "Ganz tief"}}
	if diff := cmp.Diff(wantH, docHeadings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	// "Hintergrund" holds nothing before "Kapitel A", of its level: it is
	// a unit itself.
	if diff := cmp.Diff([]string{"Text eins.", "Hintergrund", "Kein Titel", "Inhalt", "Text zwei."}, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if d.Title != "Einleitung" {
		t.Errorf("Title = %q, want the first level-1 heading", d.Title)
	}
}

func TestDOCXTitleSources(t *testing.T) {
	core := func(title string) string {
		return `<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` +
			title + `</dc:title><dc:creator>Someone</dc:creator></cp:coreProperties>`
	}
	for _, tc := range []struct {
		name  string
		parts map[string]string
		want  string
	}{
		{"title paragraph beats core", map[string]string{
			"word/document.xml": docXML(para("Heading1", "Chapter") + para("Title", "Styled Title")),
			"docProps/core.xml": core("Core Title"),
		}, "Styled Title"},
		{"core beats heading 1", map[string]string{
			"word/document.xml": docXML(para("Heading1", "Chapter") + para("", "text")),
			"docProps/core.xml": core("  Core\n Title "),
		}, "Core Title"},
		{"blank core, heading 1", map[string]string{
			"word/document.xml": docXML(para("Heading2", "Section") + para("Heading1", "Chapter")),
			"docProps/core.xml": core("   "),
		}, "Chapter"},
		{"file name", map[string]string{
			"word/document.xml": docXML(para("Heading2", "Section") + para("", "text")),
		}, "report.final"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDOCX(t, "dir/report.final.docx", tc.parts)
			if d.Title != tc.want {
				t.Errorf("Title = %q, want %q", d.Title, tc.want)
			}
		})
	}
}

// numberingFixture has heading numbering (numId 1, linked from the heading
// styles), a decimal/letter/roman list (2), a bullet list (3), the list of
// 2 restarted at 5 (4), a roman/letter list (5) and a list defined through
// a numbering style (6 → style "LegalList" → numId 7).
var numberingFixture = numberingXML(
	`<w:abstractNum w:abstractNumId="0"><w:multiLevelType w:val="multilevel"/>`+
		`<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:pStyle w:val="Heading1"/><w:lvlText w:val="%1."/></w:lvl>`+
		`<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2."/></w:lvl>`+
		`<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2.%3."/></w:lvl></w:abstractNum>`,
	`<w:abstractNum w:abstractNumId="1">`+
		`<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>`+
		`<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2)"/></w:lvl>`+
		`<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerRoman"/><w:lvlText w:val="(%3)"/></w:lvl></w:abstractNum>`,
	`<w:abstractNum w:abstractNumId="2">`+
		`<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="bullet"/><w:lvlText w:val="`+"\uF0B7"+`"/></w:lvl>`+
		`<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="bullet"/><w:lvlText w:val="o"/></w:lvl></w:abstractNum>`,
	`<w:abstractNum w:abstractNumId="3">`+
		`<w:lvl w:ilvl="0"><w:start w:val="3"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>`+
		`<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="upperLetter"/><w:lvlText w:val="%1.%2"/></w:lvl></w:abstractNum>`,
	`<w:abstractNum w:abstractNumId="4"><w:numStyleLink w:val="LegalList"/></w:abstractNum>`,
	`<w:abstractNum w:abstractNumId="5"><w:styleLink w:val="LegalList"/>`+
		`<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimalZero"/><w:lvlText w:val="§%1"/></w:lvl></w:abstractNum>`,
	`<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>`,
	`<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>`,
	`<w:num w:numId="3"><w:abstractNumId w:val="2"/></w:num>`,
	`<w:num w:numId="4"><w:abstractNumId w:val="1"/><w:lvlOverride w:ilvl="0"><w:startOverride w:val="5"/></w:lvlOverride></w:num>`,
	`<w:num w:numId="5"><w:abstractNumId w:val="3"/></w:num>`,
	`<w:num w:numId="6"><w:abstractNumId w:val="4"/></w:num>`,
	`<w:num w:numId="7"><w:abstractNumId w:val="5"/></w:num>`,
)

var numberingStyles = stylesXML(normalStyle,
	// Heading 1 gets its level from the list's w:pStyle link.
	style("Heading1", "heading 1", "Normal", `<w:numPr><w:numId w:val="1"/></w:numPr><w:outlineLvl w:val="0"/>`),
	style("Heading2", "heading 2", "Normal", `<w:numPr><w:ilvl w:val="1"/><w:numId w:val="1"/></w:numPr>`),
	style("Heading3", "heading 3", "Heading2", `<w:numPr><w:ilvl w:val="2"/></w:numPr>`), // numId from its base
	style("ListBullet", "List Bullet", "Normal", `<w:numPr><w:numId w:val="3"/></w:numPr>`),
	`<w:style w:type="numbering" w:styleId="LegalList"><w:name w:val="Legal List"/><w:pPr><w:numPr><w:numId w:val="7"/></w:numPr></w:pPr></w:style>`,
)

func TestDOCXNumbering(t *testing.T) {
	body := para("Heading1", "Intro") +
		para("Heading2", "Scope") +
		para("Heading2", "Terms") +
		para("", "Body text.") +
		para("Heading1", "Method") +
		para("Heading3", "Deep") + // level 2 skipped: counts as 2.1
		para("Heading2", "Data") +
		numPara("", "2", "0", "one") +
		numPara("", "2", "1", "sub a") +
		numPara("", "2", "1", "sub b") +
		numPara("", "2", "2", "deeper") +
		numPara("", "2", "0", "two") +
		numPara("", "2", "1", "sub again") + // restarted by "two"
		para("ListBullet", "apple") +
		numPara("ListBullet", "", "1", "pear") + // ilvl from the paragraph, numId from the style
		numPara("", "4", "0", "five") +
		numPara("", "4", "0", "") + // no text: left out, but Word shows "6."
		numPara("", "4", "0", "seven") +
		numPara("", "5", "0", "three") +
		numPara("", "5", "1", "three A") +
		numPara("", "6", "0", "legal") +
		numPara("ListBullet", "0", "0", "numbering removed") +
		numPara("", "99", "0", "undefined list")
	d := mustDOCX(t, "n.docx", map[string]string{
		"word/document.xml":  docXML(body),
		"word/styles.xml":    numberingStyles,
		"word/numbering.xml": numberingFixture,
	})
	wantH := []lvlHeading{
		{1, "1 Intro"}, {2, "1.1 Scope"}, {2, "1.2 Terms"},
		{1, "2 Method"}, {3, "2.1.1 Deep"}, {2, "2.2 Data"},
	}
	if diff := cmp.Diff(wantH, docHeadings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	wantU := []string{
		"1.1 Scope", // empty sections: the headings are units
		"Body text.",
		"2.1.1 Deep",
		"1. one", "a) sub a", "b) sub b", "(i) deeper", "2. two", "a) sub again",
		"• apple", "• pear",
		"5. five", "7. seven",
		"III. three", "III.A three A",
		"§01 legal",
		"numbering removed",
		"1. undefined list",
	}
	if diff := cmp.Diff(wantU, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

func TestDOCXNumberingWithoutPart(t *testing.T) {
	// numbering.xml is missing: labels are decimal, nothing fails. The
	// default paragraph style (here not called "Normal") applies to
	// paragraphs without a style, and numbers them.
	body := numPara("Heading1", "1", "0", "Chapter") +
		numPara("", "3", "0", "a") + numPara("", "3", "0", "b") + numPara("", "3", "1", "c") +
		para("", "styled by default") + para("", "again")
	d := mustDOCX(t, "n.docx", map[string]string{
		"word/document.xml": docXML(body),
		"word/styles.xml": stylesXML(
			`<w:style w:type="paragraph" w:default="1" w:styleId="Body"><w:name w:val="Body"/><w:pPr><w:numPr><w:numId w:val="8"/></w:numPr></w:pPr></w:style>`,
			style("Heading1", "heading 1", "", "")),
	})
	if diff := cmp.Diff([]lvlHeading{{1, "1 Chapter"}}, docHeadings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"1. a", "2. b", "1. c", "1. styled by default", "2. again"}, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

func TestFormatListNumber(t *testing.T) {
	for _, tc := range []struct {
		n      int
		format string
		want   string
	}{
		{1, "decimal", "1"},
		{12, "decimal", "12"},
		{3, "decimalZero", "03"},
		{12, "decimalZero", "12"},
		{4, "lowerLetter", "d"},
		{26, "lowerLetter", "z"},
		{27, "lowerLetter", "aa"},
		{28, "upperLetter", "BB"},
		{53, "upperLetter", "AAA"},
		{100000, "lowerLetter", "100000"}, // would be thousands of letters
		{9, "lowerRoman", "ix"},
		{1994, "upperRoman", "MCMXCIV"},
		{0, "upperRoman", "0"},
		{4000, "upperRoman", "4000"},
		{5, "bullet", "•"},
		{5, "none", ""},
		{7, "ordinalText", "7"}, // unknown: decimal
		{7, "", "7"},
	} {
		if got := formatListNumber(tc.n, tc.format); got != tc.want {
			t.Errorf("formatListNumber(%d, %q) = %q, want %q", tc.n, tc.format, got, tc.want)
		}
	}
}

func TestDOCXTable(t *testing.T) {
	nested := tbl([]string{para("", "a"), para("", "b")}, []string{para("", "c"), para("", "d")})
	body := para("", "Before.") +
		`<w:tbl><w:tblPr/><w:tblGrid><w:gridCol/><w:gridCol/></w:tblGrid>` +
		`<w:tr><w:tc>` + para("", "Name") + `</w:tc><w:tc>` + para("", "Qty") + `</w:tc></w:tr>` +
		`<w:tr><w:tc>` + para("", "Apple") + para("", " green ") + `</w:tc><w:tc>` + para("", "3") + `</w:tc></w:tr>` +
		`<w:tr><w:tc><w:p/></w:tc><w:tc>` + para("", "   ") + `</w:tc></w:tr>` + // no text: left out
		`<w:tr><w:tc>` + para("", "Box") + nested + `</w:tc><w:tc>` + para("", "1") + `</w:tc></w:tr>` +
		`<w:sdt><w:sdtPr><w:alias w:val="row control"/></w:sdtPr><w:sdtContent>` +
		`<w:tr><w:tc>` + para("", "Pear") + `</w:tc><w:tc>` + para("", "4") + `</w:tc></w:tr></w:sdtContent></w:sdt>` +
		`<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc><w:tc>` + para("", "merged") + `</w:tc></w:tr>` +
		`<w:tr><w:tc>` + para("Heading1", "Total") + `</w:tc><w:tc><w:p><w:r><w:t>8</w:t><w:br/><w:t>(est.)</w:t></w:r></w:p></w:tc></w:tr>` +
		`</w:tbl>` +
		para("", "After.")
	d := mustDOCX(t, "t.docx", map[string]string{
		"word/document.xml": docXML(body),
		"word/styles.xml":   stylesXML(normalStyle, style("Heading1", "heading 1", "Normal", "")),
	})
	wantU := []string{
		"Before.",
		"Name | Qty\nApple green | 3\nBox a | b c | d | 1\nPear | 4\n | merged\nTotal | 8 (est.)",
		"After.",
	}
	if diff := cmp.Diff(wantU, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if len(d.Headings) != 0 {
		t.Errorf("a heading style inside a table made headings %v; want none", docHeadings(d))
	}
}

func TestDOCXRunContent(t *testing.T) {
	body := `<w:p><w:r><w:t xml:space="preserve">Keep </w:t></w:r>` +
		`<w:del w:id="1" w:author="A"><w:r><w:delText xml:space="preserve">GONE </w:delText></w:r></w:del>` +
		`<w:ins w:id="2" w:author="A"><w:r><w:t xml:space="preserve">new </w:t></w:r></w:ins>` +
		`<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> HYPERLINK "http://x" </w:instrText></w:r>` +
		`<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>link</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>` +
		`<w:hyperlink w:anchor="x"><w:r><w:t xml:space="preserve"> here</w:t></w:r></w:hyperlink>` +
		`<w:moveFrom w:id="3" w:author="A"><w:r><w:t>MOVEDAWAY</w:t></w:r></w:moveFrom>` +
		`<w:del w:id="7" w:author="B"><w:r><w:t>DELETED-AS-T</w:t></w:r></w:del>` + // some writers use w:t in w:del
		`<w:moveTo w:id="4" w:author="A"><w:r><w:t xml:space="preserve"> moved</w:t></w:r></w:moveTo></w:p>` +
		// Tabs, breaks, hyphens, symbols.
		`<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>` +
		`<w:smartTag w:uri="u" w:element="place"><w:smartTagPr/><w:r><w:t>Smart</w:t></w:r></w:smartTag>` +
		`<w:r><w:rPr><w:b/></w:rPr><w:tab/><w:t>tab</w:t><w:br/><w:t>line</w:t><w:noBreakHyphen/><w:t>x</w:t>` +
		`<w:sym w:font="Wingdings" w:char="F04A"/><w:cr/><w:t>end</w:t></w:r></w:p>` +
		// An inline content control, a simple field, ruby, math.
		`<w:p><w:sdt><w:sdtPr><w:alias w:val="Name"/><w:text/></w:sdtPr><w:sdtContent><w:r><w:t>Control</w:t></w:r></w:sdtContent></w:sdt>` +
		`<w:r><w:t xml:space="preserve"> page </w:t></w:r><w:fldSimple w:instr=" PAGE "><w:r><w:t>42</w:t></w:r></w:fldSimple></w:p>` +
		`<w:p><w:r><w:ruby><w:rubyPr/><w:rt><w:r><w:t>かんじ</w:t></w:r></w:rt><w:rubyBase><w:r><w:t>漢字</w:t></w:r></w:rubyBase></w:ruby></w:r>` +
		`<w:r><w:t xml:space="preserve"> and </w:t></w:r><m:oMath><m:r><m:t>x=1</m:t></m:r></m:oMath></w:p>` +
		// A block content control, a paragraph with only deleted text.
		`<w:sdt><w:sdtPr><w:alias w:val="Block"/></w:sdtPr><w:sdtContent>` + para("", "In a block control") + `</w:sdtContent></w:sdt>` +
		`<w:p><w:del w:id="5" w:author="A"><w:r><w:delText>all deleted</w:delText></w:r></w:del></w:p>` +
		// A text box, written twice (DrawingML and its VML fallback).
		`<w:p><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wps:wsp><wps:txbx><w:txbxContent>` +
		para("", "Box text") + `</w:txbxContent></wps:txbx></wps:wsp></w:drawing></mc:Choice>` +
		`<mc:Fallback><w:pict><v:shape><v:textbox><w:txbxContent>` + para("", "Box text") +
		`</w:txbxContent></v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r>` +
		`<w:r><w:t>Anchor</w:t></w:r></w:p>` +
		`<m:oMathPara><m:oMath><m:r><m:t>E=mc2</m:t></m:r></m:oMath></m:oMathPara>` +
		`<w:bookmarkStart w:id="0" w:name="b"/><w:bookmarkEnd w:id="0"/>` +
		`<w:del w:id="6" w:author="A">` + para("", "deleted block") + `</w:del>`
	d := mustDOCX(t, "r.docx", map[string]string{"word/document.xml": docXML(body)})
	want := []string{
		"Keep new link here moved",
		"Smart\ttab\nline-x\nend",
		"Control page 42",
		"漢字 and x=1",
		"In a block control",
		"Anchor",
		"Box text",
		"E=mc2",
	}
	if diff := cmp.Diff(want, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if want := strings.Join(want, "\n\n"); d.Text != want {
		t.Errorf("Text = %q, want %q", d.Text, want)
	}
}

func TestDOCXHeadingsOnly(t *testing.T) {
	d := mustDOCX(t, "h.docx", map[string]string{
		"word/document.xml": docXML(para("Heading1", "One") + para("Heading2", "Two")),
	})
	if diff := cmp.Diff([]string{"One", "Two"}, units(d)); diff != "" {
		t.Errorf("units of a headings-only document (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]lvlHeading{{1, "One"}, {2, "Two"}}, docHeadings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	if d.Text != "One\n\nTwo" {
		t.Errorf("Text = %q", d.Text)
	}
}

func TestDOCXErrors(t *testing.T) {
	good := docxZip(t, map[string]string{"word/document.xml": docXML(para("", "hello"))})
	deep := strings.Repeat("<w:hyperlink>", 100000) + "<w:r><w:t>x</w:t></w:r>" + strings.Repeat("</w:hyperlink>", 100000)
	ole := append(append([]byte{}, oleMagic...), make([]byte, 504)...)
	encrypted := append(append(append([]byte{}, ole...), utf16LE("EncryptionInfo")...), utf16LE("EncryptedPackage")...)
	for _, tc := range []struct {
		name string
		data []byte
		want error
		msg  string // the error mentions it
	}{
		{"text", []byte("just some text, not a document"), ErrCorrupt, "not a zip"},
		{"empty input", nil, ErrCorrupt, "not a zip"},
		{"truncated zip", good[:len(good)/2], ErrCorrupt, "not a zip"},
		{"zip without document", docxZip(t, map[string]string{"word/styles.xml": stylesXML()}), ErrCorrupt, "word/document.xml"},
		{"malformed document", docxZip(t, map[string]string{"word/document.xml": docXML("<w:p><w:r><w:t>x</w:r></w:p>")}), ErrCorrupt, "word/document.xml"},
		{"truncated document", docxZip(t, map[string]string{"word/document.xml": docXML(para("", "x"))[:200]}), ErrCorrupt, "word/document.xml"},
		{"malformed styles", docxZip(t, map[string]string{"word/document.xml": docXML(para("", "x")), "word/styles.xml": "<w:styles><oops"}), ErrCorrupt, "word/styles.xml"},
		{"malformed numbering", docxZip(t, map[string]string{"word/document.xml": docXML(para("", "x")), "word/numbering.xml": "<a></b>"}), ErrCorrupt, "word/numbering.xml"},
		{"deep nesting", docxZip(t, map[string]string{"word/document.xml": docXML("<w:p>" + deep + "</w:p>")}), ErrCorrupt, "nested deeper than"},
		{"encrypted", encrypted, ErrEncrypted, "password protected DOCX (an OLE container, not a zip)"},
		{"OLE, not encrypted", ole, ErrCorrupt, "OLE compound file"},
		{"no paragraphs", docxZip(t, map[string]string{"word/document.xml": docXML("")}), ErrEmpty, "no text"},
		{"blank and deleted text only", docxZip(t, map[string]string{"word/document.xml": docXML(para("", "  \t ") +
			`<w:p><w:del><w:r><w:delText>gone</w:delText></w:r></w:del></w:p>` + tbl([]string{`<w:p/>`}))}), ErrEmpty, "no text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DOCX("bad.docx", tc.data, Limits{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("DOCX = %v, %v; want an error wrapping %v", d, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
}

// rawZip writes one stored-compressed entry per part with the header
// claiming declared bytes uncompressed (the true size when declared < 0).
func rawZip(t *testing.T, parts map[string]string, declared map[string]int64) []byte {
	t.Helper()
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		var comp bytes.Buffer
		fw, err := flate.NewWriter(&comp, flate.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write([]byte(parts[n]))
		fw.Close()
		size := uint64(len(parts[n]))
		if d, ok := declared[n]; ok {
			size = uint64(d)
		}
		w, err := zw.CreateRaw(&zip.FileHeader{
			Name:               n,
			Method:             zip.Deflate,
			CRC32:              crc32.ChecksumIEEE([]byte(parts[n])),
			CompressedSize64:   uint64(comp.Len()),
			UncompressedSize64: size,
		})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDOCXZipBomb(t *testing.T) {
	// 8 MiB of paragraphs that deflate to a few KiB.
	huge := docXML(strings.Repeat(para("", "aaaaaaaaaaaaaaaa"), 8<<20/len(para("", "aaaaaaaaaaaaaaaa"))))
	lim := Limits{MaxDecompressedBytes: 1 << 20}
	small := strings.Repeat("x", 600<<10) // 600 KiB: under the limit alone, over it twice
	for _, tc := range []struct {
		name     string
		parts    map[string]string
		declared map[string]int64
		want     error // nil: extracts
	}{
		{"honest sizes", map[string]string{"word/document.xml": huge}, nil, ErrTooLarge},
		// The header lies below the limit: archive/zip stops at the
		// declared size and reports the mismatch.
		{"declared 1 KiB", map[string]string{"word/document.xml": huge}, map[string]int64{"word/document.xml": 1 << 10}, ErrCorrupt},
		// The header lies above the limit: the budget stops the read at
		// the limit, not at the declared size.
		{"declared 2 MiB", map[string]string{"word/document.xml": huge}, map[string]int64{"word/document.xml": 2 << 20}, ErrTooLarge},
		// The limit is on all parts together.
		{"two parts over the limit together", map[string]string{
			"word/styles.xml":   stylesXML(normalStyle, "<!--"+small+"-->"),
			"word/document.xml": docXML(para("", "text") + "<!--" + small + "-->"),
		}, nil, ErrTooLarge},
		{"one part under the limit", map[string]string{
			"word/styles.xml":   stylesXML(normalStyle),
			"word/document.xml": docXML(para("", "text") + "<!--" + small + "-->"),
		}, nil, nil},
		// Parts DOCX does not read are never decompressed.
		{"bomb in a part not read", map[string]string{
			"word/document.xml":   docXML(para("", "text")),
			"word/media/bomb.bin": huge,
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := rawZip(t, tc.parts, tc.declared)
			if len(data) > 64<<10 {
				t.Fatalf("test zip is %d bytes; a bomb should be small", len(data))
			}
			d, err := DOCX("bomb.docx", data, lim)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("DOCX: %v", err)
				}
				checkDOCXSpans(t, d)
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("DOCX = %v; want an error wrapping %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "word/") {
				t.Errorf("error %q does not name the part", err)
			}
		})
	}
	// List labels can make the text longer than the document's XML (here
	// 66 bytes of XML give 103 of text); the text is held to the limit too.
	label := `<w:lvl w:ilvl="0"><w:start w:val="1000000000"/><w:lvlText w:val="%1.%1.%1.%1.%1.%1.%1.%1.%1."/></w:lvl>`
	long := map[string]string{
		"word/styles.xml":    stylesXML(normalStyle, style("L", "Long", "", `<w:numPr><w:numId w:val="1"/></w:numPr>`)),
		"word/numbering.xml": numberingXML(`<w:abstractNum w:abstractNumId="0">`+label+`</w:abstractNum>`, `<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>`),
		"word/document.xml":  docXML(strings.Repeat(`<w:p><w:pPr><w:pStyle w:val="L"/></w:pPr><w:r><w:t>x</w:t></w:r></w:p>`, 800)),
	}
	if _, err := DOCX("long.docx", docxZip(t, long), Limits{MaxDecompressedBytes: 64 << 10}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "extracted text") {
		t.Errorf("labels past the limit: %v, want ErrTooLarge for the extracted text", err)
	}
	if _, err := DOCX("long.docx", docxZip(t, long), Limits{MaxDecompressedBytes: 256 << 10}); err != nil {
		t.Errorf("labels under the limit: %v", err)
	}

	// The same bomb is a valid document: the limit is what refused it.
	d, err := DOCX("bomb.docx", rawZip(t, map[string]string{"word/document.xml": huge}, nil), Limits{})
	if err != nil {
		t.Fatalf("under the default limit: %v", err)
	}
	if len(d.Units) < 100000 {
		t.Errorf("under the default limit: %d units, want the whole document", len(d.Units))
	}
}

func TestDOCXThroughExtract(t *testing.T) {
	data := docxZip(t, map[string]string{"word/document.xml": docXML(para("Heading1", "Head") + para("", "Body"))})
	mt, err := Detect("upload.bin", data)
	if err != nil || mt != MediaDOCX {
		t.Fatalf("Detect = %q, %v; want %q", mt, err, MediaDOCX)
	}
	e, err := For(MediaDOCX)
	if err != nil || e.ID() != "docx/2" {
		t.Fatalf("For(MediaDOCX) = %v, %v", e, err)
	}
	d, err := Extract(context.Background(), mt, "upload.docx", data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Body"}, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	if _, err := Extract(context.Background(), MediaDOCX, "x.docx", []byte("nope"), Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Extract of non-zip: %v, want ErrCorrupt", err)
	}
}

var markdownComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// TestDOCXSamples extracts real Word files and compares them with another
// converter's Markdown of them: every Markdown heading must be a heading,
// and at least 95% of the Markdown's words must be in the text.
func TestDOCXSamples(t *testing.T) {
	if _, err := os.Stat(filepath.Join(sampleDocuments, "docx")); err != nil {
		t.Skipf("sample documents not available (%v); they live in %s/docx and %s/expected", err, sampleDocuments, sampleDocuments)
	}
	for _, tc := range []struct {
		file     string
		title    string
		headings []lvlHeading
		unit     string // the start of a unit the document must have
	}{
		{"lorem_ipsum.docx", "lorem_ipsum", []lvlHeading{}, "Nunc vehicula mattis erat ac consectetur. Etiam pharetra"},
		{"unit_test_headers.docx", "Test Document", []lvlHeading{
			{1, "Test Document"}, {1, "Section 1"}, {2, "Section 1.1"}, {2, "Section 1.2"}, {3, "Section 1.2.3"},
			{1, "Section 2"}, {3, "Section 2.1.1"}, {2, "Section 2.1"},
		}, "Paragraph 2.1.2"},
		{"unit_test_headers_numbered.docx", "Test Document", []lvlHeading{
			{1, "Test Document"}, {1, "1 Section 1"}, {2, "1.1 Section 1.1"}, {2, "1.2 Section 1.2"}, {3, "1.2.1 Section 1.2.3"},
			{1, "2 Section 2"}, {3, "2.1.1 Section 2.1.1"}, {2, "2.2 Section 2.1"}, {2, "REFERENCES"},
		}, "2.3.8.1. First sub-item at this level"},
		{"word_sample.docx", "Swimming in the lake", []lvlHeading{
			{1, "Swimming in the lake"}, {1, "Let’s swim!"}, {2, "Let’s eat"},
		}, "| Food | Calories per portion\nLeaves | Ash, Elm, Maple | 50\nBerries | Blueberry, Strawberry, Cranberry | 150\nGrain | Corn, Buckwheat, Barley | 200"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(sampleDocuments, "docx", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			md, err := os.ReadFile(filepath.Join(sampleDocuments, "expected", tc.file+".md"))
			if err != nil {
				t.Fatal(err)
			}
			d, err := DOCX(tc.file, data, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			checkDOCXSpans(t, d)
			again, err := DOCX(tc.file, data, Limits{})
			if err != nil || !cmp.Equal(d, again) {
				t.Errorf("a second extraction differs (err %v)", err)
			}
			if d.Title != tc.title {
				t.Errorf("Title = %q, want %q", d.Title, tc.title)
			}
			if diff := cmp.Diff(tc.headings, docHeadings(d), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("headings (-want +got):\n%s", diff)
			}
			if !slices.ContainsFunc(units(d), func(u string) bool { return strings.HasPrefix(u, tc.unit) }) {
				t.Errorf("no unit starts with %q; units: %q", tc.unit, units(d))
			}

			// (1) Every Markdown heading is a heading.
			fold := func(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }
			have := map[string]bool{}
			for _, h := range d.Headings {
				have[fold(h.Text)] = true
			}
			var mdHeadings, missed []string
			for _, line := range strings.Split(string(md), "\n") {
				if rest, ok := strings.CutPrefix(line, "#"); ok {
					h := fold(strings.TrimLeft(rest, "#"))
					mdHeadings = append(mdHeadings, h)
					if !have[h] {
						missed = append(missed, h)
					}
				}
			}
			if len(missed) > 0 {
				t.Errorf("Markdown headings that are no heading: %q (headings: %v)", missed, docHeadings(d))
			}

			// (2) The Markdown's words are in the text.
			inText := map[string]bool{}
			for _, w := range wordsOf(d.Text) {
				inText[w] = true
			}
			var total, found int
			var absent []string
			for _, w := range wordsOf(markdownComment.ReplaceAllString(string(md), " ")) {
				total++
				if inText[w] {
					found++
				} else {
					absent = append(absent, w)
				}
			}
			if total == 0 {
				t.Fatal("the expected Markdown has no words")
			}
			pct := 100 * float64(found) / float64(total)
			t.Logf("%s: %d/%d Markdown headings found; %d/%d words (%.1f%%) in the text", tc.file,
				len(mdHeadings)-len(missed), len(mdHeadings), found, total, pct)
			if pct < 95 {
				t.Errorf("only %.1f%% of the expected words are in the text; missing: %q", pct, absent)
			}
		})
	}
}

func TestDOCXDeterministic(t *testing.T) {
	data := docxZip(t, map[string]string{
		"word/document.xml":  docXML(para("Heading1", "Intro") + numPara("", "2", "0", "one") + tbl([]string{para("", "a"), para("", "b")})),
		"word/styles.xml":    numberingStyles,
		"word/numbering.xml": numberingFixture,
	})
	first, err := DOCX("d.docx", data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d, err := DOCX("d.docx", data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, d); diff != "" {
			t.Fatalf("extractions differ (-first +later):\n%s", diff)
		}
	}
}

// FuzzDOCX checks that no input panics DOCX and that whatever it extracts
// keeps the span invariants. The seeds are small documents of every
// feature; go test runs them, go test -fuzz=FuzzDOCX mutates them.
func FuzzDOCX(f *testing.F) {
	body := para("Title", "T") + para("Heading1", "H") + numPara("", "2", "1", "item") +
		tbl([]string{para("", "a"), para("", "b")}) +
		`<w:p><w:ins><w:r><w:t>i</w:t><w:tab/><w:br/></w:r></w:ins><w:del><w:r><w:delText>d</w:delText></w:r></w:del></w:p>`
	f.Add(docxZip(f, map[string]string{
		"word/document.xml":  docXML(body),
		"word/styles.xml":    numberingStyles,
		"word/numbering.xml": numberingFixture,
	}))
	f.Add(docxZip(f, map[string]string{"word/document.xml": docXML(para("", "plain"))}))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DOCX("fuzz.docx", data, Limits{MaxDecompressedBytes: 1 << 20})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrEncrypted) {
				t.Fatalf("error %v wraps none of the DOCX errors", err)
			}
			return
		}
		checkDOCXSpans(t, d)
	})
}

// wordsOf returns the case-folded words (runs of letters and digits) of s.
func wordsOf(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	})
}
