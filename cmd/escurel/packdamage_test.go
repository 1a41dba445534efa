package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
)

// A pack whose index cannot be read names no document: verify lists it
// with the repair that helps (restore or remove the pack), never
// "escurel delete" with an empty doc id, and rebuild refuses even with
// --allow-missing.
func TestVerifyDamagedPackRepair(t *testing.T) {
	src := goodDocs(t)
	idx := filepath.Join(t.TempDir(), "idx")
	if err := blobstore.UsePacks(context.Background(), "file://"+filepath.Join(idx, "blobs")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatal(errOut)
	}
	packs, _ := filepath.Glob(filepath.Join(idx, "blobs", "packs", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("no pack written: the test proves nothing")
	}
	sort.Strings(packs)
	last := packs[len(packs)-1]
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(last, data[:len(data)-5], 0o600)
	out, errOut, code := run(t, nil, "--index", idx, "verify")
	if code != 1 || !strings.Contains(out, filepath.Base(last)) {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "restore the pack") || strings.Contains(out, "escurel delete \n") {
		t.Errorf("verify's repair for a damaged pack:\n%s", out)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--allow-missing")
	if code == 0 || !strings.Contains(out+errOut, filepath.Base(last)) {
		t.Errorf("rebuild --allow-missing over a damaged pack: exit %d\n%s%s", code, out, errOut)
	}
}
