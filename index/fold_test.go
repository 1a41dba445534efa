package index

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"
)

// Small writes (one document ingested, replaced or deleted at a time, as
// a server takes them) each leave a small pack in the blob store, and a
// store of thousands of packs makes every write's Sync list them and
// every open read them. A write that leaves autoFoldPacks packs under
// autoFoldBelow starts their folding in the background, so the count
// stays bounded, and nothing read changes: every record, every
// removal's tombstone, every replacement's newer version.
func TestSmallWritesFoldTheirPacks(t *testing.T) {
	ctx := context.Background()
	defer func(n int) { autoFoldPacks = n }(autoFoldPacks)
	autoFoldPacks = 8
	dir := t.TempDir()
	blobs := filepath.Join(dir, "blobs")
	opts := &Options{BlobURL: "file://" + blobs}
	ix, err := Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	in := func(i int, version string) Input {
		return Input{Source: fmt.Sprintf("mem://d%02d", i), MediaType: "text/plain", Data: []byte(fmt.Sprintf("document %d %s", i, version))}
	}
	writes := 0
	most := 0
	settle := func() {
		t.Helper()
		writes++
		ix.merges.Wait() // the merges and the fold a write started
		most = max(most, packFiles(t, dir))
	}
	for i := range 40 {
		mustIngest(t, ix, in(i, "first"))
		settle()
	}
	for i := 0; i < 10; i++ {
		if _, err := ix.Delete(ctx, fmt.Sprintf("mem://d%02d", i)); err != nil {
			t.Fatal(err)
		}
		settle()
	}
	for i := 10; i < 15; i++ {
		mustIngest(t, ix, in(i, "second"))
		settle()
	}
	// Without folding a pack (or two) a write: 55 or more.
	t.Logf("%d writes, at most %d packs", writes, most)
	if most > 2*autoFoldPacks+2 {
		t.Errorf("%d writes left up to %d packs, want at most %d (folded every %d small packs)", writes, most, 2*autoFoldPacks+2, autoFoldPacks)
	}
	check := func(ix *Index) {
		t.Helper()
		recs, err := ix.blobs.Records(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range recs {
			got[r.Source] = true
		}
		for i := range 40 {
			if src := fmt.Sprintf("mem://d%02d", i); got[src] != (i >= 10) {
				t.Errorf("record of %s: %v, want %v", src, got[src], i >= 10)
			}
		}
		for _, c := range []struct {
			query string
			hits  int
		}{{"second", 5}, {"first", 25}} {
			hits, err := ix.Search(ctx, c.query, &SearchOptions{K: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != c.hits {
				t.Errorf("search %q: %d hits, want %d", c.query, len(hits), c.hits)
			}
		}
		if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
			t.Fatalf("verify: %v, %+v", err, v)
		}
	}
	check(ix)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	check(ix)
}

// Folds run while other writers prepare their batches without the lock
// (storing blobs and records into new packs) and readers read: every
// write lands, and the index and the blob store agree after.
func TestFoldConcurrentWithWrites(t *testing.T) {
	ctx := context.Background()
	defer func(n int) { autoFoldPacks = n }(autoFoldPacks)
	autoFoldPacks = 4
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	const writers, each = 4, 15
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			for i := range each {
				src := fmt.Sprintf("mem://w%d/%d", w, i)
				if _, errs, err := ix.IngestBatch(ctx, []Input{{Source: src, MediaType: "text/plain", Data: []byte(fmt.Sprintf("writer %d document %d", w, i))}}); err != nil || errs[0] != nil {
					return fmt.Errorf("%s: %v %v", src, err, errs)
				}
				if i%3 == 2 {
					if _, err := ix.Delete(ctx, src); err != nil {
						return fmt.Errorf("delete %s: %w", src, err)
					}
				}
				if _, err := ix.Search(ctx, "document", nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	ix.merges.Wait()
	recs, err := ix.blobs.Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := writers * (each - each/3); len(recs) != want {
		t.Errorf("%d records, want %d", len(recs), want)
	}
	if n := packFiles(t, dir); n > 3*autoFoldPacks {
		t.Errorf("%d packs after %d writes, want at most %d", n, writers*(each+each/3), 3*autoFoldPacks)
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify: %v, %+v", err, v)
	}
}

// BenchmarkSmallWrites ingests one document a write, and deletes every
// fourth, as a server takes them, on a file:// blob store: ms a write,
// and the packs left at the end, with the folding of small packs
// (foldAfter) and without it. Its peer is the other sub-benchmark: run
// with -benchtime 3000x or more to see the packs' cost grow.
func BenchmarkSmallWrites(b *testing.B) {
	for _, fold := range []bool{true, false} {
		b.Run(fmt.Sprintf("fold=%v", fold), func(b *testing.B) {
			ctx := context.Background()
			if !fold {
				defer func(n int) { autoFoldPacks = n }(autoFoldPacks)
				autoFoldPacks = 1 << 30
			}
			dir := b.TempDir()
			ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs")})
			if err != nil {
				b.Fatal(err)
			}
			defer ix.Close()
			b.ResetTimer()
			for i := range b.N {
				src := fmt.Sprintf("mem://d%d", i)
				mustIngest(b, ix, Input{Source: src, MediaType: "text/plain", Data: []byte(fmt.Sprintf("small write %d", i))})
				if i%4 == 3 {
					if _, err := ix.Delete(ctx, src); err != nil {
						b.Fatal(err)
					}
				}
			}
			ix.merges.Wait()
			b.StopTimer()
			b.ReportMetric(float64(packFiles(b, dir)), "packs")
		})
	}
}
