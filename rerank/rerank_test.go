package rerank

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestOrder(t *testing.T) {
	for _, c := range []struct {
		n       int
		results []Result
		want    []int
	}{
		{3, []Result{{2, 0.9}, {0, 0.1}, {1, 0.5}}, []int{2, 1, 0}},
		{4, []Result{{3, 0.2}}, []int{3, 0, 1, 2}},        // left out: after, in order
		{3, []Result{{1, 0.5}, {0, 0.5}}, []int{0, 1, 2}}, // ties: original order
		{2, nil, []int{0, 1}},
	} {
		got, err := Order(c.n, c.results)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Order(%d, %v) = %v, %v; want %v", c.n, c.results, got, err, c.want)
		}
	}
	for _, bad := range [][]Result{{{3, 1}}, {{-1, 1}}, {{0, 1}, {0, 2}}} {
		if _, err := Order(3, bad); err == nil {
			t.Errorf("Order(3, %v) accepted", bad)
		}
	}
}

func TestAnswerShapes(t *testing.T) {
	for in, want := range map[string][]Result{
		`[{"index":1,"score":0.5},{"index":0,"score":0.25}]`:           {{1, 0.5}, {0, 0.25}},
		`{"results":[{"index":0,"relevance_score":0.75}],"model":"x"}`: {{0, 0.75}},
		` [ ] `: nil,
	} {
		var a answer
		if err := json.Unmarshal([]byte(in), &a); err != nil || !slices.Equal(a.results, want) {
			t.Errorf("%s: %v, %v", in, a.results, err)
		}
	}
	var a answer
	if err := json.Unmarshal([]byte(`[{"index":0}]`), &a); err == nil {
		t.Error("a result without a score was accepted")
	}
	for _, in := range []string{`{}`, `{"data":[{"index":0,"embedding":[1]}]}`, `null`} {
		var a answer
		if err := json.Unmarshal([]byte(in), &a); err == nil && len(a.results) > 0 {
			t.Errorf("%s gave results %v", in, a.results)
		} else if err == nil && in != "null" {
			t.Errorf("%s accepted as an answer", in)
		}
	}
	if _, err := NewHTTP("localhost:8080/rerank", Options{}); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}

// The built-in "http" provider is NewHTTP by name; other names are not
// linked; a name registers once.
func TestRegistry(t *testing.T) {
	r, err := New("http", Options{URL: "http://127.0.0.1:1/v1/rerank", Model: "m"})
	if h, ok := r.(*HTTP); err != nil || !ok || !h.cohere || h.model != "m" {
		t.Fatalf("New(http) = %#v, %v", r, err)
	}
	if r, err := New("http", Options{URL: "ftp://x"}); r != nil || err == nil {
		t.Errorf("New(http, ftp://x) = %v, %v", r, err)
	}
	if _, err := New("cohere", Options{}); !errors.Is(err, ErrNotLinked) || !strings.Contains(err.Error(), "http") {
		t.Errorf("New(cohere) = %v; want ErrNotLinked listing http", err)
	}
	if got := Providers(); !slices.Equal(got, []string{"http"}) {
		t.Errorf("Providers() = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Register of http did not panic")
		}
	}()
	Register("http", ProviderFunc(func(Options) (Reranker, error) { return nil, nil }))
}
