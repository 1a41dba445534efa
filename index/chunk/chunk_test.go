package chunk

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/index/extract"
)

func md(t *testing.T, src string) *extract.Doc {
	t.Helper()
	d, err := extract.Markdown("doc.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pathAt returns the heading path open where marker starts.
func pathAt(t *testing.T, d *extract.Doc, marker string) []string {
	t.Helper()
	i := strings.Index(d.Text, marker)
	if i < 0 {
		t.Fatalf("marker %q not in text", marker)
	}
	return HeadingPath(d.Headings, i)
}

func TestHeadingPath(t *testing.T) {
	d := md(t, `Before any heading.

# Guide

In guide.

## Install

In install.

### Linux

In linux.

## Configure

In configure (Linux closed, Install closed).

#### Skipped level

In skipped.

`+"```"+`md
# Not a heading, inside a code fence
`+"```"+`

Still in skipped.

#hashtag is not a heading

After hashtag.

Setext H2
---------

In setext.

# Second

In second.
`)
	for _, tc := range []struct {
		marker string
		want   []string
	}{
		{"Before any", nil},
		{"In guide", []string{"Guide"}},
		{"In install", []string{"Guide", "Install"}},
		{"In linux", []string{"Guide", "Install", "Linux"}},
		{"In configure", []string{"Guide", "Configure"}},
		{"In skipped", []string{"Guide", "Configure", "Skipped level"}},
		{"Still in skipped", []string{"Guide", "Configure", "Skipped level"}},
		{"After hashtag", []string{"Guide", "Configure", "Skipped level"}},
		{"In setext", []string{"Guide", "Setext H2"}},
		{"In second", []string{"Second"}},
	} {
		if diff := cmp.Diff(tc.want, pathAt(t, d, tc.marker)); diff != "" {
			t.Errorf("at %q (-want +got):\n%s", tc.marker, diff)
		}
	}
}

func TestContext(t *testing.T) {
	for _, tc := range []struct {
		title string
		path  []string
		page  int
		want  string
	}{
		{"FastAPI", []string{"FastAPI", "Features", "Editor support"}, 0, "[FastAPI › Features › Editor support]"},
		{"Guide", []string{"guide", "GUIDE", "Install"}, 0, "[Guide › Install]"},
		{"Report", nil, 3, "[Report › p.3]"},
		{"Report", []string{"", "  ", "Results"}, 12, "[Report › Results › p.12]"},
		{"Title", nil, 0, "[Title]"},
		{"", nil, 0, ""},
		{"  ", []string{""}, 0, ""},
		{"", []string{"A", "B"}, 0, "[A › B]"},
		{"A", []string{"B", "A"}, 0, "[A › B › A]"}, // only a repeat of the part just before is dropped
	} {
		if got := Context(tc.title, tc.path, tc.page); got != tc.want {
			t.Errorf("Context(%q, %q, %d) = %q, want %q", tc.title, tc.path, tc.page, got, tc.want)
		}
	}
	if Separator != " \u203a " {
		t.Fatalf("Separator = %q", Separator)
	}
}

func bodies(d *extract.Doc, bs []Block) []string {
	var out []string
	for _, b := range bs {
		out = append(out, d.Text[b.Start:b.End])
	}
	return out
}

func TestSplitSections(t *testing.T) {
	d := md(t, "# T\n\npara one\n\npara two\n\n## A\n\nunder a\n\n## B\n\nunder b one\n\nunder b two\n")
	bs := Split(d, DefaultMaxBytes)
	want := []string{"para one\n\npara two", "under a", "under b one\n\nunder b two"}
	if diff := cmp.Diff(want, bodies(d, bs)); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"T"}, {"T", "A"}, {"T", "B"}}, [][]string{bs[0].HeadingPath, bs[1].HeadingPath, bs[2].HeadingPath}); diff != "" {
		t.Errorf("heading paths: %s", diff)
	}
}

// Content the extractor skips splits a block rather than entering its body.
func TestSplitAtSkippedContent(t *testing.T) {
	d := md(t, "# T\n\nFirst para.\n\n<!-- secret comment -->\n\n<style>.x{}</style>\n\n[r]: http://x/ref\n\nSecond para.\n\n***\n\nThird.\n")
	want := []string{"First para.", "Second para.", "Third."}
	if diff := cmp.Diff(want, bodies(d, Split(d, DefaultMaxBytes))); diff != "" {
		t.Errorf("bodies (-want +got):\n%s", diff)
	}
}

