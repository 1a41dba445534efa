package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/escurel/escurel/internal/s3test"
)

// stores returns one fresh store per backend and layout; every test runs
// against all: memory, a directory, and S3 (a real S3 protocol server on
// 127.0.0.1, through gocloud's s3blob driver, under a key prefix), each in
// the loose layout (OpenOptions.Loose) and in the pack layout, a new
// store's default ("+packs").
func stores(t *testing.T) map[string]*Store {
	t.Helper()
	ctx := context.Background()
	out := map[string]*Store{}
	srv := s3test.Start(t)
	for name, u := range map[string]string{
		"mem":        "mem://",
		"file":       (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(),
		"s3":         srv.Bucket(t, "blobstore", "suite/"),
		"file+packs": (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(),
		"s3+packs":   srv.Bucket(t, "packed", "suite/"),
	} {
		// A new store is packed by default; the others ask for loose.
		packs := strings.HasSuffix(name, "+packs")
		s, err := OpenWith(ctx, u, &OpenOptions{Loose: !packs})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Packed() != packs {
			t.Fatalf("%s: Packed() = %v", name, s.Packed())
		}
		t.Cleanup(func() { s.Close() })
		out[name] = s
	}
	return out
}

func TestPutGet(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			data := []byte("# Title\n\nbody ü\n")
			id, err := s.Put(ctx, data)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(id, "sha256:") || len(id) != len("sha256:")+64 {
				t.Fatalf("id = %q", id)
			}
			id2, err := s.Put(ctx, data)
			if err != nil || id2 != id {
				t.Fatalf("second Put = %q, %v; want %q", id2, err, id)
			}
			got, err := s.Get(ctx, id)
			if err != nil || string(got) != string(data) {
				t.Fatalf("Get = %q, %v", got, err)
			}
			missing := BlobID([]byte("never stored"))
			if _, err := s.Get(ctx, missing); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get(missing) err = %v, want ErrNotFound", err)
			}
			if _, err := s.Get(ctx, "sha256:XYZ"); err == nil {
				t.Fatal("Get(bad id) succeeded")
			}
		})
	}
}

func TestRecords(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			at := time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC)
			var want []*Record
			for _, src := range []string{"/docs/b.md", "/docs/a.md", "/docs/c.txt"} {
				id, err := s.Put(ctx, []byte(src))
				if err != nil {
					t.Fatal(err)
				}
				rec := &Record{DocID: DocID(src), Source: src, MediaType: "text/markdown", Title: "T " + src,
					Sensitivity: "public", BlobID: id, Language: "en", IngestedAt: at}
				if err := s.PutRecord(ctx, rec); err != nil {
					t.Fatal(err)
				}
				want = append(want, rec)
			}
			// A replaced record wins.
			want[0].Title = "replaced"
			if err := s.PutRecord(ctx, want[0]); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetRecord(ctx, want[0].DocID)
			if err != nil || *got != *want[0] {
				t.Fatalf("GetRecord = %+v, %v; want %+v", got, err, want[0])
			}
			recs, err := s.Records(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 3 {
				t.Fatalf("Records returned %d, want 3", len(recs))
			}
			for i := 1; i < len(recs); i++ {
				if recs[i-1].DocID >= recs[i].DocID {
					t.Fatalf("Records not ordered by doc id: %s, %s", recs[i-1].DocID, recs[i].DocID)
				}
			}
			if _, err := s.GetRecord(ctx, DocID("/nope")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("GetRecord(missing) err = %v", err)
			}
			if err := s.PutRecord(ctx, &Record{DocID: "short", BlobID: want[0].BlobID}); err == nil {
				t.Fatal("PutRecord accepted a malformed doc id")
			}
		})
	}
}

