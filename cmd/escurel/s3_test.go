package main

import (
	"path/filepath"
	"strings"
	"testing"

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
