package chunk

import (
	"strings"
	"testing"

	"github.com/escurel/escurel/index/extract"
)

// maxContext is the longest context Context can return: the title, the
// headings and a page, each capped, with the separators and brackets.
var maxContext = (MaxContextHeadings+1)*extract.MaxHeadingBytes + len("p.999999") + (MaxContextHeadings+1)*len(Separator) + 2

// Whatever a document holds, every chunker's blocks carry bounded heading
// paths and contexts, so that the cost of a document stays linear in its
// size: a file with old Mac line endings, a long paragraph over a Setext
// underline, a long title, thousands of headings.
func TestContextBounds(t *testing.T) {
	long := strings.Repeat("lentil soup is warm. ", 12000) // 250 KB
	docs := map[string]*extract.Doc{
		"setext": md(t, long+"\n---\n"),
		"cr":     md(t, "# Old Mac notes\r\r"+strings.ReplaceAll(long, ". ", ".\r\r")),
		"atx":    md(t, "# "+long+"\n\nbody\n"),
		"many":   md(t, strings.Repeat("# a\n\n## b\n\n### c\n\ntext\n\n", 5000)),
		"deep": {Text: long, Title: long, Units: []extract.Unit{{Start: 0, End: len(long)}},
			Headings: func() []extract.Heading {
				var hs []extract.Heading
				for l := 1; l <= 6; l++ {
					hs = append(hs, extract.Heading{Level: l, Text: long})
				}
				return hs
			}()},
	}
	docs["deep"].Units[0].Start = 1
	for name, d := range docs {
		for _, spec := range []string{"default", "parent_child", "sentence_window"} {
			s, _ := ParseSpec(spec)
			for _, b := range s.Chunker().Chunk(d) {
				for _, h := range b.HeadingPath {
					if len(h) > extract.MaxHeadingBytes {
						t.Fatalf("%s %s: a heading of %d bytes in a path", name, spec, len(h))
					}
				}
				if c := Context(d.Title, b.HeadingPath, b.Page); len(c) > maxContext {
					t.Fatalf("%s %s: a context of %d bytes", name, spec, len(c))
				}
			}
		}
	}
	if c := Context(long, []string{long, long, long, long, long, long, long, long, long, long}, 3); len(c) > maxContext {
		t.Errorf("Context of long parts: %d bytes", len(c))
	}
	// Lone CRs: the title is the first line, and blocks break at lines.
	d := docs["cr"]
	if d.Title != "Old Mac notes" {
		t.Errorf("CR title %.40q", d.Title)
	}
	for _, b := range Split(d, DefaultMaxBytes) {
		if strings.HasPrefix(d.Text[b.Start:b.End], "soup") {
			t.Fatalf("a CR file cut mid-line: %.40q", d.Text[b.Start:b.End])
		}
	}
}

// A heading over an empty section is a block of its own, not packed into
// the section before it.
func TestEmptySectionHeadingBlock(t *testing.T) {
	d := md(t, "# Guide\n\nIntro.\n\n## Zanzibar\n\n## Usage\n\nUse it.\n")
	var got []string
	for _, b := range Split(d, DefaultMaxBytes) {
		got = append(got, d.Text[b.Start:b.End]+" "+strings.Join(b.HeadingPath, "/"))
	}
	want := []string{"Intro. Guide", "## Zanzibar Guide", "Use it. Guide/Usage"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("blocks %q, want %q", got, want)
	}
}

// Every block cut from a long table after its first names the table's
// header row in its context, with every chunker; the first holds the row
// itself.
func TestTableHeaderCarried(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Stock\n\n| Fruit | Origin | Price |\n|---|---|---|\n")
	for i := range 300 {
		b.WriteString("| apple " + strings.Repeat("x", i%7) + " | Normandy | 3 |\n")
	}
	b.WriteString("\nAfter the table.\n")
	d := md(t, b.String())
	for _, spec := range []string{"default", "parent_child", "sentence_window(max_bytes=200)"} {
		s, err := ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		blocks := s.Chunker().Chunk(d)
		if len(blocks) < 3 {
			t.Fatalf("%s: %d blocks", spec, len(blocks))
		}
		for _, bl := range blocks {
			body := d.Text[bl.Start:bl.End]
			ctx := BlockContext(d.Title, bl)
			inTable := strings.HasPrefix(body, "| apple")
			if hasHeader := strings.Contains(ctx, "| Fruit | Origin | Price |"); hasHeader != inTable {
				t.Fatalf("%s: block %.30q has context %q", spec, body, ctx)
			}
		}
	}
}
