package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/internal/testdocs"
)

// The leak of issue 15 through the CLI: documents declaring restricted in
// every front-matter form and near miss never show their text to a caller
// without clearance, in search (every mode, text and JSON, with explain),
// expand or status (text and JSON).
func TestDeclaredSensitivityCLI(t *testing.T) {
	src, idx := t.TempDir(), filepath.Join(t.TempDir(), "idx")
	var secrets []string
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("public.md", "# Public\n\nLentil soup for everyone.\n")
	read := 0
	for i, c := range testdocs.FrontMatterCases {
		secret := fmt.Sprintf("zqsecret%02d", i)
		secrets = append(secrets, secret)
		write(fmt.Sprintf("doc%02d.md", i), c.Make("restricted", fmt.Sprintf("# Memo %s\n\nLentil %s plans.\n", secret, secret)))
		if c.Read {
			read++
		}
	}
	out, errOut, code := run(t, nil, "--index", idx, "ingest", src)
	if code != 1 || !strings.Contains(errOut+out, "invalid front matter") {
		t.Fatalf("ingest: exit %d, want 1 (failed documents)\n%s%s", code, out, errOut)
	}
	check := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows %s:\n%s", what, s, text)
			}
		}
	}
	check("ingest", out+errOut)
	for _, mode := range []string{"bm25", "dense", "hybrid"} {
		for _, format := range [][]string{nil, {"--json"}} {
			for _, q := range []string{"lentil", "lentil " + strings.Join(secrets, " ")} {
				args := append([]string{"--index", idx, "search", "--mode", mode, "--explain", "-k", "100"}, format...)
				out, errOut, code := run(t, nil, append(args, q)...)
				if code != 0 {
					t.Fatalf("search %v: exit %d: %s", args, code, errOut)
				}
				check("search "+mode, strings.ReplaceAll(out+errOut, q, "")) // the query is echoed
			}
		}
	}
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"status", "--clearance", "internal"}} {
		out, errOut, _ := run(t, nil, append([]string{"--index", idx}, args...)...)
		check(strings.Join(args, " "), out+errOut)
	}
	// With clearance the readable ones are found; expand without it
	// answers as for a missing block.
	out, _, _ = run(t, nil, "--index", idx, "search", "--clearance", "restricted", "--json", "-k", "100", "lentil")
	var res struct {
		Hits []struct {
			BlockID string `json:"block_id"`
			Source  string `json:"source"`
		} `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != read+1 {
		t.Errorf("%d hits with clearance, want %d (the public document and the %d read declarations)", len(res.Hits), read+1, read)
	}
	for _, h := range res.Hits {
		if strings.HasSuffix(h.Source, "public.md") {
			continue
		}
		for _, format := range [][]string{nil, {"--json"}} {
			args := append([]string{"--index", idx, "expand"}, format...)
			out, errOut, code := run(t, nil, append(args, h.BlockID)...)
			if code == 0 {
				t.Errorf("expand %s without clearance: exit 0", h.BlockID)
			}
			check("expand", out+errOut)
		}
	}
	// status with clearance names the line of each refused declaration.
	out, _, _ = run(t, nil, "--index", idx, "status", "--clearance", "restricted")
	if n := strings.Count(out, "invalid front matter: "); n != len(secrets)-read {
		t.Errorf("status with clearance lists %d front-matter failures, want %d:\n%s", n, len(secrets)-read, out)
	}
}
