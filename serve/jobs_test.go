package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/serve"
)

// heldServer is a server over an index whose embedder is a model server
// the test can hold, serving on 127.0.0.1 until stop.
type heldServer struct {
	dir  string
	spec embed.Spec
	ix   *index.Index
	srv  *serve.Server
	ms   *modelserver.Server
	url  string
	stop func() error // cancels Serve's context, returns its error
}

func startHeld(t *testing.T, dir string, ms *modelserver.Server, opts serve.Options) *heldServer {
	t.Helper()
	return startHeldSpec(t, dir, ms, "openai:m?url="+ms.URL+"/v1", opts)
}

// startHeldSpec is startHeld with the embedder spec given (a timeout, no
// retries). The server is stopped at the test's end, before the index is
// closed, unless the test stopped it.
func startHeldSpec(t *testing.T, dir string, ms *modelserver.Server, specText string, opts serve.Options) *heldServer {
	t.Helper()
	spec, err := embed.ParseSpec(specText)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(context.Background(), dir, &index.Options{Embedder: spec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	tokens, err := serve.ParseTokens([]byte(`[{"token": "` + adminToken + `", "name": "admin", "clearance": "restricted", "write": true}]`))
	if err != nil {
		t.Fatal(err)
	}
	opts.Tokens = tokens
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := serve.New(ix, &opts)
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
	h := &heldServer{dir: dir, spec: spec, ix: ix, srv: srv, ms: ms, url: "http://" + ln.Addr().String()}
	var once sync.Once
	var serveErr error
	h.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(30 * time.Second):
				t.Error("Serve did not return")
			}
		})
		return serveErr
	}
	t.Cleanup(func() { h.stop() }) // after the index's Cleanup, so it runs first
	return h
}

func (h *heldServer) fixture() *fixture { return &fixture{ix: h.ix, srv: h.srv, url: h.url} }

