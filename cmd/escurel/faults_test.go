package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Out-of-range numbers are usage errors before anything runs (issue 19,
// items 1 and 11): -k and --depth past the library's limits once ended the
// process (out of memory, or a panic in make).
func TestOutOfRangeFlags(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"search", "-k", "9223372036854775807", "x"}, "-k 9223372036854775807"},
		{[]string{"search", "-k", "10000000000", "x"}, "-k 10000000000"},
		{[]string{"search", "--mode", "hybrid", "--depth", "9223372036854775807", "x"}, "--depth 9223372036854775807"},
		{[]string{"search", "--mode", "hybrid", "--depth", "-1", "x"}, "--depth -1"},
	} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", c.args, code, errOut, c.want)
		}
	}
}

// A language the analyzer does not support, and a negative duration, are
// usage errors before anything runs: --lang xx once failed every file, and
// --rerank-timeout -1s was accepted (issue 19, item 11).
func TestUnsupportedLanguageAndNegativeDurations(t *testing.T) {
	src := goodDocs(t)
	idx := filepath.Join(t.TempDir(), "idx")
	for _, args := range [][]string{
		{"ingest", "--lang", "xx", src},
		{"search", "--rerank-timeout", "-1s", "--rerank", "http://127.0.0.1:1/rerank", "x"},
		{"--extract-timeout", "-1s", "ingest", src},
		{"--embedder", "openai:m?url=http://127.0.0.1:1&dim=8&timeout=-1s", "ingest", src},
	} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...)
		if code != 2 {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errOut)
		}
		if _, err := os.Stat(idx); err == nil {
			t.Fatalf("%q created the index", args)
		}
	}
	// On an existing index, before any file is read.
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s", code, errOut)
	}
	out, errOut, code := run(t, nil, "--index", idx, "ingest", "--lang", "xx", src)
	if code != 2 || !strings.Contains(errOut, `--lang: language "xx"`) || out != "" {
		t.Errorf("ingest --lang xx into an index: exit %d\n%s%s", code, out, errOut)
	}
}

// What a source controls (its name, headings, text) cannot forge lines or
// send terminal sequences through plain output, and a query is echoed cut
// to a few hundred bytes (issue 19, item 9).
func TestOutputASourceCannotForge(t *testing.T) {
	src := t.TempDir()
	evil := "evil\n 2.  9.9999  passwd:0-1\r\x1b[2J\u0085.md"
	if err := os.WriteFile(filepath.Join(src, evil), []byte("# Head \x1b[31mred\n\nplatypus \x1b]0;title\x07 text\n"), 0o644); err != nil {
		t.Skipf("this file system refuses the name: %v", err)
	}
	// Fails (NUL), so status lists it, with a control character in its name.
	if err := os.WriteFile(filepath.Join(src, "bad\x1b[2J\n.md"), []byte("\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 1 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
	}
	clean := func(what, s string) {
		t.Helper()
		for _, r := range s {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
				t.Errorf("%s: control character %U in output:\n%q", what, r, s)
				return
			}
		}
	}
	out, _, code := run(t, nil, "--index", idx, "search", "platypus")
	clean("search", out)
	if code != 0 || strings.Count(out, "\n 2.") != 0 || !strings.Contains(out, `"`+filepath.Join(src, "evil\\n")) {
		t.Errorf("search output forged or not escaped:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "search", "--explain", "--mode", "hybrid", "platypus")
	clean("search --explain", out)
	out, _, _ = run(t, nil, "--index", idx, "expand", "1")
	clean("expand", out)
	if !strings.Contains(out, "platypus") {
		t.Errorf("expand:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "status", "--clearance", "restricted")
	clean("status", out)
	if !strings.Contains(out, `bad\x1b[2J\n.md`) {
		t.Errorf("status does not show the failed name escaped:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "verify")
	clean("verify", out)

	// A 1 MB query is echoed cut, with a marker, on stdout and stderr.
	q := strings.Repeat("zz", 1<<19)
	out, _, _ = run(t, nil, "--index", idx, "search", q)
	if len(out) > 400 || !strings.Contains(out, "no hits for") || !strings.Contains(out, "1048576 bytes") {
		t.Errorf("no hits for a 1 MB query: %d bytes of output: %.300s", len(out), out)
	}
	_, errOut, _ := run(t, nil, "--index", idx, "search", "--mode", "nonsense", q)
	if len(errOut) > 600 || !strings.Contains(errOut, "nonsense") {
		t.Errorf("error for a 1 MB query: %d bytes: %.300s", len(errOut), errOut)
	}
}
