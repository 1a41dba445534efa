package main

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/packtest"
)

// layouts are the blob store layouts the CLI tests run on: the ingest
// flags that make each (a new store is packed by default).
var layouts = []struct {
	name  string
	flags []string
}{{"packs", nil}, {"loose", []string{"--loose-blobs"}}}

// openBlobs opens the blob store of the index idx (file://idx/blobs).
func openBlobs(t *testing.T, idx string) *blobstore.Store {
	t.Helper()
	s, err := blobstore.Open(context.Background(), "file://"+filepath.Join(idx, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// blobOf returns the blob id of the document at source, as its record
// names it.
func blobOf(t *testing.T, idx, source string) string {
	t.Helper()
	s := openBlobs(t, idx)
	rec, err := s.GetRecord(context.Background(), blobstore.DocID(source))
	if err != nil {
		t.Fatalf("no record of %s: %v", source, err)
	}
	return rec.BlobID
}

// damageBlob flips a byte of blob id ("flip") or loses it ("remove"): its
// file in the loose layout; in the pack layout, a byte of its entry, or
// its packs rewritten without it.
func damageBlob(t *testing.T, idx, id, how string) {
	t.Helper()
	s := openBlobs(t, idx)
	if !s.Packed() {
		p := filepath.Join(idx, "blobs", "blobs", "sha256", strings.TrimPrefix(id, "sha256:"))
		if how == "remove" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return
		}
		data, _ := os.ReadFile(p)
		data[3] ^= 0x20
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	if how == "remove" {
		if _, err := s.Repack(context.Background(), blobstore.RepackOptions{DropBlobs: []string{id}, MinDead: 2}); err != nil {
			t.Fatal(err)
		}
		return
	}
	key, _ := hex.DecodeString(strings.TrimPrefix(id, "sha256:"))
	p, off, _ := packtest.PackedEntry(t, filepath.Join(idx, "blobs"), 'b', key)
	data, _ := os.ReadFile(p)
	data[off+3] ^= 0x20
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// escurel blobs pack moves a loose store into packs: the same digest,
// no loose file left, the store packed; run again, it has nothing to do;
// --loose-blobs on the packed store is refused.
func TestBlobsPack(t *testing.T) {
	src := goodDocs(t)
	idx := filepath.Join(t.TempDir(), "idx")
	if _, errOut, code := run(t, nil, "--index", idx, "--loose-blobs", "ingest", src); code != 0 {
		t.Fatal(errOut)
	}
	if s := openBlobs(t, idx); s.Packed() {
		t.Fatal("--loose-blobs made a packed store")
	}
	clean := digestOf(t, idx)
	out, errOut, code := run(t, nil, "--index", idx, "blobs", "pack")
	if code != 0 || !strings.Contains(out, "converted to the pack layout") || !strings.Contains(out, "packed        2 blobs, 2 records into 1 pack") {
		t.Fatalf("blobs pack: exit %d\n%s%s", code, out, errOut)
	}
	loose, _ := filepath.Glob(filepath.Join(idx, "blobs", "blobs", "sha256", "*"))
	recs, _ := filepath.Glob(filepath.Join(idx, "blobs", "documents", "*"))
	if len(loose)+len(recs) != 0 {
		t.Errorf("loose files left: %v %v", loose, recs)
	}
	if s := openBlobs(t, idx); !s.Packed() {
		t.Error("the store is not packed after blobs pack")
	}
	if got := digestOf(t, idx); got != clean {
		t.Errorf("digest after blobs pack %s, want %s", got, clean)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "verify", "--deep"); code != 0 {
		t.Errorf("verify --deep after blobs pack: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = run(t, nil, "--index", idx, "blobs", "pack")
	if code != 0 || !strings.Contains(out, "in the pack layout already") || !strings.Contains(out, "into 0 packs") {
		t.Errorf("blobs pack again: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "--loose-blobs", "search", "platypus"); code == 0 || !strings.Contains(errOut, "pack layout") {
		t.Errorf("--loose-blobs on a packed store: exit %d\n%s%s", code, out, errOut)
	}
}
