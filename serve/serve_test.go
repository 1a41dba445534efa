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
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "gocloud.dev/blob/fileblob"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/rerank"
	"github.com/escurel/escurel/serve"
)

// Tokens of the test tokens file.
const (
	internalToken   = "tok-internal-0123456789"
	restrictedToken = "tok-restricted-0123456789"
	publicWriter    = "tok-pubwriter-0123456789"   // public, write
	internalWriter  = "tok-intwriter-0123456789"   // internal, write
	adminToken      = "tok-admin-writer-012345678" // restricted, write
	secret          = "zqsecret"                   // in the restricted documents only
)

// fixture is a real index with a document at each sensitivity, a
// restricted document that failed extraction, and a server over it on
// 127.0.0.1.
type fixture struct {
	ix  *index.Index
	srv *serve.Server
	url string
	log *bytes.Buffer
}

func newFixture(t *testing.T, opts serve.Options) *fixture {
	t.Helper()
	ctx := context.Background()
	ix, err := index.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	docs := []index.Input{
		{Source: "/docs/soup.md", Sensitivity: index.Public, Data: []byte("# Lentil soup\n\nLentil soup for everyone: lentils, onions, cumin.\n\n## Serving\n\nServe the lentil soup hot.\n")},
		{Source: "/docs/budget.md", Sensitivity: index.Internal, Data: []byte("# Kitchen budget\n\nThe lentil budget for the kitchen is internal.\n")},
		{Source: "/docs/" + secret + "-memo.md", Sensitivity: index.Restricted, Data: []byte("# Memo " + secret + "\n\nLentil " + secret + " plans for the takeover.\n\nMore lentil " + secret + " detail.\n")},
		// Front matter that does not parse: a failed document,
		// restricted, whose source and reason name the secret.
		{Source: "/docs/" + secret + "-draft.md", Sensitivity: index.Restricted, Data: []byte("---\n" + secret + ": [unclosed\n---\n# Draft\n\nLentil.\n")},
	}
	for _, in := range docs {
		if res, err := ix.Ingest(ctx, in); err != nil && res.Status != index.Failed {
			t.Fatalf("ingest %s: %v", in.Source, err)
		}
	}
	tokens, err := serve.ParseTokens([]byte(fmt.Sprintf(`[
		{"token": %q, "name": "staff", "clearance": "internal"},
		{"token": %q, "name": "legal", "clearance": "restricted"},
		{"token": %q, "name": "pubwriter", "write": true},
		{"token": %q, "name": "intwriter", "clearance": "internal", "write": true},
		{"token": %q, "name": "admin", "clearance": "restricted", "write": true}]`,
		internalToken, restrictedToken, publicWriter, internalWriter, adminToken)))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ix: ix, log: &bytes.Buffer{}}
	opts.Tokens = tokens
	opts.Logger = slog.New(slog.NewJSONHandler(&syncWriter{w: f.log}, nil))
	if f.srv, err = serve.New(ix, &opts); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(f.srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(func() { f.srv.Close() })
	f.url = hs.URL
	return f
}

// syncWriter serializes writes of the access log from the server's goroutines.
type syncWriter struct {
	mu chan struct{}
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	if s.mu == nil {
		s.mu = make(chan struct{}, 1)
	}
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.w.Write(p)
}

// do sends a request and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, f.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// get sends a request that must answer 200 and decodes its body into v.
func (f *fixture) get(t *testing.T, method, path, token string, body, v any) []byte {
	t.Helper()
	code, data := f.do(t, method, path, token, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, code, data)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	return data
}

