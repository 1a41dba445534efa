package index

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
)

// threeDocs opens an index in a temporary directory (file:// blob store,
// no embedder, closed with the test) holding /a.md, /b.md and /c.md, each
// pearsDoc(source).
func threeDocs(t *testing.T) *Index {
	t.Helper()
	ix, err := Open(context.Background(), t.TempDir(), &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")), Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	mustIngest(t, ix, pearsDoc("/a.md"), pearsDoc("/b.md"), pearsDoc("/c.md"))
	return ix
}

// pearsDoc is a one-block Markdown document of source src.
func pearsDoc(src string) Input {
	return Input{Source: src, Data: []byte("# T\n\napples and pears " + src + "\n")}
}

// writesDuring runs writes, called from a verify's "unlocked" hook, and
// reports whether they succeeded within 10 s: writes that wait for the
// verify (held back by it) never return before it goes on.
func writesDuring(t *testing.T, what string, writes func() error) bool {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- writes() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("writes during %s: %v", what, err)
		}
		return err == nil
	case <-time.After(10 * time.Second):
		t.Errorf("writes waited 10 s for %s: it holds them back", what)
		return false
	}
}

// awaitErr waits up to d for ch's error, and fails the test, naming what,
// on an error or when none came.
func awaitErr(t *testing.T, ch <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: never returned (%v)", what, d)
	}
}

// TestSnapshotVerifiesOutsideWriteLock: a publish's snapshot holds writes
// back for its copy, not for its verify (47 s at 1M passages). An ingest,
// a delete and a metadata update commit while it verifies, and a
// CHECKPOINT under writeMu then waits for the verify instead of being
// refused; the verification is of the copied rows (its digest is the
// copy's), not of the rows committed after. A write committed between the snapshot's read of the
// records and its lock makes it read them again.
func TestSnapshotVerifiesOutsideWriteLock(t *testing.T) {
	ctx := context.Background()
	ix := threeDocs(t)
	defer func(w time.Duration) { checkpointWait = w }(checkpointWait)
	checkpointWait = 0 // refused at once, were it not waiting for the verify
	defer func() { verifyAtHook = nil }()

	// A write between the records' read and the lock: read again under
	// it (else /d.md's rows would have no record, and the copy would be
	// refused as unverified).
	verifyAtHook = func(stage string) {
		if stage == "scanned" {
			mustIngest(t, ix, pearsDoc("/d.md"))
		}
	}
	gen, err := ix.layout.NewGeneration()
	if err != nil {
		t.Fatal(err)
	}
	v, err := ix.snapshot(ctx, ix.layout.GenerationPath(gen), "")
	if err != nil || v.Documents != 4 || !v.OK() {
		t.Fatalf("snapshot after an ingest between its records' read and its lock: %v, %+v", err, v)
	}
	ix.layout.Abandon(gen)

	// Writes while it verifies.
	checkpointed := make(chan error, 1)
	verifyAtHook = func(stage string) {
		if stage != "unlocked" {
			return
		}
		if !writesDuring(t, "the snapshot's verify", func() error {
			_, err := ix.Ingest(ctx, pearsDoc("/e.md"))
			if err == nil {
				_, err = ix.Delete(ctx, "/a.md")
			}
			if err == nil {
				// A metadata update: an UPDATE, after which DuckDB
				// refuses a CHECKPOINT beside the older transaction.
				b := pearsDoc("/b.md")
				b.Meta = map[string]any{"team": "search"}
				_, err = ix.Ingest(ctx, b)
			}
			return err
		}) {
			return
		}
		go func() {
			ix.writeMu.Lock()
			defer ix.writeMu.Unlock()
			checkpointed <- ix.cur.Load().checkpoint(ctx)
		}()
		time.Sleep(50 * time.Millisecond) // the CHECKPOINT beside the verify's transaction
	}
	if gen, err = ix.layout.NewGeneration(); err != nil {
		t.Fatal(err)
	}
	v, err = ix.snapshot(ctx, ix.layout.GenerationPath(gen), "")
	verifyAtHook = nil
	if err != nil || v.Documents != 4 || !v.OK() {
		t.Fatalf("snapshot with writes during its verify: %v, %+v; want the 4 documents it copied, verified", err, v)
	}
	awaitErr(t, checkpointed, 10*time.Second, "a CHECKPOINT during the snapshot's verify (it waits for the verify)")
	now, err := ix.Verify(ctx, nil)
	if err != nil || !now.OK() || now.Documents != 4 || now.Digest == v.Digest {
		t.Fatalf("the live rows after the writes: %v, %+v; want 4 documents (d, e in; a out) and another digest than the snapshot's %s", err, now, v.Digest)
	}

	// The copy holds the rows the verify read.
	if err := ix.layout.Publish(gen); err != nil {
		t.Fatal(err)
	}
	if err := ix.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := ix.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.unref()
	d, err := s.digestOnly(ctx)
	if err != nil || d != v.Digest {
		t.Fatalf("the copy's digest %s, %v; the snapshot's verify said %s", d, err, v.Digest)
	}
}

