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
