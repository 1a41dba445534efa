package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/serve"
)

// upload posts raw bytes to /v1/ingest with the query parameters q.
func (f *fixture) upload(t *testing.T, token string, q url.Values, data []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", f.url+"/v1/ingest?"+q.Encode(), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// queue uploads data as the admin, as a job not waited for (202), and
// returns the job.
func (f *fixture) queue(t *testing.T, source string, data []byte) serve.Job {
	t.Helper()
	code, body := f.upload(t, adminToken, url.Values{"source": {source}}, data)
	if code != http.StatusAccepted {
		t.Fatalf("ingest %s: %d %s", source, code, body)
	}
	return decodeJob(t, body)
}

// finished waits for a job to finish and returns it.
func (f *fixture) finished(t *testing.T, token, id string) serve.Job {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var j serve.Job
		f.get(t, "GET", "/v1/jobs/"+id, token, nil, &j)
		if j.Finished != nil {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not finish: %+v", id, j)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func decodeJob(t *testing.T, body []byte) serve.Job {
	t.Helper()
	var j serve.Job
	if err := json.Unmarshal(body, &j); err != nil || j.ID == "" {
		t.Fatalf("not a job: %v\n%s", err, body)
	}
	return j
}

// Every write runs as a job over HTTP: ingest (raw bytes), delete,
// rebuild, reembed, rollback and compact; the jobs are listed and
// counted in the metrics.
func TestWriteJobs(t *testing.T) {
	f := newFixture(t, serve.Options{AllowWrite: true})
	// Without wait: 202 at once, then the job finishes.
	code, body := f.upload(t, internalWriter, url.Values{"source": {"/docs/plan.md"}, "sensitivity": {"internal"}},
		[]byte("# Plan\n\nThe quarterly plan mentions quinces.\n"))
	if code != http.StatusAccepted {
		t.Fatalf("ingest: %d %s", code, body)
	}
	j := decodeJob(t, body)
	if j.Kind != serve.JobIngest || j.Caller != "intwriter" || (j.State != serve.JobQueued && j.State != serve.JobRunning) {
		t.Errorf("a new job: %+v", j)
	}
	j = f.finished(t, internalWriter, j.ID)
	if j.State != serve.JobSucceeded || len(j.Result.Documents) != 1 || j.Result.Documents[0].Status != "added" || j.Progress != (serve.JobProgress{Done: 1, Total: 1}) {
		t.Fatalf("ingest job: %+v", j)
	}
	doc := j.Result.Documents[0]
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", internalToken, map[string]any{"query": "quinces", "mode": "bm25"}, &out)
	if len(out.Hits) != 1 || out.Hits[0].DocID != doc.DocID {
		t.Fatalf("the ingested document is not found: %+v", out)
	}
	f.get(t, "POST", "/v1/search", "", map[string]any{"query": "quinces", "mode": "bm25"}, &out)
	if len(out.Hits) != 0 {
		t.Errorf("a public caller finds the internal document: %+v", out)
	}

	// With wait: 200 and the finished job.
	code, body = f.do(t, "POST", "/v1/delete?wait=true", internalWriter, map[string]any{"documents": []string{"/docs/plan.md"}})
	if code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	if j = decodeJob(t, body); j.State != serve.JobSucceeded || len(j.Result.Deleted) != 1 || j.Result.Deleted[0] != doc.DocID {
		t.Fatalf("delete job: %+v", j)
	}
	f.get(t, "POST", "/v1/search", internalToken, map[string]any{"query": "quinces", "mode": "bm25"}, &out)
	if len(out.Hits) != 0 {
		t.Errorf("deleted, still found: %+v", out)
	}

	gen := f.ix.Generation()
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/rebuild", map[string]any{"keep": 3}},
		{"/v1/reembed", map[string]any{"embedder": "hash/128", "keep": 3}},
		{"/v1/rollback", map[string]any{}},
		{"/v1/compact", nil},
	} {
		code, body := f.do(t, "POST", c.path+"?wait=true", adminToken, c.body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
		j := decodeJob(t, body)
		if j.State != serve.JobSucceeded || j.Result == nil {
			t.Fatalf("%s: %+v", c.path, j)
		}
		switch c.path {
		case "/v1/rebuild":
			if j.Result.Previous != gen || j.Result.Rebuilt == nil || j.Result.Rebuilt.Documents != 4 || j.Progress.Total != 4 {
				t.Errorf("rebuild: %+v %+v", j.Result, j.Progress)
			}
		case "/v1/rollback":
			if j.Result.Generation == j.Result.Previous || f.ix.Generation() != j.Result.Generation {
				t.Errorf("rollback: %+v, serving %s", j.Result, f.ix.Generation())
			}
		}
	}
	if f.ix.Manifest().EmbedderDim != 384 {
		t.Errorf("after reembed and rollback the dimension is %d, want 384 again", f.ix.Manifest().EmbedderDim)
	}
	f.get(t, "POST", "/v1/search", "", map[string]any{"query": "lentil soup", "mode": "hybrid"}, &out)
	if len(out.Hits) == 0 {
		t.Error("no search after the writes")
	}

	var jobs serve.JobsOutput
	f.get(t, "GET", "/v1/jobs", adminToken, nil, &jobs)
	if len(jobs.Jobs) != 6 || jobs.Jobs[0].Kind != serve.JobCompact || jobs.Jobs[5].Kind != serve.JobIngest {
		t.Errorf("jobs (newest first): %+v", jobs)
	}
	metrics := string(f.get(t, "GET", "/metrics", restrictedToken, nil, nil))
	for _, want := range []string{`escurel_jobs_total{kind="reembed",outcome="succeeded"} 1`, "escurel_jobs_queued 0", "escurel_documents 4", "escurel_generation ", "escurel_index_bytes "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if public := string(f.get(t, "GET", "/metrics", "", nil, nil)); strings.Contains(public, "escurel_documents") {
		t.Error("/metrics gives a public caller the whole index's counts")
	}
}

// Writes are refused unless the server allows them and the token may
// write; a writer touches nothing above its clearance, and what it cannot
// see answers as what does not exist.
func TestWriteAccess(t *testing.T) {
	ro := newFixture(t, serve.Options{})
	code, body := ro.upload(t, adminToken, url.Values{"source": {"/x.md"}}, []byte("# X\n"))
	if code != http.StatusForbidden || !strings.Contains(string(body), "--allow-write") {
		t.Errorf("a read-only server: %d %s", code, body)
	}

	f := newFixture(t, serve.Options{AllowWrite: true})
	var all serve.DocumentsOutput
	f.get(t, "GET", "/v1/documents", restrictedToken, nil, &all)
	var secretID string
	for _, d := range all.Documents {
		if strings.Contains(d.Source, secret+"-memo") {
			secretID = d.DocID
		}
	}
	for _, c := range []struct {
		name, token string
		q           url.Values
		data        string
		code        int
		want        string
	}{
		{"read-only token", internalToken, url.Values{"source": {"/a.md"}}, "# A\n", 403, "no write permission"},
		{"anonymous", "", url.Values{"source": {"/a.md"}}, "# A\n", 403, "no write permission"},
		{"sensitivity above clearance", publicWriter, url.Values{"source": {"/a.md"}, "sensitivity": {"internal"}}, "# A\n", 403, "above your clearance"},
		{"front matter above clearance", internalWriter, url.Values{"source": {"/a.md"}}, "---\nsensitivity: restricted\n---\n# A\n\nx\n", 403, "front matter"},
		{"over a restricted document", internalWriter, url.Values{"source": {"/docs/" + secret + "-memo.md"}}, "# A\n", 403, "not writable at your clearance"},
		{"unknown sensitivity", publicWriter, url.Values{"source": {"/a.md"}, "sensitivity": {"secret"}}, "# A\n", 422, "sensitivity"},
		{"no source", publicWriter, url.Values{}, "# A\n", 422, "source"},
		{"long source", publicWriter, url.Values{"source": {"/" + strings.Repeat("s", 2000)}}, "# A\n", 422, "source"},
		{"language", publicWriter, url.Values{"source": {"/a.md"}, "language": {"EN!"}}, "# A\n", 422, "language"},
		{"media type", publicWriter, url.Values{"source": {"/a.md"}, "media_type": {"application/x-nothing"}}, "# A\n", 422, "media_type"},
		{"paths not allowed", adminToken, url.Values{"path": {"/etc/passwd"}}, "", 403, "--allow-paths"},
		{"paths need restricted", publicWriter, url.Values{"path": {"/etc/passwd"}}, "", 403, "restricted clearance"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.upload(t, c.token, c.q, []byte(c.data))
			if code != c.code || !strings.Contains(string(body), c.want) || strings.Contains(string(body), secret) && c.token != adminToken {
				t.Errorf("%d %s, want %d naming %q", code, body, c.code, c.want)
			}
		})
	}
	// Over the upload limit: 413.
	small := newFixture(t, serve.Options{AllowWrite: true, MaxUploadBytes: 100})
	if code, body := small.upload(t, publicWriter, url.Values{"source": {"/big.md"}}, bytes.Repeat([]byte("a"), 200)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("over the upload limit: %d %s", code, body)
	}

	// A delete of a document above the clearance answers exactly as one
	// of a missing document.
	_, missing := f.do(t, "POST", "/v1/delete", internalWriter, map[string]any{"documents": []string{"/docs/none.md"}})
	for _, name := range []string{"/docs/" + secret + "-memo.md", secretID} {
		code, body := f.do(t, "POST", "/v1/delete", internalWriter, map[string]any{"documents": []string{name}})
		if code != http.StatusNotFound || !bytes.Equal(body, missing) {
			t.Errorf("delete %s above the clearance: %d %s; a missing one: %s", name, code, body, missing)
		}
	}
	// The writes that act on everything need restricted clearance.
	for _, p := range []string{"/v1/rebuild", "/v1/reembed", "/v1/rollback", "/v1/compact"} {
		req := map[string]any{}
		if p == "/v1/reembed" {
			req["embedder"] = "hash/64"
		}
		code, body := f.do(t, "POST", p, internalWriter, req)
		if code != http.StatusForbidden || !strings.Contains(string(body), "restricted clearance") {
			t.Errorf("%s by an internal writer: %d %s", p, code, body)
		}
	}
	// Jobs: an internal writer sees its own, not the admin's.
	code, body = f.do(t, "POST", "/v1/compact?wait=true", adminToken, nil)
	if code != http.StatusOK {
		t.Fatalf("compact: %d %s", code, body)
	}
	adminJob := decodeJob(t, body)
	code, body = f.upload(t, internalWriter, url.Values{"source": {"/docs/note.md"}, "wait": {"true"}}, []byte("# Note\n\nA note.\n"))
	if code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, body)
	}
	ownJob := decodeJob(t, body)
	var jobs serve.JobsOutput
	f.get(t, "GET", "/v1/jobs", internalWriter, nil, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != ownJob.ID {
		t.Errorf("an internal writer's jobs: %+v", jobs)
	}
	_, missingJob := f.do(t, "GET", "/v1/jobs/0000000000000000", internalWriter, nil)
	code, body = f.do(t, "GET", "/v1/jobs/"+adminJob.ID, internalWriter, nil)
	if code != http.StatusNotFound || strings.Contains(string(body), adminJob.ID) != strings.Contains(string(missingJob), "0000000000000000") {
		t.Errorf("the admin's job to an internal writer: %d %s (a missing one: %s)", code, body, missingJob)
	}
	f.get(t, "GET", "/v1/jobs", "", nil, &jobs)
	if len(jobs.Jobs) != 0 {
		t.Errorf("a public caller sees internal and restricted jobs: %+v", jobs)
	}
}

// With --allow-paths a restricted writer ingests files of that
// directory, and nothing outside it, symbolic links resolved.
func TestIngestPaths(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(root, "in.md"), []byte("# In\n\nInside the allowed directory: persimmons.\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "out.md"), []byte("# Out\n\nOutside.\n"), 0o644)
	if err := os.Symlink(filepath.Join(outside, "out.md"), filepath.Join(root, "link.md")); err != nil {
		t.Skip(err)
	}
	f := newFixture(t, serve.Options{AllowWrite: true, AllowPaths: root})
	code, body := f.upload(t, adminToken, url.Values{"path": {"in.md"}, "wait": {"true"}}, nil)
	if code != http.StatusOK {
		t.Fatalf("ingest in.md: %d %s", code, body)
	}
	if j := decodeJob(t, body); j.State != serve.JobSucceeded || !strings.HasSuffix(j.Result.Documents[0].Source, "/in.md") {
		t.Fatalf("%+v", j)
	}
	for _, p := range []string{"link.md", "../" + filepath.Base(outside) + "/out.md", filepath.Join(outside, "out.md"), "/etc/passwd"} {
		code, body := f.upload(t, adminToken, url.Values{"path": {p}}, nil)
		if code != http.StatusForbidden || !strings.Contains(string(body), "outside the directory") {
			t.Errorf("path %s: %d %s", p, code, body)
		}
	}
	if code, body := f.upload(t, adminToken, url.Values{"path": {"in.md"}}, []byte("x")); code != 422 {
		t.Errorf("path and a body: %d %s", code, body)
	}
}

// The go-sdk client calls every write tool over streamable HTTP; they are
// offered to write tokens only, annotated destructive.
func TestMCPWriteTools(t *testing.T) {
	f := newFixture(t, serve.Options{AllowWrite: true})
	ro := f.mcpSession(t, restrictedToken)
	tools, err := ro.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 5 {
		t.Errorf("a read-only token gets %d tools", len(tools.Tools))
	}
	cs := f.mcpSession(t, adminToken)
	tools, err = cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		write := tl.Name != "job_status" && !tl.Annotations.ReadOnlyHint
		if write && (tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint) {
			t.Errorf("%s is not annotated destructive", tl.Name)
		}
	}
	if got := strings.Join(names, " "); got != "compact delete expand get_document ingest job_status list_documents rebuild reembed rollback search status" {
		t.Errorf("tools %s", got)
	}
	var j serve.Job
	if text, isErr := callTool(t, cs, "ingest", map[string]any{"source": "/mcp/fig.md", "text": "# Figs\n\nFresh figs from the tool.\n", "wait": true}, &j); isErr || j.State != serve.JobSucceeded {
		t.Fatalf("ingest: %s %+v", text, j)
	}
	if j.Caller != "admin" {
		t.Errorf("the job's caller is %q, want the token's name", j.Caller)
	}
	var st serve.Job
	callTool(t, cs, "job_status", map[string]any{"id": j.ID}, &st)
	if st.ID != j.ID || st.State != serve.JobSucceeded {
		t.Errorf("job_status: %+v", st)
	}
	if _, isErr := callTool(t, cs, "ingest", map[string]any{"source": "/mcp/b64.md", "data_base64": "IyBCNjQKCkJhc2UgNjQuCg==", "wait": true}, &j); isErr || j.State != serve.JobSucceeded {
		t.Fatalf("ingest base64: %+v", j)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"delete", map[string]any{"documents": []string{"/mcp/fig.md"}, "wait": true}},
		{"rebuild", map[string]any{"wait": true}},
		{"reembed", map[string]any{"embedder": "hash/128", "wait": true}},
		{"rollback", map[string]any{"wait": true}},
		{"compact", map[string]any{"wait": true}},
	} {
		var j serve.Job
		if text, isErr := callTool(t, cs, c.tool, c.args, &j); isErr || j.State != serve.JobSucceeded {
			t.Errorf("%s: %s %+v", c.tool, text, j)
		}
	}
	// A public writer: refused, with a reason.
	pw := f.mcpSession(t, publicWriter)
	if text, isErr := callTool(t, pw, "rebuild", nil, nil); !isErr || !strings.Contains(text, "restricted clearance") {
		t.Errorf("rebuild by a public writer: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, pw, "job_status", map[string]any{"id": j.ID}, nil); !isErr || !strings.Contains(text, "not found") {
		t.Errorf("the admin's job to a public writer: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, pw, "delete", map[string]any{"documents": []string{"/docs/" + secret + "-memo.md"}}, nil); !isErr || strings.Contains(text, secret) {
		t.Errorf("delete of a restricted document by a public writer: %v %s", isErr, text)
	}
}

// Documents and blocks are MCP resources; a caller lists and reads only
// those within its clearance, and the rest answer as missing ones.
func TestMCPResources(t *testing.T) {
	f := newFixture(t, serve.Options{})
	ctx := context.Background()
	var all serve.SearchOutput
	f.get(t, "POST", "/v1/search", restrictedToken, map[string]any{"query": "lentil " + secret, "k": 100, "mode": "bm25"}, &all)
	var secretBlock string
	var secretDoc, publicDoc string
	var publicBlock index.Hit
	for _, h := range all.Hits {
		switch {
		case strings.Contains(h.Source, secret):
			secretBlock, secretDoc = h.BlockID, h.DocID
		case h.Source == "/docs/soup.md":
			publicDoc, publicBlock = h.DocID, h
		}
	}
	cs := f.mcpSession(t, "")
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 1 || list.Resources[0].URI != serve.DocumentURI(publicDoc) || list.Resources[0].Name != "/docs/soup.md" {
		t.Errorf("public resources: %+v", list.Resources)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: serve.DocumentURI(publicDoc)})
	if err != nil || !strings.Contains(rr.Contents[0].Text, "Lentil soup") || rr.Contents[0].Meta["source"] != "/docs/soup.md" {
		t.Fatalf("read the public document: %v %+v", err, rr)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: serve.BlockURI(publicBlock.BlockID)})
	if err != nil {
		t.Fatal(err)
	}
	var h index.Hit
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &h); err != nil || h.Body != publicBlock.Body || h.Source != "/docs/soup.md" || h.ByteEnd != publicBlock.ByteEnd {
		t.Errorf("block resource: %v %+v", err, h)
	}
	_, missingErr := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: serve.DocumentURI("00000000000000000000000000000000")})
	_, missingBlock := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: serve.BlockURI("0123456789abcdef")})
	for _, c := range []struct {
		uri  string
		like error
	}{{serve.DocumentURI(secretDoc), missingErr}, {serve.BlockURI(secretBlock), missingBlock}} {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: c.uri})
		if err == nil || strings.Contains(err.Error(), secret) || c.like == nil ||
			strings.ReplaceAll(err.Error(), c.uri, "URI") != strings.ReplaceAll(c.like.Error(), uriOf(c.like), "URI") {
			t.Errorf("read %s above the clearance: %v; a missing one: %v", c.uri, err, c.like)
		}
	}
	rs := f.mcpSession(t, restrictedToken)
	if list, err := rs.ListResources(ctx, nil); err != nil || len(list.Resources) != 3 {
		t.Errorf("restricted resources (failed documents have no text): %v %+v", err, list)
	}
}

// uriOf returns the URI a resource-not-found error names.
func uriOf(err error) string {
	s := err.Error()
	i := strings.Index(s, "escurel://")
	if i < 0 {
		return "\x00"
	}
	j := strings.IndexAny(s[i:], `"} `)
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j]
}

var _ = fmt.Sprintf
