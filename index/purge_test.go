package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/layout"
)

// Searches run while a purge rewrites and switches the generation: none
// fails or sees the purged document after Purge returns, and the old
// generation is removed once they have left it. Run with -race.
func TestPurgeWhileSearching(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://", Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i := range 20 {
		if _, err := ix.Ingest(ctx, Input{Source: fmt.Sprintf("/d%02d.md", i), Data: []byte(fmt.Sprintf("# D%d\n\ncommon words and unique%d\n", i, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.Ingest(ctx, Input{Source: "/gone.md", Data: []byte("# Gone\n\ncommon words and vanishing\n")}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := ix.Search(ctx, "common words", &SearchOptions{K: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	res, err := ix.Purge(ctx, "/gone.md")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("search during the purge: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if hits, _ := ix.Search(ctx, "vanishing", nil); len(hits) != 0 {
		t.Errorf("the purged document is found: %+v", hits)
	}
	if gens, _ := layout.Generations(dir); len(gens) != 1 || gens[0] != res.Generation || ix.Generation() != res.Generation {
		t.Errorf("generations %v, live %s, purge %+v", gens, ix.Generation(), res)
	}
	// The index takes writes on the new generation.
	if _, err := ix.Ingest(ctx, Input{Source: "/new.md", Data: []byte("# New\n\nfresh text\n")}); err != nil {
		t.Fatal(err)
	}
	// A name that matches nothing: an error, after the erasure ran.
	res, err = ix.Purge(ctx, "/never.md")
	if !errors.Is(err, errNoDocument) || res.Generation == "" {
		t.Errorf("purge of an unknown name: %+v, %v", res, err)
	}
}

// blobStored reports whether data's blob is in the index's file:// store.
func blobStored(t *testing.T, dir string, data []byte) bool {
	t.Helper()
	found := false
	// Any file of the store: a loose blob, or a pack holding it.
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, data) {
				found = true
			}
		}
		return nil
	})
	return found
}

// A purge erases every orphan blob: the older versions of the purged
// document (one edited to drop a secret), and the blobs of documents
// deleted before the purge; a blob another document holds stays.
func TestPurgeErasesOrphanBlobs(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(map[bool]string{false: "loose", true: "packs"}[packs], func(t *testing.T) { testPurgeErasesOrphanBlobs(t, packs) })
	}
}

func testPurgeErasesOrphanBlobs(t *testing.T, packs bool) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None, LooseBlobs: !packs})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	v1 := []byte("# Memo\n\nThe password is zqhunter2.\n")
	v2 := []byte("# Memo\n\nRedacted.\n")
	old := []byte("# Old\n\nzqold secret deleted earlier\n")
	shared := []byte("# Shared\n\nheld by two documents\n")
	for _, in := range []Input{{Source: "/memo.md", Data: v1}, {Source: "/memo.md", Data: v2}, {Source: "/old.md", Data: old},
		{Source: "/s1.md", Data: shared}, {Source: "/s2.md", Data: shared}} {
		if _, err := ix.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.Delete(ctx, "/old.md"); err != nil {
		t.Fatal(err)
	}
	// In the pack layout the records' old versions are in packs too.
	oldTitle := []byte(`"title":"Old"`) // packed records are compact JSON
	if !blobStored(t, dir, v1) || !blobStored(t, dir, old) || (packs && !blobStored(t, dir, oldTitle)) {
		t.Fatal("the orphans are not there before the purge: the test proves nothing")
	}
	res, err := ix.Purge(ctx, "/memo.md", "/s1.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"v1 (zqhunter2)": v1, "v2": v2, "the earlier deleted document": old} {
		if blobStored(t, dir, data) {
			t.Errorf("%s: its bytes are still in the blob store after the purge", name)
		}
	}
	if !blobStored(t, dir, shared) {
		t.Errorf("the blob /s2.md still holds was removed")
	}
	if blobStored(t, dir, []byte(`"source": "/memo.md"`)) || blobStored(t, dir, []byte(`"source":"/memo.md"`)) || blobStored(t, dir, oldTitle) {
		t.Errorf("a record of a purged or deleted document is still in the blob store")
	}
	if len(res.Blobs) != 3 || res.BlobBytes != int64(len(v1)+len(v2)+len(old)) {
		t.Errorf("purge result: blobs %v, %d bytes", res.Blobs, res.BlobBytes)
	}
	// A purge of a document deleted earlier erases its blob too.
	if _, err := ix.Ingest(ctx, Input{Source: "/later.md", Data: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/later.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Purge(ctx, "/later.md"); err == nil || !blobStored(t, dir, shared) {
		t.Fatalf("purge of a deleted document: %v (want the error naming it)", err)
	}
	if blobStored(t, dir, old) {
		t.Errorf("a purge after a delete left the document's blob")
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}

// waitBlocked waits until a goroutine is blocked on a mutex that fn
// locks itself: the frame under sync.(*Mutex).Lock is fn's. (Any mutex
// anywhere under fn matched before: an ingest waiting a moment on a lock
// of its preparation, before it had looked for its blob, passed for one
// waiting on the writer lock, and under a loaded CI run the GC it was
// meant to wait for ran beside that preparation.)
func waitBlocked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for range 2000 {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			lines := strings.Split(g, "\n")
			for i, l := range lines {
				if strings.HasPrefix(l, "sync.(*Mutex).Lock") && i+2 < len(lines) && strings.Contains(lines[i+2], fn+"(") {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no goroutine blocked on a mutex that %s locks", fn)
}

// An ingest that finds its blob already stored (an old orphan, not written
// again, so its time stays old) and then waits for the writer lock while
// GC removes that orphan prepares again: its record never names a
// missing blob.
func TestGCDuringIngestReusingOrphan(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(map[bool]string{false: "loose", true: "packs"}[packs], func(t *testing.T) { testGCDuringIngestReusingOrphan(t, packs) })
	}
}

func testGCDuringIngestReusingOrphan(t *testing.T, packs bool) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None, LooseBlobs: !packs})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	data := []byte("# Back\n\nthe same bytes again\n")
	if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: data}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/a.md"); err != nil {
		t.Fatal(err)
	}
	minAge := DefaultGCMinAge
	if packs {
		minAge = -1 // a pack's time is the one read when it was listed: spare no orphan instead
	} else {
		key, _ := blobstore.BlobKey(blobstore.BlobID(data))
		past := time.Now().Add(-2 * DefaultGCMinAge)
		if err := os.Chtimes(filepath.Join(dir, "blobs", filepath.FromSlash(key)), past, past); err != nil {
			t.Fatal(err)
		}
	}
	ix.writeMu.Lock()
	done := make(chan error, 1)
	go func() {
		_, err := ix.Ingest(ctx, Input{Source: "/b.md", Data: data})
		done <- err
	}()
	waitBlocked(t, "index.(*Index).ingestOnce")
	res, err := ix.gcLocked(ctx, &GCOptions{}, minAge)
	gone := !blobStored(t, dir, data)
	ix.writeMu.Unlock()
	if err != nil || len(res.OrphanBlobs) != 1 || (packs && (res.Repacked == nil || res.Repacked.BlobsDropped != 1)) {
		t.Fatalf("gc: %+v, %v (want the old orphan removed)", res, err)
	}
	if !gone {
		t.Error("the orphan's bytes were still stored after GC")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !blobStored(t, dir, data) {
		t.Errorf("the ingest's record names a blob GC removed")
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}

// A purge that stopped between its deletes and its mark (a crash): the
// directory records it as unfinished, and no rollback, even forced,
// serves a generation older than the one live when it began; a Purge
// that finishes clears the record.
func TestUnfinishedPurgeRefusesRollback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, Input{Source: "/secret.md", Data: []byte("# S\n\nzqsecret\n")}); err != nil {
		t.Fatal(err)
	}
	// A second generation (a copy), so that there is one to roll back to.
	gen, err := ix.layout.NewGeneration()
	if err != nil {
		t.Fatal(err)
	}
	ix.writeMu.Lock()
	err = ix.cur.Load().copyTo(ctx, ix.layout.GenerationPath(gen))
	ix.writeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.layout.Publish(gen); err != nil {
		t.Fatal(err)
	}
	if err := ix.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	s := ix.cur.Load()
	if err := ix.layout.BeginPurge(s.gen, time.Now()); err != nil { // as Purge does, then "crashes" after its delete
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/secret.md"); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		if _, _, err := ix.Rollback(ctx, &RollbackOptions{Force: force}); !errors.Is(err, ErrPurged) {
			t.Fatalf("live rollback, force %v, during an unfinished purge: %v, want ErrPurged", force, err)
		}
	}
	ix.Close()
	if _, _, err := Rollback(ctx, dir, &RollbackOptions{Force: true}); !errors.Is(err, ErrPurged) {
		t.Fatalf("forced rollback after an unfinished purge: %v, want ErrPurged", err)
	}
	if ix, err = Open(ctx, dir, &Options{Embedder: embed.None}); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Purge(ctx, "/secret.md"); err == nil {
		t.Fatal("purge again: want the error naming the already deleted document")
	}
	if _, err := os.Stat(filepath.Join(dir, layout.PurgingName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("PURGING after a finished purge: %v", err)
	}
}
