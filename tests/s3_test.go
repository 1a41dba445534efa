package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	_ "gocloud.dev/blob/s3blob"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/s3test"
	"github.com/escurel/escurel/rebuild"
)

// On an s3:// blob store (a real S3 protocol server on 127.0.0.1), readers
// search in every mode while one writer ingests, under the lock rules: the
// process that opened the directory owns it (a second Open is refused with
// ErrLocked; other processes go through its server), its searches never
// wait for the writer and see each batch whole. Every blob and record went
// to the bucket: the index verifies deep against it, and a second index
// built from the bucket alone has the writer's digest.
func TestS3SearchDuringIngest(t *testing.T) {
	for _, packs := range []bool{false, true} {
		t.Run(map[bool]string{false: "loose", true: "packs"}[packs], func(t *testing.T) { testS3SearchDuringIngest(t, packs) })
	}
}

func testS3SearchDuringIngest(t *testing.T, packs bool) {
	ctx := context.Background()
	srv := s3test.Start(t)
	blobs := srv.Bucket(t, "concurrent", "idx/")
	e := newEnvLayout(t, index.Options{BlobURL: blobs}, packs)
	if e.ix.Blobs().Packed() != packs {
		t.Fatalf("the store's layout: packed %v, want %v", e.ix.Blobs().Packed(), packs)
	}
	if _, err := index.Open(ctx, e.dir, &index.Options{BlobURL: blobs}); !errors.Is(err, index.ErrLocked) {
		t.Fatalf("a second Open of the directory: %v, want ErrLocked", err)
	}
	doc := func(n, v int) index.Input {
		var b strings.Builder
		fmt.Fprintf(&b, "# Doc %d\n\n", n)
		for s := 0; s < 3; s++ {
			fmt.Fprintf(&b, "## Part %d\n\nmarker version%d doc%d part %d\n\n", s, v, n, s)
		}
		return index.Input{Source: fmt.Sprintf("/docs/%d.md", n), Data: []byte(b.String())}
	}
	if _, _, err := e.ix.IngestBatch(ctx, []index.Input{doc(0, 0), doc(1, 0)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	searches := make([]int, 6)
	for r := range searches {
		mode := []string{index.ModeBM25, index.ModeDense, index.ModeHybrid}[r%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hits, err := e.ix.Search(ctx, "marker doc0", &index.SearchOptions{K: 50, Mode: mode})
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("%s: %w", mode, err)
					}
					return
				}
				// doc 0's three blocks are of one version.
				v := ""
				for _, h := range hits {
					if h.Source != "/docs/0.md" || !strings.Contains(h.Body, "marker") {
						continue
					}
					got := strings.Fields(h.Body)[1]
					if v != "" && got != v {
						errs <- fmt.Errorf("%s search mixes %s and %s", mode, v, got)
						return
					}
					v = got
				}
				searches[r]++
			}
		}()
	}
	for v := 1; v <= 15; v++ {
		batch := []index.Input{doc(0, v)}
		for n := 2; n < 4; n++ {
			batch = append(batch, doc(v*10+n, v))
		}
		if _, _, err := e.ix.IngestBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for r, n := range searches {
		if n == 0 {
			t.Errorf("reader %d never finished a search", r)
		}
	}
	v, err := e.ix.Verify(context.Background(), &index.VerifyOptions{Deep: true})
	if err != nil || !v.OK() || v.Documents != 32 {
		t.Fatalf("verify --deep against the bucket: %+v, %v", v, err)
	}
	// A fresh directory rebuilt from the bucket alone.
	store, err := blobstore.Open(context.Background(), blobs)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: t.TempDir(), Blobs: store})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verify.Digest != v.Digest {
		t.Errorf("rebuilt from the bucket alone: digest %s, want the writer's %s", sum.Verify.Digest, v.Digest)
	}
}
