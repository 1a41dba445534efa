package extract

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// units returns the verbatim text of each unit.
func units(d *Doc) []string {
	var out []string
	for _, u := range d.Units {
		out = append(out, d.Text[u.Start:u.End])
	}
	return out
}

func headings(d *Doc) []string {
	var out []string
	for _, h := range d.Headings {
		out = append(out, strings.Repeat("#", h.Level)+" "+h.Text)
	}
	return out
}

func TestMarkdownStructure(t *testing.T) {
	src := "---\ntitle: Front Title\nlang: de\nsensitivity: internal\n---\n" +
		"# FastAPI { #fastapi }\n\nIntro *para*\nline two\n\n" +
		"Setext `Code` head\n---\n" +
		"```bash\n# not a heading\n```\n" +
		"#hashtag is text\n\n" +
		"- a\n- b\n\n" +
		"<style>\n.x { }\n</style>\n\n" +
		"<!-- a comment -->\n\n" +
		"[ref]: https://example.com\n\n" +
		"| a | b |\n|---|---|\n| 1 | 2 |\n\n" +
		"### Deep [link](x) ###  \n\n> quoted\n> text\n"
	d, err := Markdown("dir/page.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "Front Title" || d.Language != "de" || d.Sensitivity != "internal" {
		t.Errorf("front matter: title %q lang %q sensitivity %q", d.Title, d.Language, d.Sensitivity)
	}
	wantHeadings := []string{"# FastAPI", "## Setext Code head", "### Deep link"}
	if diff := cmp.Diff(wantHeadings, headings(d)); diff != "" {
		t.Errorf("headings (-want +got):\n%s", diff)
	}
	wantUnits := []string{
		"Intro *para*\nline two",
		"```bash\n# not a heading\n```",
		"#hashtag is text",
		"- a\n- b",
		"| a | b |\n|---|---|\n| 1 | 2 |",
		"> quoted\n> text",
	}
	if diff := cmp.Diff(wantUnits, units(d)); diff != "" {
		t.Errorf("units (-want +got):\n%s", diff)
	}
	for _, h := range d.Headings {
		if !strings.HasPrefix(d.Text[h.Start:], strings.Repeat("#", h.Level)) && !strings.HasPrefix(d.Text[h.Start:], "Setext") {
			t.Errorf("heading %q starts at %d: %q", h.Text, h.Start, d.Text[h.Start:h.Start+10])
		}
	}
}

func TestMarkdownTitle(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a.md", "---\ntitle: FM\n---\n# H1\n\nx\n", "FM"},
		{"a.md", "## Sub\n\ntext\n\n# First H1\n\n# Second H1\n", "First H1"},
		{"Setext.md", "Big Title\n=========\n\ntext\n", "Big Title"},
		{"docs/some-page.markdown", "## only h2\n\ntext\n", "some-page"},
		{"a.md", "---\ntitle: 1984\n---\ntext\n", "1984"},
		{"a.md", "---\n\n---\ntext\n", "a"},
	} {
		d, err := Markdown(tc.name, []byte(tc.src))
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if d.Title != tc.want {
			t.Errorf("%q: title %q, want %q", tc.src, d.Title, tc.want)
		}
	}
}

