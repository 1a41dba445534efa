package embed_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/modelserver"
)

func remote(t *testing.T, spec string) embed.Embedder {
	t.Helper()
	s, err := embed.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	e, err := embed.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "text number " + strings.Repeat("x", i%7) + " " + string(rune('a'+i%26))
	}
	return out
}

// Both protocols batch, keep the order and return the server's vectors
// (those of the hash embedder it runs).
func TestRemoteProtocols(t *testing.T) {
	srv := modelserver.Start(t)
	ctx := context.Background()
	want, _ := embed.NewHash(384).Embed(ctx, texts(10))
	for _, spec := range []string{
		"openai:m?dim=384&batch=4&url=" + srv.URL + "/v1",
		"ollama:m?dim=384&batch=4&url=" + srv.URL,
	} {
		before := len(srv.Requests())
		got, err := remote(t, spec).Embed(ctx, texts(10))
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if len(got) != 10 {
			t.Fatalf("%s: %d vectors", spec, len(got))
		}
		for i := range got {
			for j := range got[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("%s: vector %d differs from the hash embedder's", spec, i)
				}
			}
		}
		var sizes []int
		for _, r := range srv.Requests()[before:] {
			sizes = append(sizes, r.Inputs)
		}
		if len(sizes) != 3 || sizes[0] != 4 || sizes[1] != 4 || sizes[2] != 2 {
			t.Errorf("%s: batch sizes %v, want [4 4 2]", spec, sizes)
		}
	}
}

func TestRemoteRetries429HonouringRetryAfter(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Fail429, s.RetryAfter = 2, "1" })
	e := remote(t, "openai:m?url="+srv.URL+"/v1")
	start := time.Now()
	vs, err := e.Embed(context.Background(), texts(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || len(vs[0]) != 384 {
		t.Fatalf("got %d vectors", len(vs))
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("two Retry-After: 1 answers, but done in %v", el)
	}
	var st []int
	for _, r := range srv.Requests() {
		st = append(st, r.Status)
	}
	if len(st) != 3 || st[0] != 429 || st[1] != 429 || st[2] != 200 {
		t.Errorf("statuses %v, want [429 429 200]", st)
	}

	// A 500 is retried too; a server that keeps failing gives up after
	// the configured retries, naming the status.
	srv.Set(func(s *modelserver.Server) { s.Fail500 = 10 })
	_, err = remote(t, "ollama:m?retries=2&url="+srv.URL).Embed(context.Background(), texts(1))
	var se *embed.StatusError
	if !errors.As(err, &se) || se.Status != 500 || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("err = %v, want a 500 after 3 attempts", err)
	}
}

func TestRemoteTimeout(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Hang = true })
	start := time.Now()
	_, err := remote(t, "openai:m?timeout=200ms&retries=1&url="+srv.URL+"/v1").Embed(context.Background(), texts(1))
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("gave up after %v", el)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	// The caller's context bounds the whole.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := remote(t, "openai:m?url="+srv.URL+"/v1").Embed(ctx, texts(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's deadline", err)
	}
}

func TestRemoteWrongDimension(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 768 })
	_, err := remote(t, "openai:m?dim=384&url="+srv.URL+"/v1").Embed(context.Background(), texts(2))
	if err == nil || !strings.Contains(err.Error(), "768-dimensional vector, want 384") || !strings.Contains(err.Error(), "dim=768") {
		t.Fatalf("err = %v", err)
	}
	// dimensions=N asks the server for N.
	vs, err := remote(t, "openai:m?dimensions=64&url="+srv.URL+"/v1").Embed(context.Background(), texts(2))
	if err != nil || len(vs[0]) != 64 {
		t.Fatalf("dimensions=64: %v", err)
	}
	// Without a dim, Probe asks the server.
	d, err := embed.Probe(context.Background(), remote(t, "ollama:m?url="+srv.URL))
	if err != nil || d != 768 {
		t.Errorf("Probe = %d, %v", d, err)
	}
}

// Garbage a server may send: a null component, an all-zero vector.
func TestRemoteRejectsNullAndZero(t *testing.T) {
	for _, body := range []string{`{"embeddings":[[null,1]]}`, `{"embeddings":[[0,0]]}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		_, err := remote(t, "ollama:m?retries=-1&url="+srv.URL).Embed(context.Background(), texts(1))
		srv.Close()
		if err == nil || !(strings.Contains(err.Error(), "null") || strings.Contains(err.Error(), "all-zero")) {
			t.Errorf("%s: err = %v", body, err)
		}
	}
}

func TestRemoteAPIKey(t *testing.T) {
	srv := modelserver.Start(t)
	t.Setenv("OPENAI_API_KEY", "sk-default")
	t.Setenv("MY_KEY", "sk-mine")
	ctx := context.Background()
	if _, err := remote(t, "openai:m?url="+srv.URL+"/v1").Embed(ctx, texts(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := remote(t, "openai:m?key_env=MY_KEY&url="+srv.URL+"/v1").Embed(ctx, texts(1)); err != nil {
		t.Fatal(err)
	}
	rs := srv.Requests()
	if rs[0].Authorization != "Bearer sk-default" || rs[1].Authorization != "Bearer sk-mine" {
		t.Errorf("Authorization headers %q, %q", rs[0].Authorization, rs[1].Authorization)
	}
	spec, _ := embed.ParseSpec("openai:m?key_env=UNSET_KEY_FOR_TEST")
	if _, err := embed.New(spec); err == nil || !strings.Contains(err.Error(), "UNSET_KEY_FOR_TEST") {
		t.Errorf("an explicit key_env that is empty: err = %v", err)
	}
	// A 4xx other than 429 is final.
	_, err := remote(t, "openai:m?url="+srv.URL+"/nothing").Embed(ctx, texts(1))
	var se *embed.StatusError
	if !errors.As(err, &se) || se.Status != 404 || strings.Contains(err.Error(), "attempts") {
		t.Errorf("err = %v, want a 404 at the first attempt", err)
	}
}
