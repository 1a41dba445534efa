package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
)

// gc removes an orphan blob (the old bytes of a replaced document) and
// planted crash leftovers (a blob store temporary file, an index
// directory temporary file), prints the figures; --dry-run removes
// nothing; status --clearance restricted shows the reclaimable bytes,
// status without it does not.
func TestGC(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testGC(t, l.flags) })
	}
}

func testGC(t *testing.T, flags []string) {
	tmp := t.TempDir()
	idx, src := filepath.Join(tmp, "idx"), filepath.Join(tmp, "src")
	os.MkdirAll(src, 0o755)
	doc := filepath.Join(src, "a.md")
	old := "# A\n\nthe first version of a.\n"
	os.WriteFile(doc, []byte(old), 0o644)
	os.WriteFile(filepath.Join(src, "b.md"), []byte("# B\n\nanother document.\n"), 0o644)
	if out, errOut, code := run(t, nil, append(append([]string{"--index", idx}, flags...), "ingest", src)...); code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
	}
	os.WriteFile(doc, []byte("# A\n\nthe second version of a.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
	}
	sum := sha256.Sum256([]byte(old))
	orphanID := "sha256:" + hex.EncodeToString(sum[:])
	stored := func() bool {
		_, err := openBlobs(t, idx).Get(context.Background(), orphanID)
		if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !stored() {
		t.Fatal("the old version's blob is not stored")
	}
	blobTmp := filepath.Join(idx, "blobs", "documents", "0123456789abcdef0123456789abcdef.json.17f00ba4.tmp")
	dirTmp := filepath.Join(idx, "CURRENT.tmp")
	for _, p := range []string{blobTmp, dirTmp} {
		if err := os.WriteFile(p, []byte("leftover"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := run(t, nil, "--index", idx, "status")
	if code != 0 || strings.Contains(out, "reclaimable") {
		t.Errorf("status at public clearance shows reclaimable bytes (sizes of deleted documents):\n%s", out)
	}
	out, _, code = run(t, nil, "--index", idx, "status", "--clearance", "restricted")
	if code != 0 || !strings.Contains(out, "1 orphan blob (29 B)") || !strings.Contains(out, "2 leftovers (16 B)") {
		t.Errorf("status --clearance restricted:\n%s", out)
	}

	out, errOut, code := run(t, nil, "--index", idx, "gc", "--dry-run")
	if code != 0 {
		t.Fatalf("gc --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"gc would remove:", "orphan blobs       1 (29 B)", "temporary files    2 (16 B)", "total              45 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("gc --dry-run output lacks %q:\n%s", want, out)
		}
	}
	for _, p := range []string{blobTmp, dirTmp} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("gc --dry-run removed %s", p)
		}
	}
	if !stored() {
		t.Error("gc --dry-run removed the orphan blob")
	}

	out, errOut, code = run(t, nil, "--index", idx, "gc")
	if code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"gc removed:", "orphan blobs       1 (29 B)", "temporary files    2 (16 B)", "total              45 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("gc output lacks %q:\n%s", want, out)
		}
	}
	for _, p := range []string{blobTmp, dirTmp} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("gc left %s", p)
		}
	}
	if stored() {
		t.Error("gc left the orphan blob")
	}
	out, _, _ = run(t, nil, "--index", idx, "gc")
	if !strings.Contains(out, "total              0 B") {
		t.Errorf("a second gc:\n%s", out)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "verify"); code != 0 {
		t.Errorf("verify after gc: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "second"); !strings.Contains(out, "a.md") {
		t.Errorf("search after gc:\n%s", out)
	}
}
