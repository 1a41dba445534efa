package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/serve"
)

// A /v1 answer goes out whole, with its Content-Length, not chunked (net/http
// chunks a body past 2 KiB written by a handler); one past 1 MiB streams,
// complete.
func TestAnswerLength(t *testing.T) {
	f := newFixture(t, serve.Options{})
	ctx := context.Background()
	long := strings.Repeat("Lentil broth simmers with carrots and thyme. ", 120) // 5.4 KB a block
	big := strings.Repeat("Barley words fill this very long document line.\n\n", 40000)
	for _, in := range []index.Input{
		{Source: "/docs/long.md", Data: []byte("# Long\n\n" + long + "\n")},
		{Source: "/docs/big.md", Data: []byte("# Big\n\n" + big)},
	} {
		if _, err := f.ix.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	send := func(method, path, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, data
	}

	resp, data := send("POST", "/v1/search", `{"query": "lentil broth", "k": 5, "mode": "bm25"}`)
	var out serve.SearchOutput
	if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 || len(out.Hits) == 0 {
		t.Fatalf("search: %d %v %s", resp.StatusCode, err, data)
	}
	if len(data) <= 2048 || resp.ContentLength != int64(len(data)) || len(resp.TransferEncoding) > 0 {
		t.Errorf("search answer of %d bytes: Content-Length %d, transfer encoding %v", len(data), resp.ContentLength, resp.TransferEncoding)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}

	resp, data = send("POST", "/v1/search", `{"query": "lentil", "k": 5000}`)
	if resp.StatusCode != http.StatusUnprocessableEntity || resp.ContentLength != int64(len(data)) || !strings.Contains(string(data), "k") {
		t.Errorf("an error: %d, Content-Length %d of %d bytes: %s", resp.StatusCode, resp.ContentLength, len(data), data)
	}

	resp, data = send("GET", "/v1/documents/"+blobstore.DocID("/docs/big.md")+"/text", "")
	var text serve.DocumentOutput
	if err := json.Unmarshal(data, &text); err != nil || resp.StatusCode != 200 {
		t.Fatalf("text: %d %v", resp.StatusCode, err)
	}
	if text.Text != "# Big\n\n"+big || resp.ContentLength != -1 {
		t.Errorf("a 2 MB text: %d bytes of %d, Content-Length %d (want it streamed)", len(text.Text), len(big)+7, resp.ContentLength)
	}
}