func TestSplitBounds(t *testing.T) {
	// Packing stops at the bound; a long paragraph is cut at sentence ends.
	sentence := "Ünïcödé sentence number X is here. "
	long := strings.Repeat(sentence, 40)
	src := "# T\n\nshort one\n\nshort two\n\n" + long + "\n\n```\n" + strings.Repeat("code line\n", 30) + "```\n"
	d := md(t, src)
	const max = 200
	bs := Split(d, max)
	for i, b := range bs {
		body := d.Text[b.Start:b.End]
		if len(body) > max {
			t.Errorf("block %d is %d bytes > %d", i, len(body), max)
		}
		if !utf8.ValidString(body) || strings.TrimSpace(body) != body || body == "" {
			t.Errorf("block %d: bad body %q", i, body)
		}
	}
	got := bodies(d, bs)
	if got[0] != "short one\n\nshort two" {
		t.Errorf("first block %q", got[0])
	}
	if !strings.HasSuffix(got[1], "is here.") {
		t.Errorf("long paragraph not cut at a sentence end: %q", got[1])
	}
	// Everything non-space is kept, in order.
	joined := strings.Join(strings.Fields(strings.Join(got, " ")), " ")
	var wantText []string
	for _, u := range d.Units {
		wantText = append(wantText, d.Text[u.Start:u.End])
	}
	if want := strings.Join(strings.Fields(strings.Join(wantText, " ")), " "); joined != want {
		t.Errorf("blocks lose or reorder text")
	}
}

func TestSplitNeverInsideRune(t *testing.T) {
	// No spaces at all: the cut must fall back to a rune boundary.
	d := &extract.Doc{Text: strings.Repeat("日本語", 100)}
	d.Units = []extract.Unit{{Start: 0, End: len(d.Text)}}
	for max := MinMaxBytes; max < MinMaxBytes+4; max++ {
		total := 0
		for _, b := range Split(d, max) {
			body := d.Text[b.Start:b.End]
			if !utf8.ValidString(body) || len(body) > max {
				t.Fatalf("max %d: body %q (%d bytes)", max, body, len(body))
			}
			total += len(body)
		}
		if total != len(d.Text) {
			t.Fatalf("max %d: blocks cover %d of %d bytes", max, total, len(d.Text))
		}
	}
}

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]Spec{
		"default":                  DefaultSpec,
		"default(max_bytes=1500)":  DefaultSpec,
		" default(max_bytes=800) ": {Name: "default", MaxBytes: 800},
	} {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "semantic", "default(max_bytes=10)", "default(max_bytes=x)", "default(size=9)"} {
		if _, err := ParseSpec(in); err == nil {
			t.Errorf("ParseSpec(%q) succeeded", in)
		}
	}
	if s := DefaultSpec.String(); s != "default(max_bytes=1500)" {
		t.Errorf("DefaultSpec.String() = %q", s)
	}
}

func TestParseSpecSmallToBig(t *testing.T) {
	for in, want := range map[string]string{
		"default":                     "default(max_bytes=1500)",
		"parent_child":                "parent_child(max_bytes=400,parent_max_bytes=4000)",
		"small_to_big(max_bytes=300)": "parent_child(max_bytes=300,parent_max_bytes=4000)",
		"sentence_window":             "sentence_window(max_bytes=1500,window=3)",
		"sentence_window(window=0)":   "sentence_window(max_bytes=1500,window=0)",
		"parent_child(parent_max_bytes=900,max_bytes=100)": "parent_child(max_bytes=100,parent_max_bytes=900)",
	} {
		s, err := ParseSpec(in)
		if err != nil || s.String() != want {
			t.Errorf("ParseSpec(%q) = %q, %v; want %q", in, s, err, want)
		}
		if again, err := ParseSpec(s.String()); err != nil || again != s {
			t.Errorf("%q does not read back: %v", s, err)
		}
	}
	for _, in := range []string{"parent_child(window=2)", "default(parent_max_bytes=9)", "parent_child(max_bytes=500,parent_max_bytes=400)",
		"sentence_window(window=99)", "default(max_bytes=1,max_bytes=2)", "fixed", "default(max_bytes=10)"} {
		if _, err := ParseSpec(in); err == nil {
			t.Errorf("ParseSpec(%q) succeeded", in)
		}
	}
}

func TestSentenceWindow(t *testing.T) {
	doc := &extract.Doc{Text: "# H\n\nOne. Two! Three? Four.\n\n# K\n\nFive.\n",
		Headings: []extract.Heading{{Level: 1, Text: "H", Start: 0, End: 3}, {Level: 1, Text: "K", Start: 29, End: 32}},
		Units:    []extract.Unit{{Start: 5, End: 27}, {Start: 34, End: 39}}}
	blocks := Spec{Name: SentenceWindow, MaxBytes: 100, Window: 1}.Chunker().Chunk(doc)
	var got []string
	for _, b := range blocks {
		got = append(got, doc.Text[b.Start:b.End]+"|"+doc.Text[b.Window[0]:b.Window[1]])
	}
	want := []string{"One.|One. Two!", "Two!|One. Two! Three?", "Three?|Two! Three? Four.", "Four.|Three? Four.", "Five.|Five."} // no window across a heading
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
