package blobstore

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Listing records, blob ids and blobs while batches and single writes
// create and rename temporary files beside them never fails: a temporary
// file that vanishes between the directory read and its lstat is no
// error (issue 19, item 2: a live rebuild failed 11 of 11 times with
// "lstat …/documents/<id>.json.<rand>.tmp: no such file or directory").
func TestListingDuringWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				b := s.NewBatch()
				for j := range 16 {
					data := []byte(fmt.Sprintf("writer %d batch %d file %d", w, i, j))
					id, err := b.Put(ctx, data)
					if err == nil {
						err = b.PutRecord(ctx, &Record{DocID: DocID(string(data)), Source: string(data), BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
				if err := b.Sync(ctx); err != nil {
					t.Error(err)
					return
				}
				// A single write too: fileblob's own temporary file.
				data := []byte(fmt.Sprintf("writer %d single %d", w, i))
				id, err := s.Put(ctx, data)
				if err == nil {
					err = s.PutRecord(ctx, &Record{DocID: DocID(string(data)), Source: string(data), BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
				}
				if err != nil {
					t.Error(err)
					return
				}
				written.Add(17)
			}
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	lists := 0
	for time.Now().Before(deadline) && !t.Failed() {
		if _, err := s.Records(ctx); err != nil {
			t.Errorf("Records: %v", err)
		}
		if _, err := s.BlobIDs(ctx); err != nil {
			t.Errorf("BlobIDs: %v", err)
		}
		if _, err := s.Blobs(ctx); err != nil {
			t.Errorf("Blobs: %v", err)
		}
		lists++
	}
	stop.Store(true)
	wg.Wait()
	recs, err := s.Records(ctx)
	if err != nil || int64(len(recs)) != written.Load() {
		t.Errorf("after the writes: %d records, %v; want %d", len(recs), err, written.Load())
	}
	t.Logf("%d listings during %d writes", lists, written.Load())
}

// Objects and directories of a file:// store are private to the owner
// whatever the umask (issue 19, item 7).
func TestFileStoreIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "blobs")
	s, err := Open(ctx, (&url.URL{Scheme: "file", Path: root}).String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, _ := s.Put(ctx, []byte("single"))
	s.PutRecord(ctx, &Record{DocID: DocID("a"), Source: "a", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
	b := s.NewBatch()
	id, _ = b.Put(ctx, []byte("batched"))
	b.PutRecord(ctx, &Record{DocID: DocID("b"), Source: "b", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(p)
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want %v", p, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if n != 8 { // root, blobs, blobs/sha256, 2 blobs, documents, 2 records
		t.Errorf("%d entries checked, want 8", n)
	}
}