func TestMarkdownHeadingText(t *testing.T) {
	d, err := Markdown("a.md", []byte("# Heading \\# escaped &amp; entity &#169; `code` <b>html</b>\n\ntext\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Heading # escaped & entity © code html"; d.Title != want || d.Headings[0].Text != want {
		t.Errorf("heading text %q, want %q", d.Headings[0].Text, want)
	}
}

// A document of headings alone is indexed: its heading lines are the units.
func TestMarkdownHeadingsOnly(t *testing.T) {
	d, err := Markdown("a.md", []byte("# Kubernetes deploy\n\n## Setext too\n\nAnd a setext\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"# Kubernetes deploy", "## Setext too", "And a setext\n---"}, units(d)); diff != "" {
		t.Error(diff)
	}
}

// "---", a comment-only line, "---": Markdown (a heading between thematic
// breaks), not front matter.
func TestMarkdownCommentOnlyFrontMatter(t *testing.T) {
	d, err := Markdown("a.md", []byte("---\n# Changelog\n---\n\nEntry one.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "Changelog" || len(d.Headings) != 1 {
		t.Errorf("title %q, headings %v", d.Title, d.Headings)
	}
}

// A lone "---" first line with no closing line is a thematic break.
func TestMarkdownThematicBreakIsNotFrontMatter(t *testing.T) {
	d, err := Markdown("a.md", []byte("---\n\nJust text.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Just text."}, units(d)); diff != "" {
		t.Error(diff)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want error
		msg  string
	}{
		{"empty.md", "", ErrEmpty, "0 bytes"},
		{"blank.txt", " \n\t\n", ErrEmpty, "no text"},
		{"nul.md", "abc\x00def", ErrBinary, "offset 3"},
		{"latin1.txt", "caf\xe9 au lait", ErrInvalidUTF8, "offset 3"},
		{"fm.md", "---\ntitle: [unclosed\n---\ntext\n", ErrFrontMatter, "line 2: did not find expected ',' or ']' (YAML)"},
		{"onlyfm.md", "---\ntitle: x\n---\n\n<!-- nothing -->\n", ErrEmpty, "no text"},
	} {
		mt, _ := MediaType(tc.name)
		_, err := Extract(context.Background(), mt, tc.name, []byte(tc.data), Limits{})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
	if _, err := MediaType("x.odt"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("MediaType(x.odt) err = %v", err)
	}
}

func TestText(t *testing.T) {
	src := "\uFEFFFirst para\nstill first\n\n\n  Second para  \n \t\nThird"
	d, err := Text("/x/notes.txt", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "notes" || len(d.Headings) != 0 {
		t.Errorf("title %q headings %v", d.Title, d.Headings)
	}
	if diff := cmp.Diff([]string{"First para\nstill first", "Second para", "Third"}, units(d)); diff != "" {
		t.Error(diff)
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"a.md", "# hi", MediaMarkdown},
		{"report", "%PDF-1.7\n...", MediaPDF},
		{"report", "\x00\x00%PDF-1.4", MediaPDF},                               // junk before the header, as readers allow
		{"report.txt", "  %PDF-1.4\n", MediaPDF},                               // a PDF named .txt
		{"notes.md", "# PDF\n\nA file starts with `%PDF-1.7`.", MediaMarkdown}, // prose about PDFs
		{"notes.txt", "\x00\x00%PDF-1.4", MediaText},                           // a text name needs the header first
		{"x.pdf", "not a pdf", MediaPDF},
		{"x.docx", "not a zip", MediaDOCX},
		{"page.HTM", "<p>x", MediaHTML},
	} {
		got, err := Detect(tc.name, []byte(tc.data))
		if err != nil || got != tc.want {
			t.Errorf("Detect(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := Detect("x.odt", []byte("PK\x03\x04")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("odt: err = %v, want ErrUnsupported", err)
	}
}

func TestExtractRecoversPanics(t *testing.T) {
	registry.mu.Lock()
	saved := registry.byType[MediaText]
	registry.byType[MediaText] = &Extractor{MediaType: MediaText, Name: "text", Version: 1, Func: func(context.Context, string, []byte, Limits) (*Doc, error) {
		var m map[string]int
		m["boom"]++ // a nil map write: a runtime panic
		return nil, nil
	}}
	registry.mu.Unlock()
	defer func() {
		registry.mu.Lock()
		registry.byType[MediaText] = saved
		registry.mu.Unlock()
	}()
	_, err := Extract(context.Background(), MediaText, "x.txt", []byte("x"), Limits{})
	if !errors.Is(err, ErrPanic) || !strings.Contains(err.Error(), "text/1") {
		t.Errorf("err = %v, want ErrPanic naming the extractor", err)
	}
}

// This package's tests link no extractor package: IDs lists the built-in
// extractors only.
func TestIDs(t *testing.T) {
	if got := IDs(); got != "docx/2 html/2 markdown/2 text/2" {
		t.Errorf("IDs() = %q", got)
	}
}

// Without index/extract/pdf, a PDF is still detected as one, by content
// and by name, and extracting it fails with ErrNotLinked naming the
// import: it never becomes text. Other types stay unsupported.
func TestPDFNotLinked(t *testing.T) {
	const hint = `import _ "github.com/escurel/escurel/index/extract/pdf"`
	for _, tc := range []struct{ name, data string }{
		{"report.pdf", "%PDF-1.7\n1 0 obj\n"},
		{"report.txt", "%PDF-1.4\nbinary"},
		{"report.pdf", "plain words"},
	} {
		mt, err := Detect(tc.name, []byte(tc.data))
		if err != nil || mt != MediaPDF {
			t.Errorf("Detect(%q) = %q, %v; want %s", tc.name, mt, err, MediaPDF)
			continue
		}
		d, err := Extract(context.Background(), mt, tc.name, []byte(tc.data), Limits{})
		if d != nil || !errors.Is(err, ErrNotLinked) || !strings.Contains(err.Error(), hint) || !strings.Contains(err.Error(), MediaPDF) {
			t.Errorf("Extract(%q) = %v, %v; want ErrNotLinked naming %s", tc.name, d, err, hint)
		}
	}
	if e, err := For(MediaPDF); e != nil || !errors.Is(err, ErrNotLinked) || errors.Is(err, ErrUnsupported) {
		t.Errorf("For(pdf) = %v, %v; want ErrNotLinked", e, err)
	}
	if _, err := For("application/vnd.oasis.opendocument.text"); !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrNotLinked) {
		t.Errorf("For(odt) = %v; want ErrUnsupported", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	fn := func(context.Context, string, []byte, Limits) (*Doc, error) { return nil, nil }
	for name, e := range map[string]*Extractor{
		"nil":              nil,
		"no func":          {MediaType: "text/x-a", Name: "a", Version: 1},
		"no media type":    {Name: "a", Version: 1, Func: fn},
		"no name":          {MediaType: "text/x-a", Version: 1, Func: fn},
		"version 0":        {MediaType: "text/x-a", Name: "a", Func: fn},
		"media type twice": {MediaType: MediaMarkdown, Name: "markdown2", Version: 1, Func: fn},
		"name twice":       {MediaType: "text/x-a", Name: "markdown", Version: 1, Func: fn},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			Register(e)
		}()
	}
	if got := IDs(); got != "docx/2 html/2 markdown/2 text/2" {
		t.Errorf("a failed Register changed IDs(): %q", got)
	}
}
