package blobstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Blobs lists sizes; DeleteBlob removes one (and is idempotent); for a
// file:// store no file of it stays, and the temporary files a crash left
// are listed and removed.
func TestDeleteBlobAndTempFiles(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			keep, err := s.Put(ctx, []byte("kept bytes"))
			if err != nil {
				t.Fatal(err)
			}
			gone, err := s.Put(ctx, []byte("erased bytes!"))
			if err != nil {
				t.Fatal(err)
			}
			bs, err := s.Blobs(ctx)
			if err != nil || len(bs) != 2 {
				t.Fatalf("Blobs = %v, %v", bs, err)
			}
			for _, b := range bs {
				if want := map[string]int64{keep: 10, gone: 13}[b.ID]; b.Size != want {
					t.Errorf("%s: size %d, want %d", b.ID, b.Size, want)
				}
			}
			if err := s.DeleteBlob(ctx, gone); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteBlob(ctx, gone); err != nil {
				t.Errorf("second delete: %v", err)
			}
			if _, err := s.Get(ctx, gone); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get after DeleteBlob: %v", err)
			}
			if _, err := s.Get(ctx, keep); err != nil {
				t.Errorf("the other blob: %v", err)
			}
			if err := s.DeleteBlob(ctx, "sha256:xyz"); err == nil {
				t.Error("DeleteBlob of a malformed id succeeded")
			}
			tmps, err := s.TempFiles(ctx)
			if err != nil || len(tmps) != 0 {
				t.Fatalf("TempFiles of a clean store = %v, %v", tmps, err)
			}
			if s.localDir == "" {
				return
			}
			key, _ := BlobKey(gone)
			if _, err := os.Stat(s.localPath(key)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the blob's file stays: %v", err)
			}
			planted := s.localPath(key) + ".17a2b3c4d5e6f.tmp"
			if err := os.WriteFile(planted, []byte("half a blob"), 0o644); err != nil {
				t.Fatal(err)
			}
			tmps, err = s.TempFiles(ctx)
			if err != nil || len(tmps) != 1 || tmps[0].Path != planted || tmps[0].Size != 11 {
				t.Fatalf("TempFiles = %+v, %v; want the planted one", tmps, err)
			}
			if err := s.RemoveTemp(filepath.Join(s.localDir, "..", "x.tmp")); err == nil {
				t.Error("RemoveTemp outside the store succeeded")
			}
			if err := s.RemoveTemp(planted); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(planted); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the temporary file stays: %v", err)
			}
		})
	}
}
