package pdf

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/testdocs"
)

// extractPages extracts a PDF of pages built by testdocs.LayoutPDF.
func extractPages(t *testing.T, pages []testdocs.Page) *extract.Doc {
	t.Helper()
	d, err := extract.Extract(context.Background(), extract.MediaPDF, "built.pdf", testdocs.LayoutPDF(pages), extract.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	checkSpans(t, "built.pdf", d)
	return d
}

// TestPDFRotatedPages checks that a page's lines come in reading order
// whatever its /Rotate and whatever angle its text is drawn at (issue 15:
// a page with /Rotate 90 yielded its lines in reverse order).
func TestPDFRotatedPages(t *testing.T) {
	lines := testdocs.Lines(
		"Alpha is the first line of this page, set in the body type here,",
		"bravo is the second line, continuing the same paragraph of text,",
		"charlie is the third line, which also continues that paragraph,",
		"delta is the fourth and last line of it.")
	want := strings.Join([]string{lines[0].Text, lines[1].Text, lines[2].Text, lines[3].Text}, "\n")
	for _, rotate := range []int{0, 90, 180, 270} {
		for _, angle := range []int{0, 90, 180, 270} {
			t.Run(fmt.Sprintf("rotate%d_text%d", rotate, angle), func(t *testing.T) {
				d := extractPages(t, []testdocs.Page{{Rotate: rotate, TextAngle: angle, Lines: lines}})
				if d.Text != want {
					t.Errorf("text\n%s\nwant\n%s", d.Text, want)
				}
			})
		}
	}
}

// TestPDFLineEndHyphens checks which hyphens at a line end go (those that
// split a word) and which stay (issue 15: "state-of-the-" / "art" gave
// "state-of-theart").
func TestPDFLineEndHyphens(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, next string
		want        string // the two lines as the text has them
	}{
		{"split word", "The method gives an exam-", "ple of the results we saw.", "The method gives an example of the results we saw."},
		{"compound", "This is a state-of-the-", "art method for the task.", "This is a state-of-the-art method for the task."},
		{"capital after", "The plan of the Jean-", "Paul group was to meet.", "The plan of the Jean-Paul group was to meet."},
		{"compound used elsewhere", "The engine is self-", "contained and runs alone.", "The engine is self-contained and runs alone."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := testdocs.Lines(
				"This first line is long enough to set the width of a full line.",
				tc.first, tc.next,
				"This last line is long enough to set the width of a full line too.")
			pages := []testdocs.Page{{Lines: body}}
			if tc.name == "compound used elsewhere" {
				pages[0].Lines = append(pages[0].Lines, testdocs.Line{Text: "A self-contained engine needs no server.", Gap: 12})
			}
			d := extractPages(t, pages)
			if !strings.Contains(d.Text, tc.want) {
				t.Errorf("text\n%s\nwant it to contain %q", d.Text, tc.want)
			}
		})
	}
}

// TestKeepHyphen checks the rule for a hyphen at a line end on its own.
func TestKeepHyphen(t *testing.T) {
	words := map[string]bool{"self-contained": true, "re-enter": true, "reenter": true}
	for _, tc := range []struct {
		prev, next string
		keep       bool
	}{
		{"an exam-", "ple of it", false},
		{"a state-of-the-", "art method", true},
		{"(state-of-the-", "art)", true},
		{"the Jean-", "Paul group", true},
		{"non-", "English text", true},
		{"THE INTRODUC-", "TION", false},
		{"COVID-", "19 cases", true},
		{"is self-", "contained.", true},
		{"to re-", "enter it", false}, // the document writes both forms
		{"co\u00ad", "operate", false},
		{"the state-of-the\u00ad", "art", false}, // a soft hyphen only ever splits
	} {
		if got := keepHyphen(tc.prev, tc.next, words); got != tc.keep {
			t.Errorf("keepHyphen(%q, %q) = %v, want %v", tc.prev, tc.next, got, tc.keep)
		}
	}
}

// TestPDFTitlePage checks that a page whose only text is headings (a
// title page) has a unit, so that a block can cite it (issue 15).
func TestPDFTitlePage(t *testing.T) {
	body := testdocs.Lines(
		"The body of the report starts here and runs on for a full line,",
		"and it goes on in the same type for another line of the page.")
	d := extractPages(t, []testdocs.Page{
		{Lines: []testdocs.Line{{Text: "Lentil Harvest Report", Size: 24}, {Text: "Northern Cooperative", Size: 18, Gap: 20}}},
		{Lines: append([]testdocs.Line{{Text: "Introduction", Size: 18}}, body...)},
	})
	pages := map[int]bool{}
	for _, u := range d.Units {
		pages[u.Page] = true
	}
	if !pages[1] || !pages[2] {
		t.Fatalf("units %q on pages %v, want pages 1 and 2", units(d), pages)
	}
	if got := units(d)[0]; !strings.Contains(got, "Lentil Harvest Report") || !strings.Contains(got, "Northern Cooperative") {
		t.Errorf("first unit %q, want the title page's words", got)
	}
	if len(d.Headings) == 0 || d.Headings[0].Text != "Lentil Harvest Report" {
		t.Errorf("headings %+v, want the title first", d.Headings)
	}
}
