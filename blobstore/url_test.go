package blobstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/internal/s3test"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"s3://bucket?region=us-east-1&prefix=team%2F":                    "s3://bucket?region=us-east-1&prefix=team%2F",
		"file:///var/lib/escurel/blobs":                                  "file:///var/lib/escurel/blobs",
		"s3://AKIA:hunter2@bucket?region=eu":                             "s3://xxxxx@bucket?region=eu",
		"azblob://c?sas_token=sv%3D2024%26sig%3Dabc&domain=x":            "azblob://c?sas_token=xxxxx&domain=x",
		"s3://b?endpoint=http%3A%2F%2Fu%3Apw42x%40127.0.0.1%3A9000":      "s3://b?endpoint=http%3A%2F%2Fxxxxx%40127.0.0.1%3A9000",
		"gs://b?private_key_path=%2Fsecrets%2Fkey.pem&access_id=someone": "gs://b?private_key_path=xxxxx&access_id=someone",
		"s3://b?X-Amz-Signature=deadbeef&X-Amz-Security-Token=tok":       "s3://b?X-Amz-Signature=xxxxx&X-Amz-Security-Token=xxxxx",
		"s3://b\x7f?secret=x":                                            "(not a URL)",
		// Equivalent encodings of a secret, and pairs url.Query drops.
		"s3://b?region=x&secret_key=ab%2bcd":              "s3://b?region=x&secret_key=xxxxx",
		"s3://b?region=x&secret_key=a%41b":                "s3://b?region=x&secret_key=xxxxx",
		"s3://b?x-amz-security-token=tok;region=x":        "s3://b?x-amz-security-token=xxxxx;region=x",
		"s3://b?region=x&secret%5Fkey=abc":                "s3://b?region=x&secret%5Fkey=xxxxx",
		"s3://AKIAXXXX@b":                                 "s3://xxxxx@b",
		"s3://b/team/docs?region=x&token=t#frag":          "s3://b/team/docs?region=x&token=xxxxx#xxxxx",
		"s3://b?endpoint=http%3A%2F%2Fh%3A9%2F%3Fkey%3Dk": "s3://b?endpoint=http%3A%2F%2Fh%3A9%2F%3Fkey%3Dxxxxx",
		"s3://b?endpoint=u%3Apw%40h%3A9000":               "s3://b?endpoint=xxxxx%40h%3A9000",
		"s3://b?AKIAXXXXsecret&region=x":                  "s3://b?xxxxx&region=x",
		// A query that does not parse cleanly is hidden whole.
		"s3://b?region=x&secret_key=a%zzb":  "s3://b?xxxxx",
		"s3://b?region=x&endpoint=http%3A%": "s3://b?xxxxx",
		"s3:AKIA:secret@b":                  "s3:xxxxx",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSameURL(t *testing.T) {
	same := [][2]string{
		{"s3://b?region=r&endpoint=e", "s3://b?endpoint=e&region=r"},
		{"file:///x/blobs/", "file:///x/blobs"},
		{"s3://B?region=r", "s3://b?region=r"},
		// A path after the bucket is the key prefix (OpenBucket).
		{"s3://b/team?region=r", "s3://b?prefix=team/&region=r"},
		{"s3://b/team/docs/?region=r", "s3://b?region=r&prefix=team%2Fdocs%2F"},
		{"file:///x/blobs", "file:///x/blobs?create_dir=1"},
	}
	for _, p := range same {
		if !SameURL(p[0], p[1]) {
			t.Errorf("SameURL(%q, %q) = false", p[0], p[1])
		}
	}
	differ := [][2]string{
		{"s3://b?region=r", "s3://b?region=s"},
		{"s3://b?prefix=a%2F", "s3://b?prefix=b%2F"},
		{"s3://b", "gs://b"},
		{"file:///x/blobs", "file:///y/blobs"},
		{"s3://b?region=r", "s3://b?region=r&prefix=p%2F"},
		{"s3://b/team?region=r", "s3://b?prefix=team&region=r"},
		{"s3://b/team?region=r", "s3://b/other?region=r"},
		{"s3://u@b?region=r", "s3://b?region=r"},
		// A pair url.Query drops (";") is not ignored.
		{"s3://b?region=r;endpoint=e", "s3://b?region=r"},
		// A path and prefix= both do not open: not the same as anything.
		{"s3://b/team?prefix=team/", "s3://b?prefix=team/"},
	}
	for _, p := range differ {
		if SameURL(p[0], p[1]) {
			t.Errorf("SameURL(%q, %q) = true", p[0], p[1])
		}
	}
}

// Open's errors name the store without its secrets, whatever the driver
// quotes.
func TestOpenErrorHidesSecrets(t *testing.T) {
	for _, u := range []string{
		"s3://bucket?region=us-east-1&x_secret=zzsecret42",
		"s3://AKIA:zzsecret42@bucket?nosuchparam=1",
		"s3://bucket?endpoint=http%3A%2F%2Fu%3Azzsecret42%40127.0.0.1%3A1&bogus=1",
		"s3://bu cket\x7f?token=zzsecret42",
		"s3://bucket?region=us-east-1&bogus=1&x_secret=zz%73ecret42",
		"s3://zzsecret42@bucket?nosuchparam=1",
		"s3://bucket?nosuchparam=1&a=1;token=zzsecret42",
	} {
		_, err := Open(context.Background(), u)
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "zzsecret42") {
			t.Errorf("Open(%q): the error shows the secret: %v", u, err)
		}
	}
}

// A path after an object store's bucket is a key prefix (gocloud's
// drivers ignore it: the objects would land at the bucket's root, and two
// indexes on one bucket would mix).
func TestObjectStorePathIsPrefix(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	root := srv.Bucket(t, "paths", "")
	withPath := strings.Replace(root, "s3://paths?", "s3://paths/team/docs?", 1)
	s, err := OpenWith(ctx, withPath, &OpenOptions{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, err := s.Put(ctx, []byte("under the prefix"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := BlobKey(id)
	r, err := Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ok, err := r.bucket.Exists(ctx, "team/docs/"+key); err != nil || !ok {
		t.Errorf("the blob is not at team/docs/%s: %v", key, err)
	}
	if ok, _ := r.bucket.Exists(ctx, key); ok {
		t.Errorf("the blob is at the bucket's root")
	}
	if _, err := Open(ctx, withPath+"&prefix=other%2F"); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("a path and prefix= both: %v", err)
	}
}

// UploadFiles opens its bucket as OpenBucket does: a file:// destination
// is created when missing and private (directories 0700, objects 0600),
// and a path after an object store's bucket is the key prefix.
func TestUploadFilesOpensAsOpenBucket(t *testing.T) {
	withUmask(t, 0o022)
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.parquet"), []byte("rows"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "missing", "exports")
	if err := UploadFiles(ctx, "file://"+dst, src, []string{"a.parquet"}); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dst, "a.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("uploaded file mode %v, want 0600", info.Mode().Perm())
	}

	srv := s3test.Start(t)
	root := srv.Bucket(t, "uploads", "")
	if err := UploadFiles(ctx, strings.Replace(root, "s3://uploads?", "s3://uploads/team/x?", 1), src, []string{"a.parquet"}); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBucket(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ok, err := b.Exists(ctx, "team/x/a.parquet"); err != nil || !ok {
		t.Errorf("team/x/a.parquet not uploaded: %v", err)
	}
}
