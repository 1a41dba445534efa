// Package modelserver is a model server for tests: a real HTTP server on
// 127.0.0.1 that speaks the protocols escurel's remote embedders and
// reranker use, answering with the hash embedder and a term-overlap
// reranker, so that tests run the real client code over a real socket.
//
// Endpoints:
//
//	POST /v1/embeddings  OpenAI: {"model","input":[...],"dimensions"?} → {"data":[{"index","embedding"}]}
//	POST /api/embed      Ollama: {"model","input":[...]} → {"embeddings":[[...]]}
//	POST /rerank         TEI:    {"query","texts":[...]} → [{"index","score"}]
//	POST /v1/rerank      Cohere/Jina: {"query","documents":[...],"top_n"?} → {"results":[{"index","relevance_score"}]}
package modelserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/escurel/escurel/embed"
)

// Server is a running model server. Set its fields before the requests
// they should affect; they are read under its lock.
type Server struct {
	*httptest.Server

	mu sync.Mutex
	// Dim is the dimension of the hash vectors served (default 384); a
	// request's "dimensions" field overrides it.
	Dim int
	// Fail429 makes the next Fail429 requests answer 429 with RetryAfter
	// as the Retry-After header (none when empty).
	Fail429    int
	RetryAfter string
	// Fail500 makes the next Fail500 requests answer 500.
	Fail500 int
	// Hang makes every request wait until the client gives up.
	Hang bool
	// RerankDrop makes the reranker leave out the last RerankDrop passages.
	RerankDrop int
	// HoldOn, when not empty, makes a request whose input or query
	// contains it wait until Release is closed (or the client gives up):
	// a model call that takes as long as the test wants.
	HoldOn  string
	Release chan struct{}

	requests []Request
}

// Request is what the server saw of one request.
type Request struct {
	Path          string
	Authorization string
	Inputs        int      // texts to embed, or passages to rerank
	Input         []string // the texts to embed
	Status        int      // the status answered
	Query         string
	Passages      []string
}

// Start starts a server on 127.0.0.1; it is closed when the test ends.
func Start(t interface{ Cleanup(func()) }) *Server {
	s := &Server{Dim: embed.DefaultHashDim}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Set runs fn under the server's lock, to change its behaviour.
func (s *Server) Set(fn func(*Server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
		Query      string   `json:"query"`
		Texts      []string `json:"texts"`
		Documents  []string `json:"documents"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	req := Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Inputs: len(in.Input) + len(in.Texts) + len(in.Documents),
		Query: in.Query, Passages: append(in.Texts, in.Documents...), Input: in.Input}
	status := http.StatusOK
	hang, dim, drop := s.Hang, s.Dim, s.RerankDrop
	var hold chan struct{}
	if s.HoldOn != "" && strings.Contains(strings.Join(append(append([]string{in.Query}, in.Input...), req.Passages...), "\n"), s.HoldOn) {
		hold = s.Release
	}
	switch {
	case s.Fail429 > 0:
		s.Fail429--
		status = http.StatusTooManyRequests
		if s.RetryAfter != "" {
			w.Header().Set("Retry-After", s.RetryAfter)
		}
	case s.Fail500 > 0:
		s.Fail500--
		status = http.StatusInternalServerError
	}
	req.Status = status
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if in.Dimensions > 0 {
		dim = in.Dimensions
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/embeddings":
		vs := s.embed(r.Context(), dim, in.Input)
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Object string `json:"object"`
			Model  string `json:"model"`
			Data   []item `json:"data"`
		}{Object: "list", Model: in.Model}
		for i := len(vs) - 1; i >= 0; i-- { // out of order, as the index field allows
			out.Data = append(out.Data, item{"embedding", i, vs[i]})
		}
		json.NewEncoder(w).Encode(out)
	case "/api/embed":
		json.NewEncoder(w).Encode(map[string]any{"model": in.Model, "embeddings": s.embed(r.Context(), dim, in.Input)})
	case "/rerank":
		type item struct {
			Index int     `json:"index"`
			Score float64 `json:"score"`
		}
		var out []item
		for _, r := range rerank(in.Query, in.Texts, drop) {
			out = append(out, item{r.index, r.score})
		}
		json.NewEncoder(w).Encode(out)
	case "/v1/rerank":
		type item struct {
			Index int     `json:"index"`
			Score float64 `json:"relevance_score"`
		}
		var out []item
		for _, r := range rerank(in.Query, in.Documents, drop) {
			out = append(out, item{r.index, r.score})
		}
		json.NewEncoder(w).Encode(map[string]any{"results": out})
	default:
		http.Error(w, fmt.Sprintf("no endpoint %s", r.URL.Path), http.StatusNotFound)
	}
}

func (s *Server) embed(ctx context.Context, dim int, texts []string) [][]float32 {
	vs, _ := embed.NewHash(dim).Embed(ctx, texts) // fails only on a cancelled ctx
	return vs
}

type scored struct {
	index int
	score float64
}

// rerank scores each passage by the share of the query's words it holds,
// best first, ties by index, leaving out the last drop passages.
func rerank(query string, passages []string, drop int) []scored {
	words := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			m[w] = true
		}
		return m
	}
	q := words(query)
	var out []scored
	for i, p := range passages[:max(0, len(passages)-drop)] {
		pw := words(p)
		n := 0
		for w := range q {
			if pw[w] {
				n++
			}
		}
		out = append(out, scored{i, float64(n) / float64(max(1, len(q)))})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
	return out
}
