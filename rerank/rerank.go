// Package rerank reorders search hits with a cross-encoder or similar model
// that reads the query and each passage together.
//
// A reranker only reorders: it never adds or drops a hit. The passage of a
// hit is its context and body joined by one newline (the body alone when the
// context is empty), the same text the dense leg embeds.
//
// Rerankers are built by provider name (New), from providers registered as
// database/sql drivers are (Register). Built in: "http" (HTTP), a reranker
// served over HTTP in the TEI or Cohere/Jina shape.
package rerank

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/escurel/escurel/embed"
)

// Result is a reranker's score for the passage at Index in its input.
type Result struct {
	Index int     // position of the passage in the Rerank call's input, from 0
	Score float64 // higher is more relevant; the scale is the model's
}

// Reranker scores passages against a query. It may return fewer results
// than passages (a top_n), in any order; Order turns them into the order of
// the hits.
type Reranker interface {
	Rerank(ctx context.Context, query string, passages []string) ([]Result, error)
}

// Order returns the positions of n hits in their reranked order: those the
// results score, by score descending (equal scores keep their original
// order), then those the results leave out, in their original order. A
// result whose index is out of range or repeated is an error.
func Order(n int, results []Result) ([]int, error) {
	seen := make([]bool, n)
	rs := append([]Result(nil), results...)
	for _, r := range rs {
		if r.Index < 0 || r.Index >= n {
			return nil, fmt.Errorf("rerank: result for passage %d of %d", r.Index, n)
		}
		if seen[r.Index] {
			return nil, fmt.Errorf("rerank: passage %d scored twice", r.Index)
		}
		seen[r.Index] = true
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Score != rs[j].Score {
			return rs[i].Score > rs[j].Score
		}
		return rs[i].Index < rs[j].Index
	})
	out := make([]int, 0, n)
	for _, r := range rs {
		out = append(out, r.Index)
	}
	for i := range n {
		if !seen[i] {
			out = append(out, i)
		}
	}
	return out, nil
}

// HTTP is a reranker served over HTTP in one of the two common shapes,
// chosen by the URL's path:
//
//   - ending in /v1/rerank or /v2/rerank (Cohere, Jina, vLLM, LocalAI):
//     {"model","query","documents":[...]} answered by
//     {"results":[{"index","relevance_score"}]};
//   - otherwise (Hugging Face TEI's /rerank):
//     {"query","texts":[...]} answered by [{"index","score"}].
//
// Either answer shape is accepted from either endpoint.
type HTTP struct {
	url    string
	model  string
	cohere bool
	client *embed.Client
}

// Options configure a reranker. The zero value of each field means its
// default; a provider ignores the fields it has no use for.
type Options struct {
	// URL is the endpoint of a reranker served over HTTP: for "http", an
	// http or https URL such as http://127.0.0.1:8080/rerank (NewHTTP
	// takes it as its own argument instead).
	URL     string
	Model   string        // sent as "model" (Cohere shape); may be empty
	Key     string        // sent as "Authorization: Bearer <Key>" when set
	Timeout time.Duration // per request; default embed.DefaultTimeout
	Retries int           // as embed.Client.Retries
}

// NewHTTP returns the reranker at endpoint, an http or https URL (opts.URL
// is not used). It does no I/O; a malformed endpoint is an error.
func NewHTTP(endpoint string, opts Options) (*HTTP, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("reranker %q: want an http:// or https:// URL such as http://127.0.0.1:8080/rerank", endpoint)
	}
	p := strings.TrimRight(u.Path, "/")
	return &HTTP{url: endpoint, model: opts.Model,
		cohere: strings.HasSuffix(p, "/v1/rerank") || strings.HasSuffix(p, "/v2/rerank"),
		client: &embed.Client{Name: "reranker " + endpoint, Key: opts.Key, Timeout: opts.Timeout, Retries: opts.Retries}}, nil
}

// Rerank sends the query and passages in one request.
func (h *HTTP) Rerank(ctx context.Context, query string, passages []string) ([]Result, error) {
	if len(passages) == 0 {
		return nil, nil
	}
	var req any
	if h.cohere {
		req = struct {
			Model     string   `json:"model,omitempty"`
			Query     string   `json:"query"`
			Documents []string `json:"documents"`
		}{h.model, query, passages}
	} else {
		req = struct {
			Query string   `json:"query"`
			Texts []string `json:"texts"`
		}{query, passages}
	}
	var resp answer
	if err := h.client.Post(ctx, h.url, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.results) == 0 {
		return nil, fmt.Errorf("reranker %s: no scores for %d passages (is it a rerank endpoint?)", h.url, len(passages))
	}
	return resp.results, nil
}

// answer decodes either answer shape.
type answer struct{ results []Result }

type item struct {
	Index          int      `json:"index"`
	Score          *float64 `json:"score"`
	RelevanceScore *float64 `json:"relevance_score"`
}

func (a *answer) UnmarshalJSON(b []byte) error {
	var items []item
	if s := strings.TrimSpace(string(b)); strings.HasPrefix(s, "[") {
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
	} else {
		var wrapped struct {
			Results *[]item `json:"results"`
		}
		if err := json.Unmarshal(b, &wrapped); err != nil {
			return err
		}
		if wrapped.Results == nil {
			return fmt.Errorf("answer has no results: %.100s", b)
		}
		items = *wrapped.Results
	}
	for _, it := range items {
		s := it.Score
		if s == nil {
			s = it.RelevanceScore
		}
		if s == nil {
			return fmt.Errorf("result for passage %d has no score", it.Index)
		}
		a.results = append(a.results, Result{Index: it.Index, Score: *s})
	}
	return nil
}
