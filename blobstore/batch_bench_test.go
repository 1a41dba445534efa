package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkBatch1000 stores 1,000 documents (a blob of about 1 KB and a
// record each) on a file:// store in the temporary directory, as an ingest
// batch does: "separate" syncs the blobs' batch, then the records' (one
// flush each, as escurel did before FlushBatches); "together" flushes both
// at once (FlushBatches), then publishes the blobs, then the records;
// "packs" does the same on a store in the pack layout (a new store's): one
// pack for the blobs, one for the records.
// Run with -benchtime Nx on the disk to measure (TMPDIR).
func BenchmarkBatch1000(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"separate", "together", "packs"} {
		b.Run(mode, func(b *testing.B) {
			u := (&url.URL{Scheme: "file", Path: filepath.Join(b.TempDir(), "blobs")}).String()
			s, err := OpenWith(ctx, u, &OpenOptions{Loose: mode != "packs"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := 0; i < b.N; i++ {
				blobs, recs := s.NewBatch(), s.NewBatch()
				for j := 0; j < 1000; j++ {
					data := []byte(fmt.Sprintf("%s document %d of round %d %0900d", mode, j, i, j))
					id, err := blobs.Put(ctx, data)
					if err != nil {
						b.Fatal(err)
					}
					src := fmt.Sprintf("bench://%s/%d/%d", mode, i, j)
					if err := recs.PutRecord(ctx, &Record{DocID: DocID(src), Source: src, Sensitivity: "public", BlobID: id, IngestedAt: time.Unix(1, 0).UTC()}); err != nil {
						b.Fatal(err)
					}
				}
				if mode != "separate" {
					if err := FlushBatches(ctx, blobs, recs); err != nil {
						b.Fatal(err)
					}
				}
				if err := blobs.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				if err := recs.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
