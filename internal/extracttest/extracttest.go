// Package extracttest is for the extractors' tests: the shared documents
// they read and the golden check that pins each extractor's output under
// its ID (index/extract for the built-in extractors, index/extract/pdf for
// PDF). It imports index/extract, so only external test packages
// (package extract_test) and the extractor subpackages can use it.
package extracttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/escurel/escurel/index/extract"
)

// SharedDocs returns ../shared/data/documents beside the repository (the
// directory of the go.mod above the test's working directory), skipping
// the test when the folder is absent (a clone outside the workspace).
func SharedDocs(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above the test's directory")
		}
		root = parent
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "data", "documents")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("test data not found at %s (../shared/data beside the checkout): %v", dir, err)
	}
	return dir
}

// DocDigest is a SHA-256 (16 hex digits) over everything a Doc gives the
// index: text, title, language, pages, headings and units.
func DocDigest(d *extract.Doc) string {
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

// Golden is a golden check of extractors on the shared PDFs, Word files
// and corrupt files.
type Golden struct {
	// Keep says which files, by detected media type, this check pins.
	Keep func(mediaType string) bool
	// Update rewrites testdata/extractors.golden instead of checking it.
	Update bool
	// Rerun is the command that rewrites the file, for the message when
	// it is missing.
	Rerun string
	// Bump says where to bump the version of an extractor whose output
	// changed; "{name}" is replaced by the extractor's name.
	Bump string
}

// Check extracts every kept file and compares "path ID digest" lines with
// testdata/extractors.golden of the test's package: an output that
// changed under the same ID fails, naming where to bump the version.
func (g Golden) Check(t *testing.T) {
	t.Helper()
	dir := SharedDocs(t)
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
		if !g.Keep(mt) {
			continue
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
			line += DocDigest(d)
		}
		got = append(got, line)
	}
	path := filepath.Join("testdata", "extractors.golden")
	if g.Update {
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
		t.Fatalf("%v (run %s)", err, g.Rerun)
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
			t.Errorf("%s: %s now extracts to %s, was %s: the output changed, so bump %s and run with -update-golden",
				f[0], f[1], f[2], w, strings.ReplaceAll(g.Bump, "{name}", strings.Split(f[1], "/")[0]))
		}
	}
}
