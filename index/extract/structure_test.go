package extract

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// Lone CRs (old Mac files) end lines, in Markdown and plain text: the
// headings and paragraphs are those of the same file with LFs, at the same
// offsets, and the text stays the bytes.
func TestLoneCRLineEndings(t *testing.T) {
	lf := "# Notes\n\nFirst paragraph.\n\n## Part two\n\nSecond paragraph,\nwrapped.\n"
	cr := strings.ReplaceAll(lf, "\n", "\r")
	want, err := Markdown("n.md", []byte(lf))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Markdown("n.md", []byte(cr))
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != cr {
		t.Fatal("the text is not the bytes")
	}
	got.Text = want.Text
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Markdown with CR (-LF +CR):\n%s", diff)
	}
	if got.Title != "Notes" || len(got.Headings) != 2 || len(got.Units) != 2 {
		t.Errorf("title %q, %d headings, %d units", got.Title, len(got.Headings), len(got.Units))
	}
	wantT, _ := Text("n.txt", []byte(lf))
	gotT, err := Text("n.txt", []byte(cr))
	if err != nil {
		t.Fatal(err)
	}
	gotT.Text = wantT.Text
	if diff := cmp.Diff(wantT, gotT); diff != "" || len(gotT.Units) != 4 {
		t.Errorf("text with CR (-LF +CR):\n%s", diff)
	}
	// CRLF stays as it was read.
	crlf := strings.ReplaceAll(lf, "\n", "\r\n")
	if d, err := Markdown("n.md", []byte(crlf)); err != nil || len(d.Headings) != 2 || len(d.Units) != 2 {
		t.Errorf("CRLF: %+v, %v", d, err)
	}
}

// Titles and headings are capped, whatever the input holds: a long
// paragraph over a Setext underline, a long ATX heading, a long front
// matter title.
func TestHeadingCaps(t *testing.T) {
	long := strings.Repeat("lentil soup is warm ", 15000) // 300 KB
	for name, src := range map[string]string{
		"setext":      long + "\n---\n",
		"atx":         "# " + long + "\n\nbody\n",
		"frontmatter": "---\ntitle: " + long + "\n---\nbody\n",
		"cr":          "# " + strings.ReplaceAll(long, "warm ", "warm\r"),
	} {
		d, err := Markdown("x.md", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(d.Title) > MaxHeadingBytes || !utf8.ValidString(d.Title) {
			t.Errorf("%s: title of %d bytes", name, len(d.Title))
		}
		for _, h := range d.Headings {
			if len(h.Text) > MaxHeadingBytes {
				t.Errorf("%s: heading of %d bytes", name, len(h.Text))
			}
		}
	}
	h := "<h1>" + long + "</h1><p>body</p>"
	if d, err := HTML("x.html", []byte(h)); err != nil || len(d.Title) > MaxHeadingBytes || len(d.Headings[0].Text) > MaxHeadingBytes {
		t.Errorf("HTML: %v", err)
	}
}

func TestClipHeading(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("a", MaxHeadingBytes), strings.Repeat("a", MaxHeadingBytes)},
		{strings.Repeat("a", MaxHeadingBytes+1), strings.Repeat("a", MaxHeadingBytes-3) + "…"},
		{strings.Repeat("word ", 200), strings.TrimSpace(strings.Repeat("word ", 101)) + "…"},
		{strings.Repeat("é", 400), strings.Repeat("é", (MaxHeadingBytes-3)/2) + "…"},
	} {
		got := ClipHeading(tc.in)
		if got != tc.want || len(got) > MaxHeadingBytes || !utf8.ValidString(got) {
			t.Errorf("ClipHeading(%.20q…) = %.40q… (%d bytes), want %.40q…", tc.in, got, len(got), tc.want)
		}
	}
}

// A heading over an empty section (the next heading of its level or
// higher follows it) is a unit itself, so its words reach a block.
func TestEmptySectionHeading(t *testing.T) {
	d, err := Markdown("x.md", []byte("# Guide\n\nIntro.\n\n## Zanzibar\n\n## Usage\n\nUse it.\n\n### Deep end\n"))
	if err != nil {
		t.Fatal(err)
	}
	var units []string
	for _, u := range d.Units {
		units = append(units, d.Text[u.Start:u.End])
	}
	if diff := cmp.Diff([]string{"Intro.", "## Zanzibar", "Use it.", "### Deep end"}, units); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
}

// Text with a UTF-16 byte order mark (either order) is transcoded: it
// extracts as its UTF-8 equivalent does.
func TestUTF16(t *testing.T) {
	src := "# Café\n\nLentils, naïvely.\n"
	enc := func(big bool) []byte {
		out := []byte{0xFF, 0xFE}
		if big {
			out = []byte{0xFE, 0xFF}
		}
		for _, u := range utf16.Encode([]rune(src)) {
			if big {
				out = append(out, byte(u>>8), byte(u))
			} else {
				out = append(out, byte(u), byte(u>>8))
			}
		}
		return out
	}
	want, _ := Markdown("x.md", []byte(src))
	for _, big := range []bool{false, true} {
		got, err := Markdown("x.md", enc(big))
		if err != nil {
			t.Fatalf("big endian %v: %v", big, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("big endian %v (-UTF-8 +UTF-16):\n%s", big, diff)
		}
		txt, err := Text("x.txt", enc(big))
		if err != nil || txt.Text != src || len(txt.Units) != 2 {
			t.Errorf("text, big endian %v: %+v, %v", big, txt, err)
		}
	}
	if _, err := Markdown("x.md", append(enc(false), 'x')); !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), "UTF-16") {
		t.Errorf("odd length: %v", err)
	}
}

// A table's unit carries its header row (its first line), in Markdown and
// DOCX, for the chunker to repeat in the context of the blocks cut from it.
func TestTableHeader(t *testing.T) {
	d, err := Markdown("t.md", []byte("# Prices\n\n| Fruit | Price |\n|---|---|\n| apple | 3 |\n\nAfter.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Units) != 2 || d.Units[0].Header != "| Fruit | Price |" || d.Units[1].Header != "" {
		t.Errorf("Markdown units %+v", d.Units)
	}
	x := mustDOCX(t, "t.docx", map[string]string{"word/document.xml": docXML(
		para("", "Before.") + tbl([]string{para("", "Fruit"), para("", "Price")}, []string{para("", "apple"), para("", "3")}))})
	if len(x.Units) != 2 || x.Units[1].Header != "Fruit | Price" || x.Units[0].Header != "" {
		t.Errorf("DOCX units %+v", x.Units)
	}
}
