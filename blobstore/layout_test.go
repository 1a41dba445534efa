package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escurel/escurel/internal/s3test"
)

// A new store is in the pack layout, recorded; Loose gives a new store
// the loose layout, recorded too; an existing store keeps its layout,
// and Loose on a packed one is refused.
func TestNewStoreLayout(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	fresh := map[string]func(n int) string{
		"file": func(int) string {
			return (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String()
		},
		"s3": func(n int) string { return srv.Bucket(t, fmt.Sprintf("layout%d", n), "p/") },
	}
	for name, newURL := range fresh {
		t.Run(name, func(t *testing.T) {
			packed, loose := newURL(1), newURL(2)
			s, err := Open(ctx, packed)
			if err != nil || !s.Packed() {
				t.Fatalf("a new store: packed %v, %v; want the pack layout", s != nil && s.Packed(), err)
			}
			if got, err := s.bucket.ReadAll(ctx, layoutKey); err != nil || string(got) != layoutPacks {
				t.Fatalf("%s = %q, %v", layoutKey, got, err)
			}
			s.Close()
			if _, err := OpenWith(ctx, packed, &OpenOptions{Loose: true}); !errors.Is(err, ErrLayout) {
				t.Fatalf("Loose on a packed store: %v, want ErrLayout", err)
			}
			l, err := OpenWith(ctx, loose, &OpenOptions{Loose: true})
			if err != nil || l.Packed() {
				t.Fatalf("a new store with Loose: %v", err)
			}
			if got, err := l.bucket.ReadAll(ctx, layoutKey); err != nil || string(got) != layoutLoose {
				t.Fatalf("%s = %q, %v", layoutKey, got, err)
			}
			if _, err := l.Put(ctx, []byte("loose bytes")); err != nil {
				t.Fatal(err)
			}
			l.Close()
			again, err := Open(ctx, loose) // no option: the recorded layout
			if err != nil || again.Packed() {
				t.Fatalf("a loose store reopened without the option: packed %v, %v", again != nil && again.Packed(), err)
			}
			// An older store: objects, no layout object. It stays loose.
			if err := again.bucket.Delete(ctx, layoutKey); err != nil {
				t.Fatal(err)
			}
			again.Close()
			old, err := Open(ctx, loose)
			if err != nil || old.Packed() {
				t.Fatalf("an older loose store: packed %v, %v", old != nil && old.Packed(), err)
			}
			if _, err := old.bucket.ReadAll(ctx, layoutKey); err == nil {
				t.Fatalf("opening an older store wrote %s", layoutKey)
			}
			old.Close()
			// Packs without the layout object: refused, never read as
			// nothing.
			p, _ := Open(ctx, packed)
			if _, err := p.Put(ctx, []byte("packed bytes")); err != nil {
				t.Fatal(err)
			}
			if err := p.bucket.Delete(ctx, layoutKey); err != nil {
				t.Fatal(err)
			}
			p.Close()
			if _, err := Open(ctx, packed); err == nil || !strings.Contains(err.Error(), "packs/ holds objects") {
				t.Fatalf("packs without %s: %v", layoutKey, err)
			}
		})
	}
}

// Processes opening one new store at once, some asking for the loose
// layout, agree on one layout: the first to write it.
func TestNewStoreLayoutRace(t *testing.T) {
	ctx := context.Background()
	for round := range 10 {
		u := (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String()
		var wg sync.WaitGroup
		packed := make([]int, 8) // 1 packed, 0 loose, -1 refused
		for i := range packed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := OpenWith(ctx, u, &OpenOptions{Loose: i%2 == 0})
				if errors.Is(err, ErrLayout) {
					packed[i] = -1
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				if s.Packed() {
					packed[i] = 1
				}
			}()
		}
		wg.Wait()
		data, err := os.ReadFile(filepath.Join(strings.TrimPrefix(u, "file://"), layoutKey))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if string(data) == layoutPacks {
			want = 1
		}
		for i, p := range packed {
			if p != want && !(p == -1 && want == 1 && i%2 == 0) {
				t.Fatalf("round %d: opener %d (loose asked %v) got %d, layout %q", round, i, i%2 == 0, p, data)
			}
		}
	}
}

// Pack converts a loose store: the same records and blobs read back, the
// loose files gone but the large blob's, and a second Pack writes
// nothing. A crash before the removals (the loose copies back) reads the
// same, and Pack finishes it.
func TestPack(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	for name, u := range map[string]string{
		"file": (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(),
		"s3":   srv.Bucket(t, "convert", "p/"),
	} {
		t.Run(name, func(t *testing.T) {
			l, err := OpenWith(ctx, u, &OpenOptions{Loose: true})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := range 50 {
				id, err := l.Put(ctx, []byte(fmt.Sprintf("document %d", i)))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
				if err := l.PutRecord(ctx, testRecord(fmt.Sprintf("/d/%d", i), id, "t")); err != nil {
					t.Fatal(err)
				}
			}
			big := bytes.Repeat([]byte("x"), packLooseMin)
			bigID, err := l.Put(ctx, big)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.DeleteRecord(ctx, DocID("/d/7")); err != nil {
				t.Fatal(err)
			}
			want, err := l.Records(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// What a crash before the removals would leave: every loose
			// object, beside the packs.
			type obj struct {
				key  string
				data []byte
			}
			var saved []obj
			for _, prefix := range []string{"blobs/sha256/", "documents/"} {
				l.list(ctx, prefix, false, func(name string, _ int64, _ time.Time) {
					d, err := l.read(ctx, prefix+name)
					if err != nil {
						t.Fatal(err)
					}
					saved = append(saved, obj{prefix + name, d})
				})
			}
			l.Close()

			res, err := Pack(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if res.WasPacked || res.Blobs != 50 || res.Records != 49 || res.KeptLoose != 1 || res.Packs != 1 || res.Removed != 99 {
				t.Fatalf("Pack = %+v", res)
			}
			check := func() {
				t.Helper()
				s, err := Open(ctx, u)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if !s.Packed() {
					t.Fatal("a packed store opens loose")
				}
				got, err := s.Records(ctx)
				if err != nil || len(got) != len(want) {
					t.Fatalf("Records: %d, %v; want %d", len(got), err, len(want))
				}
				for i := range got {
					if *got[i] != *want[i] {
						t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
					}
				}
				for _, id := range append(slices.Clone(ids), bigID) {
					if _, err := s.Get(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.GetRecord(ctx, DocID("/d/7")); !errors.Is(err, ErrNotFound) {
					t.Fatalf("the deleted record: %v", err)
				}
			}
			check()
			s, _ := Open(ctx, u)
			var loose []string
			for _, prefix := range []string{"blobs/sha256/", "documents/"} {
				s.list(ctx, prefix, false, func(name string, _ int64, _ time.Time) { loose = append(loose, prefix+name) })
			}
			bigKey, _ := BlobKey(bigID)
			if len(loose) != 1 || loose[0] != bigKey {
				t.Fatalf("loose objects left: %v, want the large blob alone", loose)
			}
			for _, o := range saved {
				if err := s.write(ctx, o.key, o.data, ""); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			check()
			res, err = Pack(ctx, u)
			if err != nil || !res.WasPacked || res.Packs != 0 || res.Removed != 99 {
				t.Fatalf("Pack after a crash before the removals = %+v, %v; want no pack written, 99 removed", res, err)
			}
			check()
			res, err = Pack(ctx, u)
			if err != nil || res.Packs != 0 || res.Removed != 0 || res.Blobs != 0 || res.Records != 0 {
				t.Fatalf("Pack of a packed store = %+v, %v; want nothing done", res, err)
			}
		})
	}
}

// Pack stops at a damaged loose record, naming it, removing nothing.
func TestPackRefusesDamage(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "blobs")
	u := (&url.URL{Scheme: "file", Path: dir}).String()
	l, err := OpenWith(ctx, u, &OpenOptions{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := l.Put(ctx, []byte("bytes"))
	for _, src := range []string{"/a", "/b"} {
		if err := l.PutRecord(ctx, testRecord(src, id, "t")); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	bad := filepath.Join(dir, "documents", DocID("/b")+".json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Pack(ctx, u)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), DocID("/b")) {
		t.Fatalf("Pack with a damaged record: %v", err)
	}
	for _, f := range []string{bad, filepath.Join(dir, "documents", DocID("/a")+".json")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("a loose record was removed: %v", err)
		}
	}
}

// A second Store on the bucket (another process: a server beside a CLI
// ingest) reads what the first packs after it listed: a new record, a
// newer version, a removal, a new blob; on file:// at once, on an object
// store on a miss at once and otherwise within objectRefresh.
func TestSecondStoreSeesNewerPacks(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	for name, u := range map[string]string{
		"file": (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(),
		"s3":   srv.Bucket(t, "second", "p/"),
	} {
		t.Run(name, func(t *testing.T) {
			w, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			r, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			put := func(src, title string) *Record {
				t.Helper()
				b := w.NewBatch()
				id, err := b.Put(ctx, []byte(src+" "+title))
				if err != nil {
					t.Fatal(err)
				}
				rec := testRecord(src, id, title)
				if err := b.PutRecord(ctx, rec); err != nil {
					t.Fatal(err)
				}
				if err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				return rec
			}
			put("/first", "v1")
			if _, err := r.GetRecord(ctx, DocID("/first")); err != nil { // r loads the packs
				t.Fatal(err)
			}
			// A new document: a miss, so every store looks again.
			b := put("/second", "v1")
			if got, err := r.GetRecord(ctx, b.DocID); err != nil || got.Title != "v1" {
				t.Fatalf("a record packed after the reader listed: %+v, %v", got, err)
			}
			if _, err := r.Get(ctx, b.BlobID); err != nil {
				t.Fatalf("a blob packed after the reader listed: %v", err)
			}
			// A newer version of a document the reader knows.
			put("/first", "v2")
			if name == "s3" {
				time.Sleep(objectRefresh + 100*time.Millisecond)
			}
			if got, err := r.GetRecord(ctx, DocID("/first")); err != nil || got.Title != "v2" {
				t.Fatalf("a newer version: %+v, %v; want v2", got, err)
			}
			// A removal.
			if err := w.DeleteRecord(ctx, DocID("/first")); err != nil {
				t.Fatal(err)
			}
			if name == "s3" {
				time.Sleep(objectRefresh + 100*time.Millisecond)
			}
			if got, err := r.GetRecord(ctx, DocID("/first")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a removed record: %+v, %v; want ErrNotFound", got, err)
			}
			recs, err := r.Records(ctx)
			if err != nil || len(recs) != 1 || recs[0].Source != "/second" {
				t.Fatalf("Records: %v, %v", recs, err)
			}
		})
	}
}