// jobsAfter reads the jobs from the server's handler after Serve ended.
func (h *heldServer) jobsAfter(t *testing.T) map[string]serve.Job {
	t.Helper()
	req := httptest.NewRequest("GET", "/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	var out serve.JobsOutput
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	byID := map[string]serve.Job{}
	for _, j := range out.Jobs {
		byID[j.ID] = j
	}
	return byID
}

// holdQueue queues an ingest of /held.md whose embedding the model holds
// until release is closed, and waits until the model holds it: the jobs
// queued next wait behind it.
func (f *fixture) holdQueue(t *testing.T, ms *modelserver.Server) (held serve.Job, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	ms.Set(func(s *modelserver.Server) { s.HoldOn = "HOLDME"; s.Release = release })
	held = f.queue(t, "/held.md", []byte("# Held\n\nHOLDME lentil\n"))
	waitHeld(t, ms, "HOLDME")
	return held, release
}

// waitHeld waits until the model server holds a request.
func waitHeld(t *testing.T, ms *modelserver.Server, hold string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range ms.Requests() {
			if strings.Contains(strings.Join(r.Input, " "), hold) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the model server never got the held request")
}

// One write job runs at a time; the queue holds MaxQueue more and
// refuses the next with 429. When Serve's context ends, the running
// ingest is canceled and rolled back, the queued jobs are canceled, and
// the index reopens whole; a running re-embed abandons its generation.
func TestShutdownCancelsJobs(t *testing.T) {
	ms := modelserver.Start(t)
	ms.Set(func(s *modelserver.Server) { s.Dim = 32 })
	dir := t.TempDir()
	h := startHeld(t, dir, ms, serve.Options{AllowWrite: true, MaxQueue: 1})
	f := h.fixture()
	if code, body := f.upload(t, adminToken, url.Values{"source": {"/a.md"}, "wait": {"true"}}, []byte("# A\n\nlentil apples\n")); code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, body)
	}
	release := make(chan struct{})
	defer close(release)
	ms.Set(func(s *modelserver.Server) { s.HoldOn = "HOLDME"; s.Release = release })
	code, body := f.upload(t, adminToken, url.Values{"source": {"/held.md"}}, []byte("# Held\n\nHOLDME lentil\n"))
	if code != http.StatusAccepted {
		t.Fatalf("ingest: %d %s", code, body)
	}
	held := decodeJob(t, body)
	waitHeld(t, ms, "HOLDME")
	code, body = f.do(t, "POST", "/v1/compact", adminToken, nil)
	if code != http.StatusAccepted {
		t.Fatalf("compact: %d %s", code, body)
	}
	queued := decodeJob(t, body)
	code, body = f.do(t, "POST", "/v1/compact", adminToken, nil)
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "write jobs wait already") {
		t.Errorf("past the queue: %d %s", code, body)
	}
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", adminToken, map[string]any{"query": "apples", "mode": "bm25"}, &out)
	if len(out.Hits) != 1 {
		t.Errorf("search while a write runs: %+v", out)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	jobs := h.jobsAfter(t)
	if j := jobs[held.ID]; j.State != serve.JobCanceled || j.Finished == nil || !strings.Contains(j.Error, "canceled") {
		t.Errorf("the running ingest: %+v", j)
	}
	if j := jobs[queued.ID]; j.State != serve.JobCanceled {
		t.Errorf("the queued compact: %+v", j)
	}
	req := httptest.NewRequest("POST", "/v1/compact", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Errorf("a job after shutdown: %d %s", rec.Code, rec.Body)
	}
	h.ix.Close()
	ms.Set(func(s *modelserver.Server) { s.HoldOn = "" })

	// Nothing of the canceled ingest was kept.
	ix, err := index.Open(context.Background(), dir, &index.Options{Embedder: h.spec})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ix.Verify(context.Background(), nil)
	if err != nil || !v.OK() || v.Documents != 1 {
		t.Fatalf("after the canceled ingest: %v %+v", err, v)
	}
	gens, _ := layout.Generations(dir)
	ix.Close()

	// A re-embed canceled while it embeds leaves no generation behind.
	h = startHeld(t, dir, ms, serve.Options{AllowWrite: true})
	f = h.fixture()
	ms.Set(func(s *modelserver.Server) { s.HoldOn = "apples" })
	code, body = f.do(t, "POST", "/v1/reembed", adminToken, map[string]any{"embedder": "openai:m2?url=" + ms.URL + "/v1"})
	if code != http.StatusAccepted {
		t.Fatalf("reembed: %d %s", code, body)
	}
	reembed := decodeJob(t, body)
	waitHeld(t, ms, "apples")
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if j := h.jobsAfter(t)[reembed.ID]; j.State != serve.JobCanceled {
		t.Errorf("the running reembed: %+v", j)
	}
	gen := h.ix.Generation()
	h.ix.Close()
	after, _ := layout.Generations(dir)
	if strings.Join(after, " ") != strings.Join(gens, " ") {
		t.Errorf("generations %v after a canceled reembed, want %v (live %s)", after, gens, gen)
	}
}

// With the embedder down, dense and hybrid searches answer 503 saying
// that mode bm25 still works (a tool error over MCP), and bm25 answers.
func TestEmbedderDown(t *testing.T) {
	ms := modelserver.Start(t)
	ms.Set(func(s *modelserver.Server) { s.Dim = 32 })
	h := startHeld(t, t.TempDir(), ms, serve.Options{AllowWrite: true})
	defer h.stop()
	f := h.fixture()
	if code, body := f.upload(t, adminToken, url.Values{"source": {"/a.md"}, "wait": {"true"}}, []byte("# A\n\nlentil apples\n")); code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, body)
	}
	ms.Close()
	for i, mode := range []string{"hybrid", "dense"} {
		start := time.Now()
		code, body := f.do(t, "POST", "/v1/search", "", map[string]any{"query": "apples", "mode": mode})
		took := time.Since(start)
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "embedder is unreachable") || !strings.Contains(string(body), "mode bm25 still works") {
			t.Errorf("%s with the embedder down: %d %s", mode, code, body)
		}
		t.Logf("%s: %s", mode, took)
		if i > 0 && took > 500*time.Millisecond {
			t.Errorf("a second search with the embedder down took %s; want an answer at once", took)
		}
	}
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", "", map[string]any{"query": "apples", "mode": "bm25"}, &out)
	if len(out.Hits) != 1 {
		t.Errorf("bm25 with the embedder down: %+v", out)
	}
	cs := f.mcpSession(t, "")
	if text, isErr := callTool(t, cs, "search", map[string]any{"query": "apples", "mode": "hybrid"}, nil); !isErr || !strings.Contains(text, "mode bm25 still works") {
		t.Errorf("mcp search with the embedder down: %v %s", isErr, text)
	}
}
