package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/internal/testdocs"
)

// TestTextlessPages checks that ingest and status show the pages without
// text of a mostly scanned PDF, and that status --textless lists it
// (issue 15).
func TestTextlessPages(t *testing.T) {
	dir := t.TempDir()
	pages := make([]string, 21)
	pages[2] = "Lentil yields of the northern plots rose again this year."
	if err := os.WriteFile(filepath.Join(dir, "scanned.pdf"), testdocs.PDF(pages, false), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	out, errOut, code := run(t, nil, "--index", idx, "ingest", dir)
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), "pdf 1 21 20 1 0") ||
		!strings.Contains(errOut, "1 document with pages without text") || !strings.Contains(errOut, "scanned.pdf (20 of 21 pages)") {
		t.Errorf("ingest: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = run(t, nil, "--index", idx, "status")
	if code != 0 || !strings.Contains(out, "pages without text  20 in 1 document") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	out, _, code = run(t, nil, "--index", idx, "status", "--textless")
	if code != 0 || !strings.Contains(out, "scanned.pdf: 20 of 21 pages") {
		t.Errorf("status --textless: exit %d\n%s", code, out)
	}
	out, _, code = run(t, nil, "--index", idx, "status", "--json", "--textless")
	if code != 0 || !strings.Contains(out, `"textless_pages":20`) || !strings.Contains(out, `"textless_documents":1`) || !strings.Contains(out, `"textless_documents_list":[{`) {
		t.Errorf("status --json --textless: exit %d\n%s", code, out)
	}
}
