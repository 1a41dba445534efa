package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testS3EveryCommand(t, fmt.Sprintf("every%d", i), l.flags) })
	}
}

func testS3EveryCommand(t *testing.T, name string, flags []string) {
	ctx := context.Background()
	srv := s3test.Start(t)
	blobs := srv.Bucket(t, name, "team/")
	bucket := openBucket(t, blobs)
	loose := len(flags) > 0
	// stored says whether the store holds data's blob, or a record of
	// source: its object in the loose layout, a packed entry otherwise.
	stored := func(data, source string) bool {
		t.Helper()
		key := blobKeyOf(data)
		if source != "" {
			key = "documents/" + blobstore.DocID(source) + ".json"
		}
		if loose {
			ok, err := bucket.Exists(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		s, err := blobstore.Open(ctx, blobs)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if source != "" {
			_, err = s.GetRecord(ctx, blobstore.DocID(source))
		} else {
			_, err = s.Get(ctx, "sha256:"+strings.TrimPrefix(key, "blobs/sha256/"))
		}
		if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
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
	mustRun(t, append(append([]string{"--index", idx, "--blobs", blobs}, flags...), "ingest", src)...)
	for _, data := range files {
		if !stored(data, "") {
			t.Fatalf("blob of %q not in the bucket", data[:8])
		}
	}
	if s := openBlobsAt(t, blobs); s.Packed() == loose {
		t.Fatalf("the bucket's layout: packed %v, want %v", s.Packed(), !loose)
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
	if !stored(oldNotes, "") {
		t.Fatal("gc --dry-run removed the orphan object")
	}
	if out := mustRun(t, "--index", idx, "gc"); !strings.Contains(out, "orphan blobs       1") {
		t.Errorf("gc:\n%s", out)
	}
	if stored(oldNotes, "") {
		t.Error("gc left the orphan object in the bucket")
	}

	// verify --deep reports an object damaged in the bucket, and a
	// re-ingest of its source repairs it.
	guide := filepath.Join(src, "guide.md")
	if loose {
		if err := bucket.WriteAll(ctx, blobKeyOf(files["guide.md"]), []byte("# Guide\n\nsomething else entirely\n"), nil); err != nil {
			t.Fatal(err)
		}
	} else {
		sum := sha256.Sum256([]byte(files["guide.md"]))
		key, off := packedEntryInBucket(t, bucket, 'b', sum[:])
		data, err := bucket.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		data[off+3] ^= 0x20
		if err := bucket.WriteAll(ctx, key, data, nil); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := run(t, nil, "--index", idx, "verify", "--deep")
	if code != 1 || !strings.Contains(out, guide) || !strings.Contains(out, strings.TrimPrefix(blobKeyOf(files["guide.md"]), "blobs/sha256/")) {
		t.Errorf("verify --deep with a damaged object: exit %d\n%s%s", code, out, errOut)
	}
	mustRun(t, "--index", idx, "ingest", guide)
	mustRun(t, "--index", idx, "verify", "--deep")

	// delete: the record object goes; --purge: the blob object too.
	mustRun(t, "--index", idx, "delete", filepath.Join(src, "old.md"))
	if stored("", filepath.Join(src, "old.md")) {
		t.Error("delete left the record object")
	}
	mustRun(t, "--index", idx, "delete", "--purge", filepath.Join(src, "gone.md"))
	for _, data := range []string{files["gone.md"], files["old.md"]} {
		if stored(data, "") {
			t.Errorf("purge left the blob of %q in the bucket", data[:8])
		}
	}
	if stored("", filepath.Join(src, "gone.md")) {
		t.Error("purge left the record of gone.md in the bucket")
	}
	if !loose {
		// Every byte of the purged document gone from every object.
		it := bucket.List(nil)
		for {
			obj, err := it.Next(ctx)
			if err != nil {
				break
			}
			data, _ := bucket.ReadAll(ctx, obj.Key)
			if strings.Contains(string(data), "wombat memo") || strings.Contains(string(data), "obsolete platypus") {
				t.Errorf("purge left the bytes of a purged or deleted document in %s", obj.Key)
			}
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

// openBlobsAt opens the blob store at u.
func openBlobsAt(t *testing.T, u string) *blobstore.Store {
	t.Helper()
	s, err := blobstore.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// packedEntryInBucket returns the pack object holding the newest entry
// of kind and key in the bucket, and its data's offset (the format as
// blobstore/pack.go pins it; packedEntry's, for a bucket).
func packedEntryInBucket(t *testing.T, b *blob.Bucket, kind byte, key []byte) (string, int64) {
	t.Helper()
	ctx := context.Background()
	var names []string
	it := b.List(&blob.ListOptions{Prefix: "packs/"})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			break
		}
		if strings.HasSuffix(obj.Key, ".pack") {
			names = append(names, obj.Key)
		}
	}
	sort.Strings(names)
	const entrySize, trailerSize = 1 + 32 + 8 + 8 + 4, 32
	found, at := "", int64(0)
	for _, name := range names {
		data, err := b.ReadAll(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tr := data[len(data)-trailerSize:]
		count := int(binary.LittleEndian.Uint32(tr[12:]))
		idx := binary.LittleEndian.Uint64(tr[16:])
		for i := range count {
			e := data[int(idx)+i*entrySize:]
			if e[0] == kind && bytes.Equal(e[1:1+len(key)], key) {
				found, at = name, int64(binary.LittleEndian.Uint64(e[33:]))
			}
		}
	}
	if found == "" {
		t.Fatalf("no packed entry %c %x in the bucket", kind, key)
	}
	return found, at
}
