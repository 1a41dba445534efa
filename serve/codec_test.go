package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/escurel/escurel/index"
)

// stdEncode is what huma's default format writes: encoding/json's
// Encoder with HTML characters unescaped.
func stdEncode(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestJSONEncodeMatchesStd: jsonEncode writes the bytes encoding/json
// writes, for the values the server answers with and the corners where
// JSON encoders differ (invalid UTF-8, U+2028, HTML and control
// characters, float formats, map order, Marshaler types, nil slices).
// One difference is known and left out: a Marshaler's output is written
// as it comes, where encoding/json compacts it; the server's Marshalers
// (index.MetaJSON, blobstore.Meta) write compact JSON.
func TestJSONEncodeMatchesStd(t *testing.T) {
	tricky := "a <b> & \"c\" \\ \x00\x1f\x7f é 😀 \u2028\u2029 bad:\xff\xfe\xc3 end"
	hit := index.Hit{
		BlockID: "0123456789abcdef", DocID: "d", Source: "/docs/" + tricky, Title: tricky, Body: tricky,
		Context: "[" + tricky + "]", HeadingPath: []string{"A", tricky}, Page: 3, ByteStart: 1 << 40, ByteEnd: 1<<53 + 1,
		Score:      0.1 + 0.2,
		Explain:    &index.Explain{},
		PromptText: tricky,
		Meta:       map[string]any{"z": 1.0, "a": []any{"x", true, nil}, "m": map[string]any{"k2": 1e21, "k1": 1e-7}, tricky: -0.0},
	}
	values := map[string]any{
		"search":   &SearchOutput{Mode: index.ModeHybrid, Hits: []index.Hit{hit, {HeadingPath: []string{}}}},
		"empty":    &SearchOutput{Mode: index.ModeBM25, Hits: []index.Hit{}},
		"floats":   []float64{0, 1, -1, 0.1, 1e20, 1e21, 1e-6, 1e-7, 123456789.123456789, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, float64(float32(0.1))},
		"float32":  []float32{0.1, 1e21, 1e-7, 3.4e38},
		"ints":     []any{int64(math.MinInt64), uint64(math.MaxUint64), int8(-8)},
		"status":   &StatusOutput{Generation: "gen-000001", Extractors: map[string]int64{"md": 2, "html": 1}},
		"problem":  huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Location: "body.k", Message: "want 0 to 1000", Value: tricky}),
		"document": &index.DocumentInfo{DocID: "d", Source: tricky, Meta: index.MetaJSON(`{"a":"<x>","b":[1,2.5]}`)},
		"raw":      map[string]any{"r": json.RawMessage(`{"b":[1,"<é>"]}`), "t": time.Date(2026, 12, 1, 18, 0, 0, 5, time.UTC), "nil": []string(nil), "p": (*index.Hit)(nil)},
	}
	for name, v := range values {
		var b bytes.Buffer
		if err := jsonEncode(&b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := stdEncode(t, v); b.String() != want {
			t.Errorf("%s:\n got %s\nwant %s", name, b.String(), want)
		}
	}
	// What encoding/json refuses, jsonEncode refuses too.
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"f": func() {}}, json.RawMessage(`{"b":`)} {
		if err := jsonEncode(io.Discard, v); err == nil {
			t.Errorf("%v: want an error", v)
		}
	}
}

// TestSearchAnswerEncoding: the server's search answer is, byte for byte,
// encoding/json's encoding of the in-process search's hits, and its
// Server-Timing header says how long the index took.
func TestSearchAnswerEncoding(t *testing.T) {
	ctx := context.Background()
	ix, err := index.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, in := range []index.Input{
		{Source: "/docs/a&b.md", Data: []byte("---\ntags: [\"<x>\", \"é\"]\nversion: 2\nzeta: true\nalpha: 0.1\n---\n# Lentil <soup> & bread\n\nLentil soup \u2028 with \"quotes\", a <b>tag</b> and 😀.\n")},
		{Source: "/docs/plain.txt", Data: []byte("Lentil stew, plain text.\n")},
	} {
		if _, err := ix.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(ix, &Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	start := time.Now()
	resp, err := http.Post(hs.URL+"/v1/search", "application/json", strings.NewReader(`{"query": "lentil", "mode": "bm25", "explain": true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	// Server-Timing: the index's part of the request, in ms.
	var dur float64
	if st := resp.Header.Get("Server-Timing"); !regexp.MustCompile(`^search;dur=[0-9]+\.[0-9]{3}$`).MatchString(st) {
		t.Errorf("Server-Timing %q: want search;dur=MS.mmm", st)
	} else if dur, _ = strconv.ParseFloat(strings.TrimPrefix(st, "search;dur="), 64); dur <= 0 || dur > float64(took.Microseconds())/1000 {
		t.Errorf("Server-Timing %q: want more than 0 and less than the request's %s", st, took)
	}
	hits, err := ix.Search(ctx, "lentil", &index.SearchOptions{Mode: index.ModeBM25, Explain: true, Clearance: index.Public})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].Meta == nil {
		t.Fatalf("want 2 hits, the first with metadata: %+v", hits)
	}
	if want := stdEncode(t, &SearchOutput{Mode: index.ModeBM25, Hits: hits}); string(got) != want {
		t.Errorf("search answer:\n got %s\nwant %s", got, want)
	}
}