// TestVerifyOutsideWriteLock: Index.Verify holds writes back for a moment,
// not for its reads. An ingest, a delete and a gc that removes the
// deleted document's blob run while it verifies; the verification is of
// the moment it began (the deleted document's record and blob were there:
// listed under the lock, not after the gc), and OK; the next one sees the
// writes. A deep verify still holds writes back (it reads the blobs).
func TestVerifyOutsideWriteLock(t *testing.T) {
	ctx := context.Background()
	ix := threeDocs(t)
	before, err := ix.Verify(ctx, nil)
	if err != nil || !before.OK() || before.Documents != 3 || len(before.OrphanBlobs) != 0 {
		t.Fatalf("verify before: %v, %+v", err, before)
	}
	defer func() { verifyAtHook = nil }()
	wrote := false
	verifyAtHook = func(stage string) {
		if stage != "unlocked" {
			return
		}
		wrote = writesDuring(t, "Verify", func() error {
			_, err := ix.Ingest(ctx, pearsDoc("/e.md"))
			if err == nil {
				_, err = ix.Delete(ctx, "/a.md")
			}
			if err == nil {
				var r *GCResult
				r, err = ix.GC(ctx, &GCOptions{MinAge: -1})
				if err == nil && len(r.OrphanBlobs) != 1 {
					err = fmt.Errorf("gc removed %d blobs, want /a.md's", len(r.OrphanBlobs))
				}
			}
			return err
		})
	}
	v, err := ix.Verify(ctx, nil)
	verifyAtHook = nil
	if err != nil || !wrote {
		t.Fatalf("verify with writes during its reads: %v (writes done: %v)", err, wrote)
	}
	if !v.OK() || v.Documents != 3 || v.Digest != before.Digest || len(v.OrphanBlobs) != 0 {
		t.Fatalf("verify with writes during its reads: %+v; want the 3 documents of its start, OK, digest %s", v, before.Digest)
	}
	after, err := ix.Verify(ctx, nil)
	if err != nil || !after.OK() || after.Documents != 3 || after.Digest == before.Digest {
		t.Fatalf("verify after the writes: %v, %+v; want b, c, e under another digest", err, after)
	}

	// Deep: the lock for its whole length.
	verifyAtHook = func(string) { t.Error("a deep verify went through verifyAt") }
	if v, err := ix.Verify(ctx, &VerifyOptions{Deep: true}); err != nil || !v.OK() || v.Digest != after.Digest {
		t.Fatalf("deep verify: %v, %+v", err, v)
	}
}

// TestCompactDuringVerifyHoldsNoWrites: a Compact (or Close, or a
// reembed's copy) whose CHECKPOINT would wait for a verify reading
// outside writeMu waits for it before taking writeMu (verifyMu), so the
// writes behind it are not held back again.
func TestCompactDuringVerifyHoldsNoWrites(t *testing.T) {
	ctx := context.Background()
	ix := threeDocs(t)
	compacted := make(chan error, 1)
	defer func() { verifyAtHook = nil }()
	verifyAtHook = func(stage string) {
		if stage != "unlocked" {
			return
		}
		go func() { compacted <- ix.Compact(ctx) }()
		time.Sleep(100 * time.Millisecond) // Compact waiting, on writeMu or before it
		writesDuring(t, "Verify and a Compact waiting for it", func() error {
			b := pearsDoc("/b.md")
			b.Meta = map[string]any{"team": "search"} // an UPDATE: a CHECKPOINT beside the verify is refused after it
			_, errs, err := ix.IngestBatch(ctx, []Input{pearsDoc("/e.md"), b})
			return errors.Join(append(errs, err)...)
		})
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() || v.Documents != 3 {
		t.Fatalf("verify: %v, %+v", err, v)
	}
	verifyAtHook = nil
	awaitErr(t, compacted, 30*time.Second, "compact after the verify")
}
