package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
)

// BlobInfo describes one stored blob.
type BlobInfo struct {
	ID      string    // "sha256:<64 hex>"
	Size    int64     // bytes
	ModTime time.Time // when it was written, as the store reports it
}

// Blobs lists every blob in the store with its size, ordered by id.
// Objects under blobs/ that are not blobs (temporary files) are left out.
func (s *Store) Blobs(ctx context.Context) ([]BlobInfo, error) {
	var out []BlobInfo
	err := s.list(ctx, "blobs/sha256/", true, func(name string, size int64, mod time.Time) {
		if _, err := BlobKey("sha256:" + name); err == nil {
			out = append(out, BlobInfo{ID: "sha256:" + name, Size: size, ModTime: mod})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	if s.px != nil {
		packed, err := s.packedBlobs(ctx)
		if err != nil {
			return nil, fmt.Errorf("list blobs: %w", err)
		}
		out = mergeBlobInfos(packed, out)
	}
	return out, nil // the listing is in key order, which is id order
}

// DeleteBlob removes blob id; it returns once the removal is durable (for
// file:// stores, the directory is fsynced). Deleting a blob that does not
// exist is not an error. The caller checks that no record names the blob:
// blobs are content-addressed and shared. On a versioned object store
// (S3 versioning, GCS object versions) the provider keeps the old
// version: the bytes are not erased there.
func (s *Store) DeleteBlob(ctx context.Context, id string) error {
	key, err := BlobKey(id)
	if err != nil {
		return fmt.Errorf("delete blob: %w", err)
	}
	if s.px != nil {
		if _, err := s.Repack(ctx, RepackOptions{DropBlobs: []string{id}, MinDead: 2}); err != nil {
			return fmt.Errorf("delete blob %s: %w", id, err)
		}
		return nil
	}
	return s.deleteLooseBlob(ctx, id, key)
}

// deleteLooseBlob removes the loose blob id at key, durably.
func (s *Store) deleteLooseBlob(ctx context.Context, id, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("delete blob %s: %w", id, err)
	}
	if s.localDir != "" {
		return syncDir(filepath.Dir(s.localPath(key)))
	}
	return nil
}

// TempFile is a temporary file a crashed write left in a file:// store.
type TempFile struct {
	Path    string // absolute path
	Size    int64  // bytes
	ModTime time.Time
}

// TempFiles lists the temporary files in a file:// store that a crash or
// a failed write left behind: escurel's names only (LAYOUT.<hex>.tmp in
// the root; under blobs/, documents/ and packs/, a Batch's or the file
// driver's NAME.<hex>.tmp beside the final name and a batch's pack
// packs/<hex>.pack.tmp), never another program's file that ends in .tmp.
// The files of writes under way in this process (an unsynced Batch's) are
// left out, so removing every file listed is safe while this process
// writes, as long as no other process writes the store (one writing index
// per blob store). Other stores have none; the list is empty.
func (s *Store) TempFiles(ctx context.Context) ([]TempFile, error) {
	if s.localDir == "" {
		return nil, nil
	}
	var out []TempFile
	// The root's own: LAYOUT's, written once (createOnce).
	if entries, err := os.ReadDir(s.localDir); err == nil {
		for _, e := range entries {
			path := filepath.Join(s.localDir, e.Name())
			if !e.Type().IsRegular() || !isTempName(e.Name(), true) || tempLive(path) {
				continue
			}
			if fi, err := e.Info(); err == nil {
				out = append(out, TempFile{Path: path, Size: fi.Size(), ModTime: fi.ModTime()})
			}
		}
	}
	for _, sub := range []string{"blobs", "documents", "packs"} {
		root := filepath.Join(s.localDir, sub)
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if e.IsDir() || !isTempName(e.Name(), false) || tempLive(path) {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			out = append(out, TempFile{Path: path, Size: fi.Size(), ModTime: fi.ModTime()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list temporary files of %s: %w", s.Redacted(), err)
		}
	}
	return out, nil
}

// isTempName reports whether name is one of escurel's temporary file
// names: in the store's root (root) LAYOUT.<hex>.tmp only; below it
// NAME.<hex>.tmp or <hex>.pack.tmp.
func isTempName(name string, root bool) bool {
	stem, ok := strings.CutSuffix(name, ".tmp")
	if !ok {
		return false
	}
	if h, ok := strings.CutSuffix(stem, ".pack"); ok && !root && isHex(h) {
		return true
	}
	i := strings.LastIndexByte(stem, '.')
	if i <= 0 || !isHex(stem[i+1:]) {
		return false
	}
	return !root || stem[:i] == layoutKey
}

// isHex reports whether h is a non-empty string of lower-case hex digits.
func isHex(h string) bool {
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return h != ""
}

// RemoveTemp removes a temporary file that TempFiles listed. It refuses a
// path outside the store, not named as one of escurel's temporary files,
// or of a write under way in this process.
func (s *Store) RemoveTemp(path string) error {
	rel, err := filepath.Rel(s.localDir, path)
	if s.localDir == "" || err != nil || strings.HasPrefix(rel, "..") || !isTempName(filepath.Base(path), filepath.Dir(rel) == ".") || tempLive(path) {
		return fmt.Errorf("remove %s: not a temporary file of %s", path, s.Redacted())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}
