package pdf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/escurel/escurel/index/extract"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/extractors.golden from the current PDF extractor")

// docDigest is a SHA-256 over everything a Doc gives the index: text,
// title, language, pages, headings and units.
func docDigest(d *extract.Doc) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %d\n", d.Text, d.Title, d.Language, d.Pages)
	for _, x := range d.Headings {
		fmt.Fprintf(h, "h %d %q %d %d\n", x.Level, x.Text, x.Start, x.End)
	}
	for _, u := range d.Units {
		fmt.Fprintf(h, "u %d %d %d\n", u.Start, u.End, u.Page)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestExtractorGolden pins what the PDF extractor makes of the shared PDFs
// (the damaged ones included), under its ID. When its output changes it
// must get a new version (version in pdf.go), so that indexes know which
// documents a rebuild would read differently: this test fails when the
// output changes and the ID does not. Rewrite the file with
// -update-golden after bumping. The other extractors' goldens are in
// ../testdata.
func TestExtractorGolden(t *testing.T) {
	dir := sharedDocs(t)
	var files []string
	for _, sub := range []string{"pdf", "docx", "corrupt"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		files = append(files, m...)
	}
	sort.Strings(files)
	var got []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mt, err := extract.Detect(f, data)
		if err != nil {
			t.Fatal(err)
		}
		if mt != extract.MediaPDF {
			continue // pinned by index/extract's own golden test
		}
		e, err := extract.For(mt)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, f)
		line := fmt.Sprintf("%s %s ", filepath.ToSlash(rel), e.ID())
		d, err := extract.Extract(context.Background(), mt, filepath.Base(f), data, extract.Limits{})
		if err != nil {
			line += "error"
		} else {
			line += docDigest(d)
		}
		got = append(got, line)
	}
	path := filepath.Join("testdata", "extractors.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./index/extract/pdf -run TestExtractorGolden -update-golden)", err)
	}
	want := map[string]string{} // file and ID → digest
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		want[f[0]+" "+f[1]] = f[2]
	}
	for _, l := range got {
		f := strings.Fields(l)
		w, ok := want[f[0]+" "+f[1]]
		switch {
		case !ok:
			t.Errorf("%s: no golden line for %s (a new file or a new extractor version: run with -update-golden)", f[0], f[1])
		case w != f[2]:
			t.Errorf("%s: %s now extracts to %s, was %s: the output changed, so bump version in pdf.go and run with -update-golden",
				f[0], f[1], f[2], w)
		}
	}
}
