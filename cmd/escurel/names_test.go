package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file name that is not valid UTF-8 reaches the terminal escaped, in the
// failed list as in the error, never as raw bytes.
func TestIngestShowsBadNamesEscaped(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "good.md"), []byte("# Good\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bad-\xff\xfe.md"), []byte("# Bad\n\ntext\n"), 0o644); err != nil {
		t.Skipf("this file system refuses non-UTF-8 names: %v", err)
	}
	_, errOut, code := run(t, nil, "--index", filepath.Join(t.TempDir(), "idx"), "ingest", src)
	if code != 1 || !strings.Contains(errOut, `"bad-\xff\xfe.md"`) || strings.Contains(errOut, "\xff") {
		t.Errorf("exit %d, stderr %q: want the name escaped", code, errOut)
	}
}

// escurel status lists failed documents the clearance may see and counts
// the others: a source may itself be confidential.
func TestStatusWithholdsFailedSourcesAboveClearance(t *testing.T) {
	src := t.TempDir()
	secret := filepath.Join(src, "merger-plans-acme.md")
	if err := os.WriteFile(secret, []byte("---\nsensitivity: restricted\n\n# Plans\n\ntext\n"), 0o644); err != nil { // never closed: fails, restricted
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "ok.md"), []byte("# OK\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	run(t, nil, "--index", idx, "ingest", src)
	out, errOut, code := run(t, nil, "--index", idx, "status")
	if code != 0 || strings.Contains(out, "merger-plans") || !strings.Contains(out, "1 document above clearance public, not listed") {
		t.Errorf("status at public: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = run(t, nil, "--index", idx, "status", "--json")
	if strings.Contains(out, "merger-plans") || !strings.Contains(out, `"failed_withheld":1`) {
		t.Errorf("status --json at public: %s", out)
	}
	if out, _, _ = run(t, nil, "--index", idx, "status", "--clearance", "restricted"); !strings.Contains(out, "merger-plans-acme.md") {
		t.Errorf("status at restricted does not list the failed document:\n%s", out)
	}
}
