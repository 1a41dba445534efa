package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/escurel/escurel/index"
)

// BenchmarkS3Ingest ingests 256 small documents, 64 a batch, into an
// s3:// store whose every request takes 5 ms more (a nearby object
// store's round trip): what a batch's uploads cost. Reports documents/s.
func BenchmarkS3Ingest(b *testing.B) {
	b.Setenv("AWS_ACCESS_KEY_ID", "escurel-test")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "escurel-test")
	b.Setenv("AWS_REGION", "us-east-1")
	b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	backend := s3mem.New()
	fake := gofakes3.New(backend).Server()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		fake.ServeHTTP(w, r)
	}))
	defer ts.Close()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench%d", i)
		if err := backend.CreateBucket(name); err != nil {
			b.Fatal(err)
		}
		q := url.Values{"endpoint": {ts.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}, "disable_https": {"true"}}
		ix, err := index.Open(ctx, b.TempDir(), &index.Options{BlobURL: "s3://" + name + "?" + q.Encode()})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for batch := 0; batch < 4; batch++ {
			var ins []index.Input
			for d := 0; d < 64; d++ {
				ins = append(ins, index.Input{Source: fmt.Sprintf("/d/%d-%d.md", batch, d),
					Data: []byte(fmt.Sprintf("# Doc %d %d\n\nSome text about item %d of batch %d.\n", batch, d, d, batch))})
			}
			if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(256/time.Since(start).Seconds(), "docs/s")
		ix.Close()
	}
}
