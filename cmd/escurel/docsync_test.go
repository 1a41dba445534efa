package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// escurel documents lists what was ingested, by source; a document above
// the clearance is counted, never named (its source and title may be
// confidential); --source and --status filter.
func TestDocumentsCommand(t *testing.T) {
	src := t.TempDir()
	for name, data := range map[string]string{
		"guide.md":             "# Platypus Guide\n\nInstall the toolchain.\n",
		"sub/notes.txt":        "Loose notes.\n",
		"merger-plans-acme.md": "---\nsensitivity: restricted\ntitle: Acme takeover\n---\n\n# Plans\n\nbuy\n",
		"bad.md":               "\x00binary",
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx := filepath.Join(t.TempDir(), "idx")
	run(t, nil, "--index", idx, "ingest", src)

	out, errOut, code := run(t, nil, "--index", idx, "documents")
	if code != 0 {
		t.Fatalf("documents: exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "merger") || strings.Contains(out, "Acme") || !strings.Contains(out, "and 1 document above clearance public") {
		t.Errorf("documents at public names or misses the restricted one:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "DOC ID") || !strings.Contains(lines[1], "bad.md") || !strings.Contains(lines[2], "guide.md") ||
		!strings.Contains(lines[3], "notes.txt") || !strings.Contains(out, "3 documents") {
		t.Errorf("not by source:\n%s", out)
	}
	if !regexp.MustCompile(`guide\.md +Platypus Guide +text/markdown +public +ok +1 +41 +\d{4}-`).MatchString(out) {
		t.Errorf("guide's row:\n%s", out)
	}
	if !strings.Contains(out, "bad.md: binary content") {
		t.Errorf("failed reason missing:\n%s", out)
	}

	out, _, code = run(t, nil, "--index", idx, "documents", "--clearance", "restricted", "--json")
	var doc struct {
		Documents []map[string]any `json:"documents"`
		Withheld  int              `json:"withheld"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if len(doc.Documents) != 4 || doc.Withheld != 0 || doc.Documents[2]["title"] != "Acme takeover" || doc.Documents[2]["sensitivity"] != "restricted" {
		t.Errorf("--json at restricted: %s", out)
	}
	for _, k := range []string{"doc_id", "source", "title", "media_type", "sensitivity", "status", "blocks", "bytes", "ingested_at", "extractor", "language"} {
		if _, ok := doc.Documents[0][k]; !ok {
			t.Errorf("--json lacks %q: %v", k, doc.Documents[0])
		}
	}

	out, _, _ = run(t, nil, "--index", idx, "documents", "--source", filepath.Join(src, "sub"))
	if !strings.Contains(out, "notes.txt") || strings.Contains(out, "guide.md") || !strings.Contains(out, "1 document\n") {
		t.Errorf("--source sub:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "documents", "--status", "failed", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Documents) != 1 || doc.Documents[0]["reason"] == "" {
		t.Errorf("--status failed: %v\n%s", err, out)
	}
	out, _, _ = run(t, nil, "--index", idx, "documents", "--source", "/nowhere/", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Documents) != 0 || doc.Withheld != 1 {
		t.Errorf("a prefix must not narrow the withheld count: %v\n%s", err, out)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "documents", "--status", "gone"); code != 2 || !strings.Contains(errOut, "--status") {
		t.Errorf("bad --status: exit %d: %s", code, errOut)
	}
}

// escurel sync: a rename is a delete and an add; --dry-run changes
// nothing; a vanished directory is refused without --allow-delete-all.
// Plain search output names the block id, and expand takes it.
func TestSyncCommand(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "docs")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a.md"), []byte("# Alpha\n\nthe platypus lays eggs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	out, errOut, code := run(t, nil, "--index", idx, "sync", src)
	if code != 0 || !strings.Contains(out, "plan: add 1, change 0, delete 0, unchanged 0") || !strings.Contains(out, "1 added") {
		t.Fatalf("first sync: exit %d\n%s%s", code, out, errOut)
	}

	out, _, _ = run(t, nil, "--index", idx, "search", "platypus")
	m := regexp.MustCompile(`a\.md:\d+-\d+  block (\S+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("search does not print the block id:\n%s", out)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "expand", m[1]); code != 0 || !strings.Contains(out, "lays eggs") {
		t.Errorf("expand %s: exit %d\n%s%s", m[1], code, out, errOut)
	}

	if err := os.Rename(filepath.Join(src, "a.md"), filepath.Join(src, "b.md")); err != nil {
		t.Fatal(err)
	}
	out, _, code = run(t, nil, "--index", idx, "sync", "--dry-run", src)
	if code != 0 || !strings.Contains(out, "add 1, change 0, delete 1") || !strings.Contains(out, "dry run") {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	if out, _, _ = run(t, nil, "--index", idx, "documents"); !strings.Contains(out, "a.md") || strings.Contains(out, "b.md") {
		t.Errorf("the dry run changed the index:\n%s", out)
	}
	out, errOut, code = run(t, nil, "--index", idx, "sync", src)
	if code != 0 || !strings.Contains(out, "1 added, 0 replaced, 0 unchanged, 0 failed, 1 deleted") {
		t.Errorf("rename: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ = run(t, nil, "--index", idx, "documents"); strings.Contains(out, "a.md") || !strings.Contains(out, "b.md") {
		t.Errorf("after the rename:\n%s", out)
	}

	if err := os.Rename(src, filepath.Join(root, "unmounted")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "--index", idx, "sync", src)
	if code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, "--allow-delete-all") {
		t.Errorf("vanished dir: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ = run(t, nil, "--index", idx, "documents"); !strings.Contains(out, "b.md") {
		t.Errorf("the refused sync deleted:\n%s", out)
	}
	out, errOut, code = run(t, nil, "--index", idx, "sync", "--allow-delete-all", src)
	if code != 0 || !strings.Contains(out, "1 deleted") {
		t.Errorf("--allow-delete-all: exit %d\n%s%s", code, out, errOut)
	}
}