// TestFileLayout pins the on-disk layout of a file:// store and checks that
// corruption and crash leftovers are detected or ignored.
func TestFileLayout(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := OpenWith(ctx, "file://"+dir, &OpenOptions{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, err := s.Put(ctx, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	blobPath := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(id, "sha256:"))
	if b, err := os.ReadFile(blobPath); err != nil || string(b) != "hello" {
		t.Fatalf("blob file %s = %q, %v", blobPath, b, err)
	}
	rec := &Record{DocID: DocID("/x"), Source: "/x", Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(0, 0).UTC()}
	if err := s.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "documents", rec.DocID+".json")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if len(entries) != 1 {
		t.Fatalf("blobs dir holds %d entries (temporary or attribute files left?), want 1", len(entries))
	}
	// A crashed write leaves a temporary file: listing ignores it.
	if err := os.WriteFile(filepath.Join(dir, "documents", rec.DocID+".json.1a2b.tmp"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.Records(ctx); err != nil || len(recs) != 1 {
		t.Fatalf("Records = %d, %v; want 1 record", len(recs), err)
	}
	// Bit rot is detected, never returned as data.
	if err := os.WriteFile(blobPath, []byte("hellO"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get(corrupted) err = %v, want ErrCorrupt", err)
	}
	// A record that does not decode is an error naming its key.
	bad := DocID("/bad")
	if err := os.WriteFile(filepath.Join(dir, "documents", bad+".json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Records(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Records with a bad record: err = %v", err)
	}
	// A record followed by anything but white space (two writes run
	// together) does not decode either; a line feed after it does.
	good, err := os.ReadFile(filepath.Join(dir, "documents", rec.DocID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	badRec := *rec
	badRec.DocID, badRec.Source = bad, "/bad"
	data, err := json.Marshal(&badRec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tail := range []string{"\n", " {}", string(good)} {
		if err := os.WriteFile(filepath.Join(dir, "documents", bad+".json"), append(slices.Clone(data), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := s.Records(ctx)
		if ok := tail == "\n"; ok != (err == nil) || (!ok && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad))) {
			t.Errorf("Records with %q after a record: err = %v", tail, err)
		}
	}
}

func TestBatch(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			b := s.NewBatch()
			var recs []*Record
			for i := 0; i < 20; i++ { // past the syncfs threshold
				data := []byte{byte(i), 'x'}
				id, err := b.Put(ctx, data)
				if err != nil {
					t.Fatal(err)
				}
				rec := &Record{DocID: DocID(string(data)), Source: string(data), Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()}
				if err := b.PutRecord(ctx, rec); err != nil {
					t.Fatal(err)
				}
				recs = append(recs, rec)
			}
			// A second write of a record in the batch wins.
			recs[0].Title = "second"
			if err := b.PutRecord(ctx, recs[0]); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Records(ctx); len(got) != 0 {
				t.Fatalf("%d records visible before Sync", len(got))
			}
			if ids, _ := s.BlobIDs(ctx); len(ids) != 0 {
				t.Fatalf("%d blobs visible before Sync", len(ids))
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := s.Records(ctx)
			if err != nil || len(got) != 20 {
				t.Fatalf("Records after Sync: %d, %v", len(got), err)
			}
			if r, _ := s.GetRecord(ctx, recs[0].DocID); r.Title != "second" {
				t.Errorf("title %q, want the second write", r.Title)
			}
			for _, r := range recs {
				if _, err := s.Get(ctx, r.BlobID); err != nil {
					t.Error(err)
				}
			}
			if s.Packed() {
				// An unchanged record is not written again.
				b2 := s.NewBatch()
				b2.PutRecord(ctx, recs[1])
				if b2.pk != nil {
					t.Error("an equal record was staged again")
				}
			}
			if s.localDir != "" {
				left, _ := filepath.Glob(filepath.Join(s.localDir, "*", "*.tmp"))
				left2, _ := filepath.Glob(filepath.Join(s.localDir, "*", "*", "*.tmp"))
				if len(left)+len(left2) > 0 {
					t.Errorf("temporary files left: %v %v", left, left2)
				}
			}
			if s.localDir != "" && !s.Packed() {
				// An unchanged record is not written again.
				fi, _ := os.Stat(s.localPath("documents/" + recs[1].DocID + ".json"))
				time.Sleep(10 * time.Millisecond)
				b2 := s.NewBatch()
				b2.PutRecord(ctx, recs[1])
				if len(b2.pending) != 0 {
					t.Error("an equal record was staged again")
				}
				b2.Sync(ctx)
				fi2, _ := os.Stat(s.localPath("documents/" + recs[1].DocID + ".json"))
				if !fi.ModTime().Equal(fi2.ModTime()) {
					t.Error("an equal record was rewritten")
				}
			}
		})
	}
}

// Flushed batches publish nothing until Sync: a listing sees none of their
// blobs or records; a write staged after a flush is still written; Sync
// then publishes them all, and Abort of a flushed batch leaves no
// temporary file and nothing published.
func TestFlushBatches(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			blobs, recs, dropped := s.NewBatch(), s.NewBatch(), s.NewBatch()
			put := func(b *Batch, i int) *Record {
				data := []byte{byte(i), 'f'}
				id, err := b.Put(ctx, data)
				if err != nil {
					t.Fatal(err)
				}
				return &Record{DocID: DocID(string(data)), Source: string(data), Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()}
			}
			var want []*Record
			for i := 0; i < 12; i++ {
				rec := put(blobs, i)
				if err := recs.PutRecord(ctx, rec); err != nil {
					t.Fatal(err)
				}
				want = append(want, rec)
			}
			gone := put(dropped, 100)
			if err := dropped.PutRecord(ctx, gone); err != nil {
				t.Fatal(err)
			}
			if err := FlushBatches(ctx, blobs, recs, dropped); err != nil {
				t.Fatal(err)
			}
			late := put(blobs, 50) // staged after the flush
			want = append(want, late)
			if err := recs.PutRecord(ctx, late); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Records(ctx); len(got) != 0 {
				t.Fatalf("%d records visible after Flush", len(got))
			}
			if ids, _ := s.BlobIDs(ctx); len(ids) != 0 {
				t.Fatalf("%d blobs visible after Flush", len(ids))
			}
			dropped.Abort()
			if err := blobs.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if ids, _ := s.BlobIDs(ctx); len(ids) != len(want) {
				t.Fatalf("%d blobs after the blobs' Sync, want %d", len(ids), len(want))
			}
			if got, _ := s.Records(ctx); len(got) != 0 {
				t.Fatalf("%d records visible before their Sync", len(got))
			}
			if err := recs.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := s.Records(ctx)
			if err != nil || len(got) != len(want) {
				t.Fatalf("records after Sync: %d, %v; want %d", len(got), err, len(want))
			}
			if _, err := s.GetRecord(ctx, gone.DocID); !errors.Is(err, ErrNotFound) {
				t.Errorf("the aborted batch's record: %v, want not found", err)
			}
			if _, err := s.Get(ctx, gone.BlobID); !errors.Is(err, ErrNotFound) {
				t.Errorf("the aborted batch's blob: %v, want not found", err)
			}
			if s.localDir != "" {
				left, _ := filepath.Glob(filepath.Join(s.localDir, "*", "*.tmp"))
				left2, _ := filepath.Glob(filepath.Join(s.localDir, "*", "*", "*.tmp"))
				if len(left)+len(left2) > 0 {
					t.Errorf("temporary files left: %v %v", left, left2)
				}
			}
		})
	}
}
