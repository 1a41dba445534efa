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
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/serve"
)

// BenchmarkSearchOverhead is a search in-process (Index.Search, the call
// the server makes) and the same over HTTP (POST /v1/search on 127.0.0.1,
// keep-alive, the hits decoded), on 2,000 small documents: the difference
// is the server's cost per request. make bench-serve measures the same at
// 100k passages against the best of both.
func BenchmarkSearchOverhead(b *testing.B) {
	ctx := context.Background()
	ix, err := index.Open(ctx, b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	var ins []index.Input
	for i := 0; i < 2000; i++ {
		ins = append(ins, index.Input{Source: fmt.Sprintf("/docs/%d.md", i),
			Data: []byte(fmt.Sprintf("# Note %d\n\nLentil soup %d with bread, onions and cumin; the kitchen serves it hot on day %d.\n", i, i, i%7))})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		b.Fatal(err)
	}
	srv, err := serve.New(ix, &serve.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-done }()
	url := "http://" + ln.Addr().String() + "/v1/search"
	body, _ := json.Marshal(map[string]any{"query": "lentil soup kitchen", "k": 10, "mode": "bm25"})

	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			hits, err := ix.Search(ctx, "lentil soup kitchen", &index.SearchOptions{K: 10, Mode: index.ModeBM25, Clearance: index.Public})
			if err != nil || len(hits) != 10 {
				b.Fatal(len(hits), err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		client := &http.Client{}
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
