package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	s, err := OpenWith(ctx, (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(), &OpenOptions{Loose: true})
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
						err = b.PutRecord(ctx, &Record{DocID: DocID(string(data)), Source: string(data), Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
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
					err = s.PutRecord(ctx, &Record{DocID: DocID(string(data)), Source: string(data), Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
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
	withUmask(t, 0o022)
	ctx := context.Background()
	for _, loose := range []bool{true, false} {
		root := filepath.Join(t.TempDir(), "blobs")
		s, err := OpenWith(ctx, (&url.URL{Scheme: "file", Path: root}).String(), &OpenOptions{Loose: loose})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := s.Put(ctx, []byte("single"))
		s.PutRecord(ctx, &Record{DocID: DocID("a"), Source: "a", Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
		b := s.NewBatch()
		id, _ = b.Put(ctx, []byte("batched"))
		b.PutRecord(ctx, &Record{DocID: DocID("b"), Source: "b", Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()})
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close()
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
		// Loose: root, LAYOUT, blobs, blobs/sha256, 2 blobs, documents,
		// 2 records. Packed: root, LAYOUT, blobs, blobs/sha256,
		// documents, packs, 3 packs (Put, PutRecord, the batch; too few
		// for Close to write the multi-pack index), and packs/SEQ where
		// flock numbers the packs.
		want := 9
		if !loose && seqFileLocks {
			want = 10
		}
		if n != want {
			t.Errorf("loose %v: %d entries checked, want %d", loose, n, want)
		}
	}
}

// Damaged records (issue 19, item 5): empty, truncated, binary, a source
// that no longer hashes to the doc id, an unreadable sensitivity. Each is
// listed by ScanRecords with its key and, when the damaged bytes still
// hold it, its source, while the intact records are returned; Records
// refuses with all of them; GetRecord names the key and the source.
func TestDamagedRecordsAreListed(t *testing.T) {
	ctx := context.Background()
	s, err := OpenWith(ctx, (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(), &OpenOptions{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, _ := s.Put(ctx, []byte("bytes"))
	names := []string{"/docs/ok.md", "/docs/empty.md", "/docs/truncated.md", "/docs/binary.md", "/docs/source.md", "/docs/sensitivity.md"}
	for _, src := range names {
		if err := s.PutRecord(ctx, &Record{DocID: DocID(src), Source: src, Sensitivity: "restricted", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	file := func(src string) string { return filepath.Join(s.localDir, "documents", DocID(src)+".json") }
	damage := map[string]func([]byte) []byte{
		"/docs/empty.md":       func([]byte) []byte { return nil },
		"/docs/truncated.md":   func(b []byte) []byte { return b[:len(b)*2/3] },
		"/docs/binary.md":      func([]byte) []byte { return []byte{0x00, 0xff, 0x13, 0x37} },
		"/docs/source.md":      func(b []byte) []byte { return []byte(strings.Replace(string(b), "source.md", "sourcf.md", 1)) },
		"/docs/sensitivity.md": func(b []byte) []byte { return []byte(strings.Replace(string(b), `"restricted"`, `"restrictea"`, 1)) },
	}
	for src, f := range damage {
		data, err := os.ReadFile(file(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file(src), f(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs, damaged, err := s.ScanRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Source != "/docs/ok.md" {
		t.Errorf("intact records: %+v", recs)
	}
	if len(damaged) != len(damage) {
		t.Fatalf("damaged: %+v, want %d", damaged, len(damage))
	}
	for _, d := range damaged {
		var src string
		for s := range damage {
			if DocID(s) == d.DocID {
				src = s
			}
		}
		if d.Key != "documents/"+d.DocID+".json" || d.Reason == "" {
			t.Errorf("%+v", d)
		}
		// The source is known when the damaged bytes still name it.
		wantSrc := src
		if src == "/docs/empty.md" || src == "/docs/binary.md" || src == "/docs/source.md" {
			wantSrc = ""
		}
		if d.Source != wantSrc {
			t.Errorf("%s: salvaged source %q, want %q (%s)", d.Key, d.Source, wantSrc, d.Reason)
		}
	}
	_, err = s.Records(ctx)
	var de *DamagedRecordsError
	if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) || len(de.Records) != len(damage) {
		t.Fatalf("Records: %v", err)
	}
	for src := range damage {
		if !strings.Contains(err.Error(), DocID(src)) {
			t.Errorf("Records' error does not name %s: %v", src, err)
		}
	}
	_, err = s.GetRecord(ctx, DocID("/docs/truncated.md"))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "documents/"+DocID("/docs/truncated.md")+".json") || !strings.Contains(err.Error(), "/docs/truncated.md") {
		t.Errorf("GetRecord of a truncated record: %v", err)
	}
	// A record that could not be read back is never stored.
	if err := s.PutRecord(ctx, &Record{DocID: DocID("/x"), Source: "/x", Sensitivity: "secret", BlobID: id}); err == nil {
		t.Error("PutRecord stored an unknown sensitivity")
	}
}