func TestEndpoints(t *testing.T) {
	f := newFixture(t, serve.Options{})
	for _, mode := range []string{"", "bm25", "dense", "hybrid"} {
		var out serve.SearchOutput
		req := map[string]any{"query": "lentil soup", "k": 5, "explain": true}
		if mode != "" {
			req["mode"] = mode
		}
		f.get(t, "POST", "/v1/search", restrictedToken, req, &out)
		if len(out.Hits) == 0 || out.Mode == "" {
			t.Fatalf("mode %q: %+v", mode, out)
		}
		h := out.Hits[0]
		if len(h.BlockID) != index.BlockIDLen || h.Source == "" || h.Body == "" || h.ByteEnd <= h.ByteStart || h.Explain == nil || h.HeadingPath == nil {
			t.Errorf("mode %q: hit lacks fields: %+v", mode, h)
		}
	}
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", "", map[string]any{"query": "lentil", "fusion": "convex", "alpha": 0.3, "depth": 50, "language": "en", "conjunctive": true, "mode": "hybrid"}, &out)
	if len(out.Hits) == 0 {
		t.Fatal("hybrid convex: no hits")
	}
	soup := out.Hits[0]

	var exp index.Expansion
	f.get(t, "GET", fmt.Sprintf("/v1/blocks/%s/expand?before=1&after=1&max_bytes=4096", soup.BlockID), "", nil, &exp)
	if exp.Block.BlockID != soup.BlockID || exp.Block.Body != soup.Body {
		t.Errorf("expand: %+v", exp)
	}

	var docs serve.DocumentsOutput
	f.get(t, "GET", "/v1/documents", restrictedToken, nil, &docs)
	if len(docs.Documents) != 4 {
		t.Errorf("restricted caller sees %d documents, want 4: %+v", len(docs.Documents), docs)
	}
	var text serve.DocumentOutput
	f.get(t, "GET", "/v1/documents/"+soup.DocID+"/text", "", nil, &text)
	if text.Source != "/docs/soup.md" || text.Text[soup.ByteStart:soup.ByteEnd] != soup.Body {
		t.Errorf("text: %+v", text)
	}
	var st serve.StatusOutput
	f.get(t, "GET", "/v1/status", restrictedToken, nil, &st)
	if st.Documents != 4 || st.Failed != 1 || len(st.FailedDocuments) != 1 || st.Clearance != "restricted" {
		t.Errorf("status: %+v", st)
	}
	// A public caller's counts are those of what it may see: how many
	// documents lie above its clearance is not its business.
	var pub serve.StatusOutput
	f.get(t, "GET", "/v1/status", "", nil, &pub)
	if pub.Documents != 1 || pub.Failed != 0 || len(pub.FailedDocuments) != 0 || pub.Extractors["markdown/2"] != 1 || pub.FileBytes != 0 {
		t.Errorf("public status counts what it may not see: documents %d, failed %d, extractors %v, file bytes %d",
			pub.Documents, pub.Failed, pub.Extractors, pub.FileBytes)
	}
	f.get(t, "GET", "/healthz", "", nil, nil)
	f.get(t, "GET", "/readyz", "", nil, nil)
	metrics := string(f.get(t, "GET", "/metrics", "", nil, nil))
	for _, want := range []string{`route="POST /v1/search"`, `mode="dense"`, `escurel_request_duration_seconds_bucket`, `route="GET /v1/blocks/{id}/expand"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if log := f.log.String(); !strings.Contains(log, `"caller":"legal"`) || !strings.Contains(log, `"route":"POST /v1/search"`) || strings.Contains(log, "lentil soup") {
		t.Errorf("access log (names the caller and route, never the query):\n%s", log)
	}
}

// Limits and mistakes answer 4xx problems that name the field.
func TestLimits(t *testing.T) {
	f := newFixture(t, serve.Options{})
	for _, c := range []struct {
		name   string
		method string
		path   string
		token  string
		body   any
		code   int
		want   string
	}{
		{"k", "POST", "/v1/search", "", map[string]any{"query": "x", "k": 1001}, 422, "body.k"},
		{"negative k", "POST", "/v1/search", "", map[string]any{"query": "x", "k": -1}, 422, "body.k"},
		{"query bytes", "POST", "/v1/search", "", map[string]any{"query": strings.Repeat("é", 2100)}, 422, "body.query"},
		{"query chars", "POST", "/v1/search", "", map[string]any{"query": strings.Repeat("a", 4097)}, 422, "body.query"},
		{"no query", "POST", "/v1/search", "", map[string]any{"k": 3}, 422, "query"},
		{"fusion without hybrid", "POST", "/v1/search", "", map[string]any{"query": "x", "mode": "bm25", "fusion": "rrf"}, 422, "body.fusion"},
		{"mode", "POST", "/v1/search", "", map[string]any{"query": "x", "mode": "fuzzy"}, 422, "body.mode"},
		{"language", "POST", "/v1/search", "", map[string]any{"query": "x", "language": "EN!"}, 422, "body.language"},
		{"clearance is no field", "POST", "/v1/search", "", map[string]any{"query": "x", "clearance": "restricted"}, 422, "clearance"},
		{"body", "POST", "/v1/search", "", []byte(`{"query": "` + strings.Repeat("a", 2<<20) + `"}`), 413, "too large"},
		{"max_bytes", "GET", "/v1/blocks/0000000000000001/expand?max_bytes=99999999", "", nil, 422, "query.max_bytes"},
		{"block id", "GET", "/v1/blocks/abc/expand", "", nil, 422, "path.id"},
		{"block id, a number", "GET", "/v1/blocks/294/expand", "", nil, 422, "path.id"},
		{"block id, upper case", "GET", "/v1/blocks/00000000000F4240/expand", "", nil, 422, "path.id"},
		{"missing block", "GET", "/v1/blocks/00000000000f4240/expand", "", nil, 404, "not found"},
		{"missing document", "GET", "/v1/documents/00000000000000000000000000000000/text", "", nil, 404, "not found"},
		{"unknown token", "GET", "/v1/status", "tok-unknown-0123456789", nil, 401, "unknown bearer token"},
		{"unknown token on mcp", "POST", "/mcp", "tok-unknown-0123456789", map[string]any{}, 401, "unknown bearer token"},
		{"unknown route", "GET", "/v1/nothing", "", nil, 404, "no such route"},
		{"wrong method", "DELETE", "/v1/search", "", nil, 405, "method not allowed"},
		{"clearance parameter", "GET", "/v1/status?clearance=restricted", "", nil, 400, "clearance"},
		{"long value cut", "POST", "/v1/search", "", map[string]any{"query": "x", "mode": strings.Repeat("m", 1000)}, 422, "body.mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.do(t, c.method, c.path, c.token, c.body)
			if code != c.code || !strings.Contains(string(body), c.want) {
				t.Errorf("%d %s, want %d naming %q", code, body, c.code, c.want)
			}
			if !json.Valid(body) {
				t.Errorf("not JSON: %s", body)
			}
			if len(body) > 1500 && c.code == 422 {
				t.Errorf("a 422 of %d bytes echoes the value whole", len(body))
			}
		})
	}
}

// Past the request timeout a request fails with 503 and says why.
func TestRequestTimeout(t *testing.T) {
	f := newFixture(t, serve.Options{RequestTimeout: time.Nanosecond})
	code, body := f.do(t, "POST", "/v1/search", "", map[string]any{"query": "lentil"})
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "longer than the server's limit") {
		t.Errorf("%d %s", code, body)
	}
}

// Every route is in the OpenAPI document, and every operation of the
// document is served.
func TestOpenAPI(t *testing.T) {
	f := newFixture(t, serve.Options{})
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	f.get(t, "GET", "/v1/openapi.json", "", nil, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	routes := map[string]string{ // "METHOD path" → a request path
		"POST /v1/search":                 "/v1/search",
		"GET /v1/blocks/{id}/expand":      "/v1/blocks/0000000000000001/expand",
		"GET /v1/documents":               "/v1/documents",
		"GET /v1/documents/{doc_id}/text": "/v1/documents/x/text",
		"GET /v1/documents/{doc_id}":      "/v1/documents/x",
		"GET /v1/status":                  "/v1/status",
		"GET /v1/verify":                  "/v1/verify",
		"POST /v1/ingest":                 "/v1/ingest",
		"POST /v1/delete":                 "/v1/delete",
		"POST /v1/rebuild":                "/v1/rebuild",
		"POST /v1/reembed":                "/v1/reembed",
		"POST /v1/rollback":               "/v1/rollback",
		"POST /v1/compact":                "/v1/compact",
		"GET /v1/jobs":                    "/v1/jobs",
		"GET /v1/jobs/{id}":               "/v1/jobs/x",
	}
	seen := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			key := strings.ToUpper(method) + " " + path
			req, ok := routes[key]
			if !ok {
				t.Errorf("the document has %s, which the test does not know", key)
				continue
			}
			seen++
			code, body := f.do(t, strings.ToUpper(method), req, "", map[string]any{"query": "lentil"})
			if code == http.StatusNotFound && !strings.Contains(string(body), "not within your clearance") || code == http.StatusMethodNotAllowed {
				t.Errorf("%s: %d %s", key, code, body)
			}
		}
	}
	if seen != len(routes) {
		t.Errorf("the document has %d of the %d routes: %v", seen, len(routes), doc.Paths)
	}
	if f.srv.OpenAPI().Components.SecuritySchemes["bearer"] == nil {
		t.Error("no bearer security scheme")
	}
}

// Serve answers on a listener until its context ends, then drains and
// returns nil; /readyz is 200 while it runs.
func TestServeShutdown(t *testing.T) {
	ix, err := index.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ix, &serve.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("readyz %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("still answering after shutdown")
	}
}

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Serve prewarms the index's posting cache as it starts and logs it.
func TestServePrewarms(t *testing.T) {
	ctx := context.Background()
	ix, err := index.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Ingest(ctx, index.Input{Source: "/a.md", Data: []byte("# Soup\n\nlentil soup with cumin\n")}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	srv, err := serve.New(ix, &serve.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { cancel(); <-done }()
	re := regexp.MustCompile(`msg="posting cache prewarmed" terms=([0-9]+)`)
	for deadline := time.Now().Add(15 * time.Second); ; {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			if m[1] == "0" {
				t.Errorf("prewarmed 0 terms: %s", m[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prewarm logged in 15 s:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTokensFile(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"short", `[{"token": "abc", "name": "x"}]`, "shorter than 16"},
		{"no name", `[{"token": "0123456789abcdef"}]`, "no name"},
		{"clearance", `[{"token": "0123456789abcdef", "name": "x", "clearance": "secret"}]`, "clearance"},
		{"twice", `[{"token": "0123456789abcdef", "name": "x"}, {"token": "0123456789abcdef", "name": "y"}]`, "twice"},
		{"unknown field", `[{"token": "0123456789abcdef", "name": "x", "admin": true}]`, "admin"},
		{"not an array", `{"token": "0123456789abcdef"}`, "JSON array"},
	} {
		if _, err := serve.ParseTokens([]byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(path, []byte(`[{"token": "0123456789abcdef", "name": "bot", "write": true}]`), 0o600)
	tok, err := serve.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := tok.Lookup("0123456789abcdef"); !ok || c != (serve.Caller{Name: "bot", Clearance: "public", Write: true}) {
		t.Errorf("lookup: %+v %v", c, ok)
	}
	if _, ok := tok.Lookup("0123456789abcdeF"); ok {
		t.Error("a near miss is known")
	}
}

// mcpSession connects the go-sdk client to the server's /mcp with token.
func (f *fixture) mcpSession(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{token: token}}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// callTool calls a tool and decodes its structured result into v; it
// returns the result's text, and whether it was a tool error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, v any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !res.IsError && v != nil {
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return text.String(), res.IsError
}

// The go-sdk client calls every tool over streamable HTTP.
func TestMCPHTTP(t *testing.T) {
	f := newFixture(t, serve.Options{})
	cs := f.mcpSession(t, internalToken)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
			t.Errorf("%s is not annotated read-only", tl.Name)
		}
	}
	if got := strings.Join(names, " "); got != "expand get_document list_documents search status" {
		t.Errorf("tools %s", got)
	}
	var out serve.SearchOutput
	callTool(t, cs, "search", map[string]any{"query": "lentil budget", "k": 3, "mode": "bm25"}, &out)
	if len(out.Hits) == 0 || out.Hits[0].Source != "/docs/budget.md" {
		t.Fatalf("search: %+v", out)
	}
	var exp index.Expansion
	callTool(t, cs, "expand", map[string]any{"block_id": out.Hits[0].BlockID}, &exp)
	if exp.Block.Body != out.Hits[0].Body {
		t.Errorf("expand: %+v", exp)
	}
	var doc serve.DocumentOutput
	callTool(t, cs, "get_document", map[string]any{"doc_id": out.Hits[0].DocID}, &doc)
	if !strings.Contains(doc.Text, "internal") || doc.Source != "/docs/budget.md" {
		t.Errorf("get_document: %+v", doc)
	}
	var docs serve.DocumentsOutput
	callTool(t, cs, "list_documents", nil, &docs)
	if len(docs.Documents) != 2 {
		t.Errorf("list_documents at internal: %+v", docs)
	}
	var st serve.StatusOutput
	callTool(t, cs, "status", nil, &st)
	if st.Clearance != "internal" || len(st.FailedDocuments) != 0 {
		t.Errorf("status: %+v", st)
	}
	if text, isErr := callTool(t, cs, "search", map[string]any{"query": "x", "k": 5000}, nil); !isErr || !strings.Contains(text, "k") {
		t.Errorf("k 5000: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "expand", map[string]any{"block_id": "00000000000f4240"}, nil); !isErr || !strings.Contains(text, "not found") {
		t.Errorf("missing block: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "expand", map[string]any{"block_id": "294"}, nil); !isErr || !strings.Contains(text, "invalid argument block_id") {
		t.Errorf("malformed block id: %v %s", isErr, text)
	}
	metrics := string(f.get(t, "GET", "/metrics", "", nil, nil))
	if !strings.Contains(metrics, `route="mcp/search"`) || !strings.Contains(metrics, `route="/mcp"`) {
		t.Errorf("/metrics lacks the MCP calls")
	}
}

// A public or internal caller cannot obtain a restricted block's body,
// title, source or failure reason through any endpoint or tool, in any
// search mode, even when it asks for the secret or names the block.
func TestNoLeak(t *testing.T) {
	f := newFixture(t, serve.Options{})
	// What a restricted caller can see, to aim at.
	var all serve.SearchOutput
	f.get(t, "POST", "/v1/search", restrictedToken, map[string]any{"query": "lentil " + secret, "k": 100, "mode": "bm25"}, &all)
	var secretBlocks []string
	var secretDoc string
	for _, h := range all.Hits {
		if strings.Contains(h.Source, secret) {
			secretBlocks = append(secretBlocks, h.BlockID)
			secretDoc = h.DocID
		}
	}
	if len(secretBlocks) == 0 {
		t.Fatal("the restricted caller finds no restricted block")
	}
	var docs serve.DocumentsOutput
	f.get(t, "GET", "/v1/documents", restrictedToken, nil, &docs)
	var failedDoc string
	for _, d := range docs.Documents {
		if d.Status == "failed" {
			failedDoc = d.DocID
		}
	}
	if failedDoc == "" {
		t.Fatal("no failed document")
	}

	for _, token := range []string{"", internalToken} {
		check := func(what string, body []byte) {
			t.Helper()
			if strings.Contains(string(body), secret) {
				t.Errorf("token %q: %s shows %s:\n%s", token, what, secret, body)
			}
		}
		for _, mode := range []string{"bm25", "dense", "hybrid"} {
			for _, fusion := range []string{"rrf", "convex"} {
				for _, q := range []string{"lentil", secret, "memo takeover plans"} {
					req := map[string]any{"query": q, "k": 1000, "mode": mode, "explain": true}
					if mode == "hybrid" {
						req["fusion"], req["depth"] = fusion, 1000
					}
					code, body := f.do(t, "POST", "/v1/search", token, req)
					check("search "+mode, body)
					if code != http.StatusOK {
						t.Errorf("search %v: %d %s", req, code, body)
					}
				}
			}
		}
		for _, id := range secretBlocks {
			code, body := f.do(t, "GET", fmt.Sprintf("/v1/blocks/%s/expand?max_bytes=1048576", id), token, nil)
			check("expand", body)
			if code != http.StatusNotFound {
				t.Errorf("expand restricted block: %d", code)
			}
		}
		for _, doc := range []string{secretDoc, failedDoc} {
			code, body := f.do(t, "GET", "/v1/documents/"+doc+"/text", token, nil)
			check("text", body)
			if code != http.StatusNotFound {
				t.Errorf("text of a restricted document: %d", code)
			}
		}
		_, body := f.do(t, "GET", "/v1/documents", token, nil)
		check("documents", body)
		_, body = f.do(t, "GET", "/v1/status", token, nil)
		check("status", body)

		cs := f.mcpSession(t, token)
		for _, mode := range []string{"bm25", "dense", "hybrid"} {
			text, _ := callTool(t, cs, "search", map[string]any{"query": "lentil " + secret, "k": 1000, "mode": mode, "explain": true}, nil)
			check("mcp search "+mode, []byte(text))
		}
		for _, id := range secretBlocks {
			text, isErr := callTool(t, cs, "expand", map[string]any{"block_id": id, "max_bytes": 1 << 20}, nil)
			check("mcp expand", []byte(text))
			if !isErr {
				t.Error("mcp expand of a restricted block succeeded")
			}
		}
		for _, doc := range []string{secretDoc, failedDoc} {
			text, _ := callTool(t, cs, "get_document", map[string]any{"doc_id": doc}, nil)
			check("mcp get_document", []byte(text))
		}
		text, _ := callTool(t, cs, "list_documents", nil, nil)
		check("mcp list_documents", []byte(text))
		text, _ = callTool(t, cs, "status", nil, nil)
		check("mcp status", []byte(text))
		// A clearance argument is refused, not obeyed.
		text, isErr := callTool(t, cs, "search", map[string]any{"query": secret, "clearance": "restricted"}, nil)
		check("mcp search with a clearance argument", []byte(text))
		if !isErr {
			t.Errorf("a clearance argument is accepted: %s", text)
		}
	}
	check := f.log.String()
	if strings.Contains(check, secret) {
		t.Errorf("the access log shows %s:\n%s", secret, check)
	}
}

// The document list pages by cursor, narrows by prefix and status, counts
// what lies above the caller's clearance whatever the prefix, and names
// the field it refuses; verify answers restricted callers only.
func TestDocumentsAndVerify(t *testing.T) {
	f := newFixture(t, serve.Options{})
	var all serve.DocumentsOutput
	f.get(t, "GET", "/v1/documents", restrictedToken, nil, &all)
	if len(all.Documents) != 4 || all.Next != "" {
		t.Fatalf("restricted, one page: %+v", all)
	}
	var got []index.DocumentInfo
	after := ""
	for pages := 0; pages < 10; pages++ {
		var page serve.DocumentsOutput
		f.get(t, "GET", "/v1/documents?limit=1&after="+url.QueryEscape(after), restrictedToken, nil, &page)
		got = append(got, page.Documents...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(got) != 4 {
		t.Fatalf("pages of one: %d documents, want 4", len(got))
	}
	for i := range got {
		if got[i].DocID != all.Documents[i].DocID {
			t.Errorf("page %d: %s, want %s", i, got[i].Source, all.Documents[i].Source)
		}
	}
	var pub serve.DocumentsOutput
	f.get(t, "GET", "/v1/documents?source_prefix=/docs/"+secret, "", nil, &pub)
	if len(pub.Documents) != 0 {
		t.Errorf("public, prefix of the restricted sources: %+v", pub)
	}
	// Nothing in an answer below restricted counts what lies above it.
	for _, path := range []string{"/v1/documents", "/v1/status"} {
		_, body := f.do(t, "GET", path, "", nil)
		if strings.Contains(string(body), "withheld") {
			t.Errorf("%s tells a public caller how much it may not see: %s", path, body)
		}
	}
	var failed serve.DocumentsOutput
	f.get(t, "GET", "/v1/documents?status=failed", restrictedToken, nil, &failed)
	if len(failed.Documents) != 1 || failed.Documents[0].Reason == "" {
		t.Errorf("failed, restricted: %+v", failed)
	}
	for _, q := range []string{"limit=5000", "status=gone"} {
		code, body := f.do(t, "GET", "/v1/documents?"+q, "", nil)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), strings.SplitN(q, "=", 2)[0]) {
			t.Errorf("%s: %d %s", q, code, body)
		}
	}

	// One record: within the clearance, or 404 as a missing one.
	var rec index.DocumentInfo
	f.get(t, "GET", "/v1/documents/"+all.Documents[0].DocID, restrictedToken, nil, &rec)
	if rec != all.Documents[0] {
		t.Errorf("record: %+v, want %+v", rec, all.Documents[0])
	}
	for _, d := range all.Documents {
		if d.Sensitivity == index.Public {
			continue
		}
		code, body := f.do(t, "GET", "/v1/documents/"+d.DocID, "", nil)
		if code != http.StatusNotFound || strings.Contains(string(body), secret) {
			t.Errorf("record of a %s document at public: %d %s", d.Sensitivity, code, body)
		}
	}
	var v index.Verification
	f.get(t, "GET", "/v1/verify", restrictedToken, nil, &v)
	if v.Digest == "" || v.Documents != 4 {
		t.Errorf("verify: %+v", v)
	}
	for _, token := range []string{"", internalToken} {
		code, body := f.do(t, "GET", "/v1/verify", token, nil)
		if code != http.StatusForbidden || strings.Contains(string(body), secret) {
			t.Errorf("verify with %q: %d %s, want 403", token, code, body)
		}
	}
}

// A search may ask for the server's reranker, never name one; a server
// without one refuses the field, and a reranker that is down answers 503
// saying the search without it works.
func TestServeRerank(t *testing.T) {
	ms := modelserver.Start(t)
	rr, err := rerank.NewHTTP(ms.URL+"/rerank", rerank.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, serve.Options{Reranker: rr})
	var out serve.SearchOutput
	f.get(t, "POST", "/v1/search", "", map[string]any{"query": "lentil soup", "mode": "bm25", "rerank": true, "explain": true}, &out)
	if len(out.Hits) == 0 || out.Hits[0].Explain == nil || out.Hits[0].Explain.Rerank == nil {
		t.Fatalf("reranked search: %+v", out)
	}
	for _, r := range ms.Requests() {
		if strings.Contains(strings.Join(r.Passages, " "), secret) {
			t.Errorf("the reranker saw restricted text for a public caller: %v", r.Passages)
		}
	}
	if code, body := f.do(t, "POST", "/v1/search", "", map[string]any{"query": "lentil", "rerank_url": "http://evil"}); code != http.StatusUnprocessableEntity {
		t.Errorf("a reranker URL in the request: %d %s, want 422", code, body)
	}
	ms.Close()
	code, body := f.do(t, "POST", "/v1/search", "", map[string]any{"query": "lentil", "mode": "bm25", "rerank": true})
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "without") {
		t.Errorf("reranker down: %d %s", code, body)
	}
	g := newFixture(t, serve.Options{})
	code, body = g.do(t, "POST", "/v1/search", "", map[string]any{"query": "lentil", "rerank": true})
	if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "rerank") {
		t.Errorf("no reranker: %d %s", code, body)
	}
}
