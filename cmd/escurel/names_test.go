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
