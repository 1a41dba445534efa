package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
)

// The erased document's phrase and its one made-up word (a term the
// analyzer keeps as it is: the dictionary would hold it).
const (
	purgePhrase = "the quokka ledger reconciles at midnight"
	purgeWord   = "zorblaxium"
)

// filesHolding lists the files under the roots whose bytes contain any of
// needles, every byte of every file (write-ahead logs, temporary files).
func filesHolding(t *testing.T, needles []string, roots ...string) []string {
	t.Helper()
	var out []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, n := range needles {
				if bytes.Contains(b, []byte(n)) || bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(n))) {
					out = append(out, fmt.Sprintf("%s (%q)", path, n))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// hitIDs runs search --json and returns the hits' block ids (as their JSON
// text: the test does not depend on the ids' type) and sources.
func hitIDs(t *testing.T, idx, query string) (ids, sources []string) {
	t.Helper()
	out, errOut, code := run(t, nil, "--index", idx, "search", "--json", "--clearance", "restricted", "--mode", "bm25", "-k", "20", "--", query)
	if code != 0 {
		t.Fatalf("search %q: exit %d: %s", query, code, errOut)
	}
	var doc struct {
		Hits []struct {
			BlockID json.RawMessage `json:"block_id"`
			Source  string          `json:"source"`
		} `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("search --json: %v\n%s", err, out)
	}
	for _, h := range doc.Hits {
		ids, sources = append(ids, string(h.BlockID)), append(sources, h.Source)
	}
	return ids, sources
}

// delete --purge erases a document: no file under the index directory or
// the blob store holds its phrase or word afterwards, and no command
// (search, expand, status, rollback with or without --force) returns it,
// while the other documents are served and verify passes.
func TestDeletePurgeErases(t *testing.T) {
	tmp := t.TempDir()
	idx, blobs, src := filepath.Join(tmp, "idx"), filepath.Join(tmp, "store"), filepath.Join(tmp, "src")
	os.MkdirAll(src, 0o755)
	files := map[string]string{
		"secret.md": "# Ledger\n\nIn the vault, " + purgePhrase + ".\n\nOnly the " + purgeWord + " clerk knows.\n",
		"alpha.md":  "# Alpha\n\nAlpha pages about platypus sensors.\n",
		"beta.md":   "# Beta\n\nBeta pages about wombat burrows.\n",
		"gamma.txt": "Gamma notes about echidna spines.\n",
	}
	// Enough other blocks that deleting the document's leaves the
	// full-text index under its automatic compaction threshold: the purge
	// itself must drop the dictionary's terms.
	for i := range 12 {
		files[fmt.Sprintf("filler%02d.md", i)] = fmt.Sprintf("# Filler %d\n\nFiller page %d about koala habitats.\n\n## More\n\nMore on eucalyptus %d.\n", i, i, i)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	blobURL := "file://" + blobs
	if out, errOut, code := run(t, nil, "--index", idx, "--blobs", blobURL, "ingest", src); code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "rebuild"); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
	ids, sources := hitIDs(t, idx, purgeWord)
	if len(ids) == 0 || !strings.HasSuffix(sources[0], "secret.md") {
		t.Fatalf("before the purge, %s finds %v %v; want secret.md", purgeWord, ids, sources)
	}
	secretID := ids[0]
	needles := []string{purgePhrase, purgeWord}
	before := filesHolding(t, needles, idx, blobs)
	var inIndex bool
	for _, f := range before {
		inIndex = inIndex || strings.HasPrefix(f, idx+string(filepath.Separator)+"gen-")
	}
	if !inIndex {
		t.Fatalf("before the purge no generation file holds the text (the check could not fail): %v", before)
	}

	real, _ := filepath.EvalSymlinks(filepath.Join(src, "secret.md"))
	out, errOut, code := run(t, nil, "--index", idx, "delete", "--purge", real)
	if code != 0 {
		t.Fatalf("delete --purge: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"purged 1 document", "blobs removed         1 (", "generations dropped   2 (", "reclaimed"} {
		if !strings.Contains(out, want) {
			t.Errorf("delete --purge output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("delete --purge:\n%s", out)
	if left := filesHolding(t, needles, idx, blobs); len(left) > 0 {
		t.Fatalf("after the purge these files hold the erased text:\n%s", strings.Join(left, "\n"))
	}

	if ids, _ := hitIDs(t, idx, purgeWord); len(ids) != 0 {
		t.Errorf("search %s after the purge: %v", purgeWord, ids)
	}
	if ids, _ := hitIDs(t, idx, "quokka ledger midnight"); len(ids) != 0 {
		t.Errorf("search for the phrase after the purge: %v", ids)
	}
	out, errOut, code = run(t, nil, "--index", idx, "expand", "--clearance", "restricted", "--json", secretID)
	if code == 0 || strings.Contains(out+errOut, purgeWord) || strings.Contains(out+errOut, "quokka") {
		t.Errorf("expand %s after the purge: exit %d\n%s%s", secretID, code, out, errOut)
	}
	out, _, code = run(t, nil, "--index", idx, "status", "--json", "--clearance", "restricted")
	if code != 0 || strings.Contains(out, "secret") || strings.Contains(out, purgeWord) {
		t.Errorf("status after the purge: exit %d\n%s", code, out)
	}
	var st struct {
		Documents   int                `json:"documents"`
		Reclaimable *index.Reclaimable `json:"reclaimable"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Documents != 15 || st.Reclaimable == nil || st.Reclaimable.Bytes() != 0 {
		t.Errorf("status --json: %+v (%v)\n%s", st, err, out)
	}
	for _, force := range [][]string{nil, {"--force"}} {
		out, errOut, code = run(t, nil, append([]string{"--index", idx, "rollback"}, force...)...)
		if code == 0 || !strings.Contains(errOut, "a purge happened at") || !strings.Contains(errOut, "erased documents") {
			t.Errorf("rollback %v after the purge: exit %d\n%s%s", force, code, out, errOut)
		}
	}
	if ids, sources := hitIDs(t, idx, "wombat burrows"); len(ids) == 0 || !strings.HasSuffix(sources[0], "beta.md") {
		t.Errorf("another document after the purge: %v %v", ids, sources)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "verify"); code != 0 {
		t.Errorf("verify after the purge: exit %d\n%s%s", code, out, errOut)
	}
	ix, err := index.Open(context.Background(), idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ix.Documents(context.Background())
	ix.Close()
	if err != nil || len(docs) != 15 {
		t.Errorf("documents after the purge: %v, %v", docs, err)
	}
	for _, s := range docs {
		if strings.HasSuffix(s, "secret.md") {
			t.Errorf("documents lists %s after the purge", s)
		}
	}
	// The index still takes writes, and ids are not given twice.
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest after the purge: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "verify"); code != 0 {
		t.Errorf("verify after a new ingest: exit %d\n%s%s", code, out, errOut)
	}
}
