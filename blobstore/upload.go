package blobstore

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
)

// UploadFiles copies the files names (plain names) of the local directory
// dir into the bucket at urlstr, opened as OpenBucket does, each under its
// name (below the URL's key prefix: a path after an object store's
// bucket, or prefix=; a file:// directory is created, private),
// replacing objects of the same name, and returns once every upload is
// complete. Files are streamed, not read into memory. It is for exports
// written locally first (escurel export --parquet s3://…); the blob
// store's own objects go through Store. Errors name the URL without its
// secrets and the file.
func UploadFiles(ctx context.Context, urlstr, dir string, names []string) error {
	shown := Redact(urlstr)
	b, err := OpenBucket(ctx, urlstr)
	if err != nil {
		return fmt.Errorf("upload to %s: %w", shown, err)
	}
	defer b.Close()
	for _, name := range names {
		if err := uploadFile(ctx, b, filepath.Join(dir, name), name); err != nil {
			return fmt.Errorf("upload %s to %s: %w", name, shown, scrubError(err, urlstr))
		}
	}
	return nil
}

func uploadFile(ctx context.Context, b *blob.Bucket, path, key string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ct := "application/octet-stream"
	if filepath.Ext(key) == ".parquet" {
		ct = "application/vnd.apache.parquet"
	}
	w, err := b.NewWriter(ctx, key, &blob.WriterOptions{
		ContentType: ct,
		BeforeWrite: func(as func(any) bool) error {
			var tmp *os.File
			if as(&tmp) { // a file:// bucket: fileblob creates it 0666 less the umask
				return tmp.Chmod(0o600)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		cancel() // abandons the upload
		w.Close()
		return err
	}
	return w.Close()
}
