package embed

import (
	"context"
	"hash/fnv"
	"math"
	"slices"
	"testing"
	"time"
)

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]Spec{
		"none": None, "hash": {Model: "hash", Dim: 384}, "hash/64": {Model: "hash", Dim: 64}, " hash/384 ": Default,
		"hash?query_prefix=query%3A+":   {Model: "hash", Dim: 384, QueryPrefix: "query: "},
		"hash?query_prefix=query: ":     {Model: "hash", Dim: 384, QueryPrefix: "query: "}, // a trailing space is the prefix's
		"openai:text-embedding-3-small": {Model: "openai:text-embedding-3-small"},
		"openai:BAAI/bge-small-en-v1.5?dim=384&url=http://127.0.0.1:8080/v1/&batch=8&timeout=2s&retries=-1&key_env=K": {
			Model: "openai:BAAI/bge-small-en-v1.5", Dim: 384, URL: "http://127.0.0.1:8080/v1", Batch: 8, Timeout: 2e9, Retries: -1, KeyEnv: "K"},
		"openai:text-embedding-3-large?dimensions=256": {Model: "openai:text-embedding-3-large", Dim: 256, Dimensions: true},
		"ollama:nomic-embed-text?query_prefix=search_query%3A+&document_prefix=search_document%3A+": {
			Model: "ollama:nomic-embed-text", QueryPrefix: "search_query: ", DocumentPrefix: "search_document: "},
	} {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "openai", "openai:", "hash/0", "hash/x", "hash/", "none/3", "none?dim=3", "hash/99999999",
		"cohere:x", "hash?url=http://x", "hash?dim=3", "openai:m?dim=0", "openai:m?url=ftp://x", "openai:m?timeout=-1s",
		"openai:m?batch=0", "openai:m?color=red", "openai:m?dim=3&dim=4", "openai:m?dim=3&dimensions=4", "ollama:m?dimensions=3"} {
		if _, err := ParseSpec(in); err == nil {
			t.Errorf("ParseSpec(%q) succeeded", in)
		}
	}
	// String is what ParseSpec reads back.
	for _, in := range []string{"none", "hash/384", "hash/64?document_prefix=passage%3A+&query_prefix=query%3A+",
		"openai:BAAI/bge-small-en-v1.5?batch=8&dim=384&key_env=K&retries=-1&timeout=2s&url=http%3A%2F%2F127.0.0.1%3A8080%2Fv1",
		"openai:text-embedding-3-large?dimensions=256", "ollama:all-minilm"} {
		spec, err := ParseSpec(in)
		if err != nil || spec.String() != in {
			t.Errorf("ParseSpec(%q).String() = %q, %v", in, spec.String(), err)
		}
	}
	if None.String() != "none" || Default.String() != "hash/384" {
		t.Errorf("String: %q %q", None, Default)
	}
}

func TestHash(t *testing.T) {
	e, err := New(Spec{Model: "hash", Dim: 64})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"Path Parameters with types", "path parameters WITH types", "", "other words entirely"})
	if err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, x := range vs[0] {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-6 {
		t.Errorf("norm² = %v, want 1", norm)
	}
	dot := func(a, b []float32) (s float64) {
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return
	}
	if d := dot(vs[0], vs[1]); math.Abs(d-1) > 1e-6 {
		t.Errorf("case must not matter: cos = %v", d)
	}
	if d := dot(vs[0], vs[3]); d > 0.5 {
		t.Errorf("unrelated texts too similar: cos = %v", d)
	}
	for _, x := range vs[2] {
		if x != 0 {
			t.Fatal("empty text must give the zero vector")
		}
	}
	// Pinned values: the same text gives the same bits everywhere.
	v := NewHash(8).vector("escurel indexes documents")
	want := []float32{0.12803689, -0.25607377, -0.12803689, -0.12803689, -0.51214755, 0.12803689, -0.12803689, -0.76822126}
	for i := range want {
		if v[i] != want[i] {
			t.Fatalf("vector = %v, want %v", v, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"x"}); err == nil {
		t.Error("Embed ignored a cancelled context")
	}
	if e, err := New(None); e != nil || err != nil {
		t.Errorf("New(None) = %v, %v", e, err)
	}
}

func TestFNV1a(t *testing.T) {
	for _, s := range []string{"", "a", "u\x00escurel", "c\x00<in"} {
		f := fnv.New64a()
		f.Write([]byte(s))
		if fnv1a(s) != f.Sum64() {
			t.Errorf("fnv1a(%q) differs from hash/fnv", s)
		}
	}
}

// The analyzer's stems and stop words: inflections meet, stop words do
// not count.
func TestHashUsesAnalyzer(t *testing.T) {
	h := NewHash(384)
	a, b := h.vector("running the indexes"), h.vector("indexes ran runs running")
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	if dot < 0.5 {
		t.Errorf("cos(running the indexes, indexes ran runs running) = %.2f, want ≥ 0.5", dot)
	}
	if v := h.vector("the of and"); slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
		t.Error("stop words alone gave a non-zero vector")
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "0": time.Millisecond, "x": 0, "100000": time.Minute,
		"Sun, 29 Nov 2026 12:00:05 GMT": 5 * time.Second, "Sun, 29 Nov 2026 11:00:00 GMT": time.Millisecond,
	} {
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}
