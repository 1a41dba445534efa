package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	_ "gocloud.dev/blob/s3blob"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/s3test"
	"github.com/escurel/escurel/replica"
)

// BenchmarkReplicaCatchUp measures a read replica's catch-up: from the
// start of escurel publish (verify, copy, upload to S3, move CURRENT) to
// the replica serving the new generation (download, size and SHA-256,
// open, digest of the rows, switch), with an S3 server (gofakes3, in
// memory) on 127.0.0.1 between them, default hash/384 vectors. Corpora:
// the 5,183 SciFact abstracts (../shared/data), and 100,000 one-block
// documents. Each iteration ingests one document, then publishes and
// polls once. Reported: publish-s, replica-s (its poll), catchup-s (both),
// file-MB.
func BenchmarkReplicaCatchUp(b *testing.B) {
	corpora := map[string]func(b *testing.B) []index.Input{
		"scifact": sciFactInputs,
		"100k": func(b *testing.B) []index.Input {
			ins := make([]index.Input, 100_000)
			for i := range ins {
				ins[i] = index.Input{Source: fmt.Sprintf("synthetic/%06d.txt", i), MediaType: "text/plain",
					Data: []byte(fmt.Sprintf("Passage %d about heron %d, pond %d and reed %d in the marsh of sector %d.", i, i%977, i%131, i%17, i/1000))}
			}
			return ins
		},
	}
	for _, name := range []string{"scifact", "100k"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			ins := corpora[name](b)
			w, err := index.Open(ctx, b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			t0 := time.Now()
			for j := 0; j < len(ins); j += 1000 {
				if _, _, err := w.IngestBatch(ctx, ins[j:min(j+1000, len(ins))]); err != nil {
					b.Fatal(err)
				}
			}
			st, err := w.Stats(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: %d documents, %d blocks ingested in %s", name, st.Documents, st.Blocks, time.Since(t0).Round(time.Second))
			srv := s3test.Start(b)
			to := srv.Bucket(b, "published", "bench/")
			if _, err := replica.Publish(ctx, w, to, nil); err != nil {
				b.Fatal(err)
			}
			r, err := replica.Open(ctx, to, filepath.Join(b.TempDir(), "replica"), &replica.Options{Poll: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			b.ResetTimer()
			var pubT, repT time.Duration
			var bytes int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := w.Ingest(ctx, index.Input{Source: fmt.Sprintf("bench/new-%d.txt", i), MediaType: "text/plain", Data: []byte(fmt.Sprintf("A new passage %d.", i))}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				p, err := replica.Publish(ctx, w, to, nil)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				switched, err := r.Poll(ctx)
				if err != nil || !switched {
					b.Fatalf("poll: switched %v, %v", switched, err)
				}
				t2 := time.Now()
				pubT += t1.Sub(t0)
				repT += t2.Sub(t1)
				bytes = p.Bytes
				if info, _ := r.Index().Replica(); info.Digest != p.Digest {
					b.Fatalf("replica serves %s, want %s", info.Digest, p.Digest)
				}
			}
			n := float64(b.N)
			b.ReportMetric(pubT.Seconds()/n, "publish-s")
			b.ReportMetric(repT.Seconds()/n, "replica-s")
			b.ReportMetric((pubT+repT).Seconds()/n, "catchup-s")
			b.ReportMetric(float64(bytes)/1e6, "file-MB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
