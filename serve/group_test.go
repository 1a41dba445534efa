package serve_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/serve"
)

// metricValue reads one sample of the server's /metrics, as the admin.
func metricValue(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	code, body := f.do(t, "GET", "/metrics", adminToken, nil)
	if code != http.StatusOK {
		t.Fatalf("metrics: %d %s", code, body)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("metrics: no %s in\n%s", name, body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Single-document ingest jobs queued behind a running write run as one
// batch (group commit: one transaction, one embedder call, one fsync of
// each kind for all of them), each job with its own outcome: a document
// that fails, fails alone, and a second job for a source already in the
// batch waits for the next one, so that it sees the first one's result,
// as one after the other would.
func TestIngestJobsGroupCommit(t *testing.T) {
	ms := modelserver.Start(t)
	ms.Set(func(s *modelserver.Server) { s.Dim = 32 })
	h := startHeld(t, t.TempDir(), ms, serve.Options{AllowWrite: true})
	f := h.fixture()
	upload := func(source, text string) serve.Job { t.Helper(); return f.queue(t, source, []byte(text)) }
	held, release := f.holdQueue(t, ms)
	var queued []serve.Job
	for i := range 5 {
		queued = append(queued, upload(fmt.Sprintf("/d%d.md", i), fmt.Sprintf("# D%d\n\nlentil soup number %d\n", i, i)))
	}
	bad := upload("/bad.pdf", "%PDF-1.7 cut short")
	again := upload("/d1.md", "# D1\n\nlentil soup, second version\n")
	close(release)

	status := func(j serve.Job) string {
		t.Helper()
		j = f.finished(t, adminToken, j.ID)
		if j.State != serve.JobSucceeded || j.Result == nil || len(j.Result.Documents) != 1 {
			t.Fatalf("job %s: %+v", j.ID, j)
		}
		return j.Result.Documents[0].Status
	}
	if s := status(held); s != "added" {
		t.Errorf("the held job: %s", s)
	}
	for i, j := range queued {
		if s := status(j); s != "added" {
			t.Errorf("/d%d.md: %s, want added", i, s)
		}
	}
	// Not a PDF this program reads (no PDF extractor is linked into the
	// tests): its job fails with its own document's error, in the batch.
	if j := f.finished(t, adminToken, bad.ID); j.State != serve.JobFailed || !strings.Contains(j.Error, "/bad.pdf") {
		t.Errorf("/bad.pdf: %+v, want failed with its own error", j)
	}
	if s := status(again); s != "replaced" {
		t.Errorf("/d1.md again: %s, want replaced (after the first version, in the next batch)", s)
	}
	// Three batches: the held job alone, the six queued behind it, the
	// second /d1.md.
	if n, sum := metricValue(t, f, "escurel_ingest_batch_documents_count"), metricValue(t, f, "escurel_ingest_batch_documents_sum"); n != 3 || sum != 8 {
		t.Errorf("%v batches of %v documents, want 3 of 8", n, sum)
	}
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", adminToken, map[string]any{"query": "second version", "mode": "bm25"}, &out)
	if len(out.Hits) == 0 || out.Hits[0].Source != "/d1.md" {
		t.Errorf("search: %+v", out.Hits)
	}
}
