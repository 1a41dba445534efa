package main

import (
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
