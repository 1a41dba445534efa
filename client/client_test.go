package client_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/escurel/escurel/client"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/serve"

	_ "gocloud.dev/blob/fileblob"
)

const (
	restrictedToken = "restricted-token-0123456789"
	secret          = "zanzibarquartz"
)

// start ingests a public, an internal and a restricted document into a
// fresh index, serves it on 127.0.0.1 with one restricted token, and
// returns the index and the server's base URL.
func start(t *testing.T) (*index.Index, string) {
	t.Helper()
	ctx := context.Background()
	ix, err := index.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	ins := []index.Input{
		{Source: "/docs/soup.md", Sensitivity: index.Public, Meta: map[string]any{"product": "kitchen", "version": 2},
			Data: []byte("# Lentil soup\n\nLentil soup for everyone: lentils, onions, cumin.\n\n## Serving\n\nServe the lentil soup hot, with bread.\n")},
		{Source: "/docs/bread.md", Sensitivity: index.Public, Data: []byte("# Bread\n\nBake the bread for the lentil soup at dawn.\n")},
		{Source: "/docs/budget.md", Sensitivity: index.Internal, Data: []byte("# Kitchen budget\n\nThe lentil budget for the kitchen is internal.\n")},
		{Source: "/docs/" + secret + "-memo.md", Sensitivity: index.Restricted, Data: []byte("# Memo " + secret + "\n\nLentil " + secret + " plans.\n")},
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	tokens, err := serve.ParseTokens([]byte(`[{"token": "` + restrictedToken + `", "name": "ops", "clearance": "restricted"}]`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(ix, &serve.Options{Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ix, "http://" + ln.Addr().String()
}

// asJSON turns v into generic JSON values, so that the server's types and
// the client's compare by what they put on the wire.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestClientAgainstServer(t *testing.T) {
	ix, base := start(t)
	ctx := context.Background()
	public, err := client.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := client.New(base+"/", &client.Options{Token: restrictedToken, HTTPClient: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}

	// Search: the client decodes every field the server wrote, for the
	// caller's clearance only.
	for _, c := range []struct {
		cl        *client.Client
		clearance string
	}{{public, index.Public}, {ops, index.Restricted}} {
		got, err := c.cl.Search(ctx, &client.SearchRequest{Query: "lentil " + secret, K: 10, Mode: client.ModeBM25, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		want, err := ix.Search(ctx, "lentil "+secret, &index.SearchOptions{K: 10, Mode: index.ModeBM25, Explain: true, Clearance: c.clearance})
		if err != nil {
			t.Fatal(err)
		}
		if got.Mode != client.ModeBM25 || len(got.Hits) == 0 {
			t.Fatalf("%s: mode %q, %d hits", c.clearance, got.Mode, len(got.Hits))
		}
		if d := cmp.Diff(asJSON(t, want), asJSON(t, got.Hits)); d != "" {
			t.Errorf("%s: hits differ from the index's (-index +client):\n%s", c.clearance, d)
		}
		leaked := strings.Contains(asString(t, got), secret)
		if leaked != (c.clearance == index.Restricted) {
			t.Errorf("%s: restricted text in the answer: %v", c.clearance, leaked)
		}
	}

	// Meta and Explain arrive typed.
	res, err := public.Search(ctx, &client.SearchRequest{Query: "cumin", Filter: `product = "kitchen"`, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 || res.Hits[0].Meta["product"] != "kitchen" || res.Hits[0].Meta["version"] != float64(2) || res.Hits[0].Explain == nil || res.Hits[0].Explain.BM25 == nil || res.Hits[0].Explain.BM25.Rank != 1 {
		t.Fatalf("filtered search: %+v", res.Hits)
	}
	hit := res.Hits[0]

	// Expand, the document's record and text.
	exp, err := public.Expand(ctx, hit.BlockID, &client.ExpandOptions{Before: -1, After: 1, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	wantExp, err := ix.Expand(ctx, hit.BlockID, &index.ExpandOptions{Before: -1, After: 1, MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(asJSON(t, wantExp), asJSON(t, exp)); d != "" {
		t.Errorf("expand differs (-index +client):\n%s", d)
	}
	info, err := public.Document(ctx, hit.DocID)
	if err != nil {
		t.Fatal(err)
	}
	wantInfo, err := ix.Document(ctx, hit.DocID, index.Public)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(asJSON(t, wantInfo), asJSON(t, info)); d != "" {
		t.Errorf("document differs (-index +client):\n%s", d)
	}
	text, err := public.DocumentText(ctx, hit.DocID)
	if err != nil {
		t.Fatal(err)
	}
	if text.Text[hit.ByteStart:hit.ByteEnd] != hit.Body {
		t.Errorf("text[%d:%d] = %q, body %q", hit.ByteStart, hit.ByteEnd, text.Text[hit.ByteStart:hit.ByteEnd], hit.Body)
	}

	// The document list, a page at a time: public sees its 2 documents.
	var sources []string
	opts := &client.DocumentsOptions{Limit: 1}
	for {
		page, err := public.Documents(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Documents {
			sources = append(sources, d.Source)
		}
		if page.Next == "" {
			break
		}
		opts.After = page.Next
	}
	if d := cmp.Diff([]string{"/docs/bread.md", "/docs/soup.md"}, sources); d != "" {
		t.Errorf("public document list (-want +got):\n%s", d)
	}

	// Status: counts within the caller's clearance.
	st, err := public.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Documents != 2 || st.Clearance != index.Public || st.Generation != ix.Generation() || len(st.Manifest) == 0 {
		t.Errorf("public status: %+v", st)
	}
	st, err = ops.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Documents != 4 || st.Clearance != index.Restricted {
		t.Errorf("restricted status: documents %d, clearance %s", st.Documents, st.Clearance)
	}
}

func asString(t *testing.T, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestClientErrors(t *testing.T) {
	ix, base := start(t)
	ctx := context.Background()
	public, err := client.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}

	// A field out of its limits: 422 naming it.
	_, err = public.Search(ctx, &client.SearchRequest{Query: "lentil", K: 5000})
	var e *client.Error
	if !errorsAs(err, &e) || e.Status != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "k") {
		t.Fatalf("k 5000: %v", err)
	}
	if len(e.Errors) == 0 || !strings.Contains(e.Errors[0].Location, "k") {
		t.Errorf("k 5000: errors %+v, want one at body.k", e.Errors)
	}

	// A restricted document answers 404, as a missing one does.
	hits, err := ix.Search(ctx, secret, &index.SearchOptions{K: 1, Mode: index.ModeBM25, Clearance: index.Restricted})
	if err != nil || len(hits) != 1 {
		t.Fatal(len(hits), err)
	}
	for _, id := range []string{hits[0].DocID, strings.Repeat("0", 32)} {
		_, err := public.Document(ctx, id)
		if client.StatusCode(err) != http.StatusNotFound || strings.Contains(err.Error(), secret) {
			t.Errorf("document %s: %v", id, err)
		}
		_, err = public.DocumentText(ctx, id)
		if client.StatusCode(err) != http.StatusNotFound || strings.Contains(err.Error(), secret) {
			t.Errorf("document text %s: %v", id, err)
		}
	}
	_, err = public.Expand(ctx, hits[0].BlockID, nil)
	if client.StatusCode(err) != http.StatusNotFound || strings.Contains(err.Error(), secret) {
		t.Errorf("expand of a restricted block: %v", err)
	}

	// An unknown token is refused, not taken as public.
	stranger, err := client.New(base, &client.Options{Token: "not-a-token-of-this-server"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Status(ctx); client.StatusCode(err) != http.StatusUnauthorized {
		t.Errorf("unknown token: %v", err)
	}

	// A nil request and bad base URLs fail before sending.
	if _, err := public.Search(ctx, nil); err == nil {
		t.Error("nil search request: no error")
	}
	for _, u := range []string{"", "127.0.0.1:7700", "ftp://host", "http://host/?a=b", "http://"} {
		if _, err := client.New(u, nil); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
	if client.StatusCode(io.EOF) != 0 {
		t.Error("StatusCode of a non-server error is not 0")
	}
}

func errorsAs(err error, target **client.Error) bool {
	e, ok := err.(*client.Error)
	if ok {
		*target = e
	}
	return ok
}

// TestTypesMatchServer checks that every client type has the JSON fields
// of the server type it mirrors, with the same JSON kinds, recursively: a
// field the server adds or renames fails here before a client user
// silently loses it.
func TestTypesMatchServer(t *testing.T) {
	for _, p := range []struct{ client, server any }{
		{client.SearchRequest{}, serve.SearchInput{}},
		{client.SearchResponse{}, serve.SearchOutput{}},
		{client.Hit{}, index.Hit{}},
		{client.Expansion{}, index.Expansion{}},
		{client.DocumentsPage{}, serve.DocumentsOutput{}},
		{client.DocumentInfo{}, index.DocumentInfo{}},
		{client.DocumentText{}, serve.DocumentOutput{}},
		{client.Status{}, serve.StatusOutput{}},
	} {
		c, s := reflect.TypeOf(p.client), reflect.TypeOf(p.server)
		cs := shape(c)
		if d := cmp.Diff(unify(shape(s), cs), cs); d != "" {
			t.Errorf("client.%s against %s (-server +client):\n%s", c.Name(), s, d)
		}
	}
}

var rawMessage = reflect.TypeOf(json.RawMessage{})

// shape is the JSON shape of a Go type: "string", "number", "bool",
// "any", "raw" (a json.RawMessage or a type with its own MarshalJSON:
// any JSON), "[]"+elem, "map:"+elem, or a map of field names (with
// ",omitempty" when so tagged) to their shapes.
func shape(t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || t.Implements(reflect.TypeOf((*json.Marshaler)(nil)).Elem()) && t.Kind() != reflect.Struct {
		return "raw"
	}
	if t == reflect.TypeOf(time.Time{}) {
		return "string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Interface:
		return "any"
	case reflect.Slice:
		return "[]" + toString(shape(t.Elem()))
	case reflect.Map:
		return "map:" + toString(shape(t.Elem()))
	case reflect.Struct:
		fields := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			if strings.Contains(opts, "omitempty") {
				name += ",omitempty"
			}
			fields[name] = shape(f.Type)
		}
		return fields
	}
	return "unknown " + t.String()
}

// unify returns the server's shape with "raw" wherever the client's
// shape is "raw": a client field kept as raw JSON takes any shape.
func unify(server, client any) any {
	if client == "raw" {
		return "raw"
	}
	s, ok1 := server.(map[string]any)
	c, ok2 := client.(map[string]any)
	if !ok1 || !ok2 {
		return server
	}
	out := map[string]any{}
	for k, v := range s {
		out[k] = unify(v, c[k])
	}
	return out
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// TestPureGo checks that the client imports neither the index nor DuckDB:
// a program that only asks a server builds without cgo.
func TestPureGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/escurel/escurel/client").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "duckdb") || strings.HasPrefix(dep, "github.com/escurel/escurel/") && dep != "github.com/escurel/escurel/client" {
			t.Errorf("the client imports %s", dep)
		}
	}
}
