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
