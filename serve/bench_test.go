package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/serve"
)

// BenchmarkSearchOverhead is a search in-process (Index.Search, the call
// the server makes) and the same over HTTP (POST /v1/search on 127.0.0.1,
// keep-alive, the hits decoded), on 2,000 small documents: the difference
// is the server's and the client's cost per request. Each document is a
// title and a body of about 1 KB, so that the 10 hits weigh what
// bench-serve's do (≈ 14 KB of JSON). make bench-serve measures the same
// at 100k passages, each query in-process and over HTTP back to back.
func BenchmarkSearchOverhead(b *testing.B) {
	ctx := context.Background()
	ix, err := index.Open(ctx, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	words := strings.Fields("the a of protein cells receptor expression kinase patients study results increased levels mice signaling activity human cancer tumor gene role response induced binding — “δ-catenin” 5′-UTR")
	var ins []index.Input
	for i := 0; i < 2000; i++ {
		var body strings.Builder
		fmt.Fprintf(&body, "# Note %d on the regulation of lentil soup in the kitchen of a large hospital\n\nLentil soup %d with bread, onions and cumin; the kitchen serves it hot on day %d with marjoram%d.", i, i, i%7, i%100)
		for j := 0; j < 140; j++ {
			body.WriteString(" " + words[(i*31+j*j)%len(words)])
		}
		ins = append(ins, index.Input{Source: fmt.Sprintf("/docs/%d.md", i), Data: []byte(body.String() + ".\n")})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		b.Fatal(err)
	}
	srv, err := serve.New(ix, &serve.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	base, stop := serveLocal(b, srv)
	defer stop()
	url := base + "/v1/search"
	body, _ := json.Marshal(map[string]any{"query": "marjoram7", "k": 10, "mode": "bm25"})

	b.Run("in-process", func(b *testing.B) {
		defer reportCPU(b)()
		for b.Loop() {
			hits, err := ix.Search(ctx, "marjoram7", &index.SearchOptions{K: 10, Mode: index.ModeBM25, Clearance: index.Public})
			if err != nil || len(hits) != 10 {
				b.Fatal(len(hits), err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		client := &http.Client{}
		defer reportCPU(b)()
		for b.Loop() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			var out struct{ Hits []index.Hit }
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if err != nil || len(out.Hits) != 10 {
				b.Fatal(len(out.Hits), err)
			}
		}
	})
}

// serveLocal serves srv on 127.0.0.1 and returns its base URL and the
// function that stops it (and waits for Serve to return): call it before
// the index is closed.
func serveLocal(b *testing.B, srv *serve.Server) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() { stop(); <-done }
}

// reportCPU reports the process's CPU time (user and system, every
// thread: the server's, the client's and DuckDB's) per operation, as
// cpu-ns/op, when the function it returns is called: on a shared machine
// a steadier figure than the wall time per operation.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkConcurrentIngest is what a server taking small writes from
// many clients sees: 8 clients, each uploading one document after
// another (POST /v1/ingest?wait=true on 127.0.0.1, file:// blob store,
// hash embedder), with the single-document ingest jobs queued together
// run as one batch (IngestBatch 64, the default) and, its peer in the
// same run, each alone (IngestBatch 1). One op is one document; docs/s is
// the throughput.
func BenchmarkConcurrentIngest(b *testing.B) {
	for _, batch := range []int{64, 1} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			ix, err := index.Open(ctx, dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer ix.Close()
			tokens, err := serve.ParseTokens([]byte(`[{"token": "` + adminToken + `", "name": "admin", "clearance": "restricted", "write": true}]`))
			if err != nil {
				b.Fatal(err)
			}
			srv, err := serve.New(ix, &serve.Options{Tokens: tokens, AllowWrite: true, IngestBatch: batch,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			addr, stop := serveLocal(b, srv)
			defer stop()
			base := addr + "/v1/ingest?wait=true&source="
			const clients = 8
			var next atomic.Int64
			b.ResetTimer()
			t0 := time.Now()
			var g errgroup.Group
			for c := range clients {
				g.Go(func() error {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return nil
						}
						text := fmt.Sprintf("# Note %d\n\nclient %d writes lentil soup note %d, with onions and cumin\n", i, c, i)
						req, _ := http.NewRequest("POST", base+fmt.Sprintf("/notes/%d.md", i), strings.NewReader(text))
						req.Header.Set("Authorization", "Bearer "+adminToken)
						req.Header.Set("Content-Type", "application/octet-stream")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							return err
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"succeeded"`)) {
							return fmt.Errorf("ingest %d: %d %s", i, resp.StatusCode, body)
						}
					}
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "docs/s")
		})
	}
}
