package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/s3test"
)

// TestS3BlobStore: the command opens s3:// blob stores (here a real S3
// protocol server on 127.0.0.1): ingest puts the blobs and records in the
// bucket, search answers from the index, and a second directory rebuilt from
// the bucket alone answers the same.
func TestS3BlobStore(t *testing.T) {
	srv := s3test.Start(t)
	blobs := srv.Bucket(t, "escurel", "team/")
	idx := filepath.Join(t.TempDir(), "idx")
	src := goodDocs(t)
	if out, errOut, code := run(t, nil, "--index", idx, "--blobs", blobs, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := run(t, nil, "--index", idx, "search", "bill sensors")
	if code != 0 || !strings.Contains(out, "guide.md") {
		t.Fatalf("search: %d\n%s\n%s", code, out, errOut)
	}
	other := filepath.Join(t.TempDir(), "other")
	if out, errOut, code := run(t, nil, "--index", other, "--blobs", blobs, "rebuild"); code != 0 {
		t.Fatalf("rebuild from the bucket: %d\n%s\n%s", code, out, errOut)
	}
	out2, errOut, code := run(t, nil, "--index", other, "search", "bill sensors")
	if code != 0 || out2 != out {
		t.Fatalf("search after rebuild from the bucket: %d\n%s\nwant\n%s\n%s", code, out2, out, errOut)
	}
}

// openBucket opens the test's bucket directly (as another tool would), to
// look at and damage the objects escurel wrote.
func openBucket(t *testing.T, u string) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func blobKeyOf(data string) string {
	sum := sha256.Sum256([]byte(data))
	return "blobs/sha256/" + hex.EncodeToString(sum[:])
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(t, nil, args...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// Every command that touches blobs works on an s3:// store: ingest, sync,
// search, expand, documents, status, verify (--deep finds a damaged object
// in the bucket), gc (the orphan object goes), delete (the record object
// goes), delete --purge (the blob object goes), reembed, serve, and a
// rebuild from the bucket alone into an empty directory reproduces the
// writer's digest.
func TestS3EveryCommand(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	blobs := srv.Bucket(t, "every", "team/")
	bucket := openBucket(t, blobs)
	tmp := t.TempDir()
	idx, src := filepath.Join(tmp, "idx"), filepath.Join(tmp, "src")
	os.MkdirAll(src, 0o755)
	files := map[string]string{
		"guide.md": "# Guide\n\nInstall the egg-laying toolchain.\n\n## Tuning\n\nTune the bill sensors.\n",
		"notes.md": "# Notes\n\nLoose notes about sensors.\n",
		"old.md":   "# Old\n\nAn obsolete platypus procedure.\n",
		"gone.md":  "# Gone\n\nA wombat memo to be erased.\n",
	}
	for name, data := range files {
		os.WriteFile(filepath.Join(src, name), []byte(data), 0o644)
	}
	mustRun(t, "--index", idx, "--blobs", blobs, "ingest", src)
	for _, data := range files {
		if ok, err := bucket.Exists(ctx, blobKeyOf(data)); err != nil || !ok {
			t.Fatalf("blob of %q not in the bucket: %v", data[:8], err)
		}
	}

	// Reads.
	out := mustRun(t, "--index", idx, "status")
	if !strings.Contains(out, "s3://every") || !strings.Contains(out, "(0 failed)") {
		t.Errorf("status:\n%s", out)
	}
	mustRun(t, "--index", idx, "status", "--clearance", "restricted")
	out = mustRun(t, "--index", idx, "documents")
	for name := range files {
		if !strings.Contains(out, name) {
			t.Errorf("documents lacks %s:\n%s", name, out)
		}
	}
	out = mustRun(t, "--index", idx, "search", "--json", "bill sensors")
	var res searchOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Hits) == 0 {
		t.Fatalf("search --json: %v\n%s", err, out)
	}
	if out := mustRun(t, "--index", idx, "expand", res.Hits[0].BlockID); !strings.Contains(out, "sensors") {
		t.Errorf("expand:\n%s", out)
	}
	mustRun(t, "--index", idx, "verify", "--deep")

	// sync: a changed file is read again; its old blob is an orphan in
	// the bucket, which gc removes.
	oldNotes := files["notes.md"]
	os.WriteFile(filepath.Join(src, "notes.md"), []byte("# Notes\n\nNew notes about sensors and bills.\n"), 0o644)
	if out := mustRun(t, "--index", idx, "sync", src); !strings.Contains(out, "1 replaced") {
		t.Errorf("sync:\n%s", out)
	}
	if out := mustRun(t, "--index", idx, "gc", "--dry-run"); !strings.Contains(out, "orphan blobs       1") {
		t.Errorf("gc --dry-run:\n%s", out)
	}
	if ok, _ := bucket.Exists(ctx, blobKeyOf(oldNotes)); !ok {
		t.Fatal("gc --dry-run removed the orphan object")
	}
	if out := mustRun(t, "--index", idx, "gc"); !strings.Contains(out, "orphan blobs       1") {
		t.Errorf("gc:\n%s", out)
	}
	if ok, _ := bucket.Exists(ctx, blobKeyOf(oldNotes)); ok {
		t.Error("gc left the orphan object in the bucket")
	}

	// verify --deep reports an object damaged in the bucket, and a
	// re-ingest of its source repairs it.
	guide := filepath.Join(src, "guide.md")
	if err := bucket.WriteAll(ctx, blobKeyOf(files["guide.md"]), []byte("# Guide\n\nsomething else entirely\n"), nil); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, nil, "--index", idx, "verify", "--deep")
	if code != 1 || !strings.Contains(out, guide) || !strings.Contains(out, strings.TrimPrefix(blobKeyOf(files["guide.md"]), "blobs/sha256/")) {
		t.Errorf("verify --deep with a damaged object: exit %d\n%s%s", code, out, errOut)
	}
	mustRun(t, "--index", idx, "ingest", guide)
	mustRun(t, "--index", idx, "verify", "--deep")

	// delete: the record object goes; --purge: the blob object too.
	mustRun(t, "--index", idx, "delete", filepath.Join(src, "old.md"))
	if ok, _ := bucket.Exists(ctx, "documents/"+blobstore.DocID(filepath.Join(src, "old.md"))+".json"); ok {
		t.Error("delete left the record object")
	}
	mustRun(t, "--index", idx, "delete", "--purge", filepath.Join(src, "gone.md"))
	for _, key := range []string{blobKeyOf(files["gone.md"]), blobKeyOf(files["old.md"]),
		"documents/" + blobstore.DocID(filepath.Join(src, "gone.md")) + ".json"} {
		if ok, _ := bucket.Exists(ctx, key); ok {
			t.Errorf("purge left %s in the bucket", key)
		}
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "wombat"); strings.Contains(out, "gone.md") {
		t.Errorf("search finds the purged document:\n%s", out)
	}

	// rebuild from the bucket alone, into an empty directory: the
	// writer's digest.
	want := digestOf(t, idx)
	other := filepath.Join(tmp, "other")
	mustRun(t, "--index", other, "--blobs", blobs, "rebuild")
	if got := digestOf(t, other); got != want {
		t.Errorf("rebuilt from the bucket: digest %s, want the writer's %s", got, want)
	}
	mustRun(t, "--index", idx, "rebuild")
	if got := digestOf(t, idx); got != want {
		t.Errorf("rebuilt in place: digest %s, want %s", got, want)
	}
	mustRun(t, "--index", idx, "reembed", "--embedder", "hash/64")
	mustRun(t, "--index", idx, "verify", "--deep")

	// serve on the s3-backed index: the CLI's commands run in it.
	startServe(t, idx)
	if out := mustRun(t, "--index", idx, "search", "bill sensors"); !strings.Contains(out, "guide.md") {
		t.Errorf("search through serve:\n%s", out)
	}
	if out := mustRun(t, "--index", idx, "status"); !strings.Contains(out, "s3://every") {
		t.Errorf("status through serve:\n%s", out)
	}
	mustRun(t, "--index", idx, "--blobs", blobs, "verify", "--deep")
	mustRun(t, "--index", idx, "gc")
}
