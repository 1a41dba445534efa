package serve_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/serve"
)

// A job's outcome does not depend on the jobs queued with it: when a
// batch fails before anything of it is stored (here the embedding model
// times out on one caller's document, which IngestBatch reports for the
// whole batch), each job runs again alone, so the other callers' documents
// are stored and only the failing one's job fails, as one job a batch
// would have it (review 14, which found the batch failing every job).
func TestGroupCommitFailureRunsJobsAlone(t *testing.T) {
	for _, batch := range []int{1, 0} { // 1: each alone (the behaviour before); 0: the default, 64
		t.Run(fmt.Sprintf("IngestBatch=%d", batch), func(t *testing.T) {
			ms := modelserver.Start(t)
			ms.Set(func(s *modelserver.Server) { s.Dim = 32 })
			spec, err := embed.ParseSpec("openai:m?timeout=2s&retries=-1&url=" + ms.URL + "/v1")
			if err != nil {
				t.Fatal(err)
			}
			ix, err := index.Open(context.Background(), t.TempDir(), &index.Options{Embedder: spec})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ix.Close() })
			tokens, err := serve.ParseTokens([]byte(`[{"token": "` + adminToken + `", "name": "admin", "clearance": "restricted", "write": true}]`))
			if err != nil {
				t.Fatal(err)
			}
			srv, err := serve.New(ix, &serve.Options{Tokens: tokens, AllowWrite: true, IngestBatch: batch,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx, ln) }()
			t.Cleanup(func() { cancel(); <-done })
			f := &fixture{ix: ix, srv: srv, url: "http://" + ln.Addr().String()}

			upload := func(source, text string) serve.Job {
				t.Helper()
				code, body := f.upload(t, adminToken, url.Values{"source": {source}}, []byte(text))
				if code != http.StatusAccepted {
					t.Fatalf("ingest %s: %d %s", source, code, body)
				}
				return decodeJob(t, body)
			}
			release := make(chan struct{})
			ms.Set(func(s *modelserver.Server) { s.HoldOn = "HOLDME"; s.Release = release })
			held := upload("/held.md", "# Held\n\nHOLDME lentil\n")
			waitHeld(t, ms, "HOLDME")
			// From now on a request with POISON hangs until the client's
			// timeout (2s): a document the model fails on.
			never := make(chan struct{})
			t.Cleanup(func() { close(never) })
			ms.Set(func(s *modelserver.Server) { s.HoldOn = "POISON"; s.Release = never })
			good := upload("/good.md", "# Good\n\nlentil soup with cumin\n")
			poison := upload("/poison.md", "# Poison\n\nPOISON lentil\n")
			close(release)

			if j := f.finished(t, adminToken, held.ID); j.State != serve.JobSucceeded {
				t.Fatalf("held: %+v", j)
			}
			if j := f.finished(t, adminToken, poison.ID); j.State != serve.JobFailed {
				t.Errorf("poison: %+v, want failed", j)
			}
			if j := f.finished(t, adminToken, good.ID); j.State != serve.JobSucceeded {
				t.Errorf("/good.md failed because another caller's document queued with it failed: %s %q", j.State, j.Error)
			}
		})
	}
}
