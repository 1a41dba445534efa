package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Remote is an embedder served over HTTP: OpenAI's POST <url>/embeddings or
// Ollama's POST <url>/api/embed. Embed sends the texts in batches of
// Spec.Batch, one request at a time, and checks that every vector has the
// spec's dimension (when the spec gives one) and that all have the same.
// The vectors are returned as the server sent them; the index normalizes
// them (Normalize).
type Remote struct {
	spec   Spec
	name   string // model name on the server: Model after "<provider>:"
	url    string // the endpoint
	client *Client
}

var _ Embedder = (*Remote)(nil)

func newRemote(spec Spec, base, path, keyEnv string, keyRequired bool) (*Remote, error) {
	key, err := apiKey(spec.Model, keyEnv, keyRequired)
	if err != nil {
		return nil, err
	}
	if spec.URL != "" {
		base = spec.URL
	}
	_, name, _ := strings.Cut(spec.Model, ":")
	return &Remote{spec: spec, name: name, url: base + path,
		client: &Client{Name: "embedder " + spec.Model, Key: key, Timeout: spec.Timeout, Retries: spec.Retries}}, nil
}

// vector is a JSON array of numbers; a null component is an error, not 0.
type vector []float32

func (v *vector) UnmarshalJSON(b []byte) error {
	var xs []*float32
	if err := json.Unmarshal(b, &xs); err != nil {
		return err
	}
	out := make([]float32, len(xs))
	for i, x := range xs {
		if x == nil {
			return fmt.Errorf("vector component %d is null", i)
		}
		out[i] = *x
	}
	*v = out
	return nil
}

// newOpenAI returns the embedder of an "openai:<model>" spec.
func newOpenAI(spec Spec) (*Remote, error) {
	env, required := spec.KeyEnv, spec.KeyEnv != ""
	if env == "" {
		env = "OPENAI_API_KEY"
	}
	return newRemote(spec, DefaultOpenAIURL, "/embeddings", env, required)
}

// newOllama returns the embedder of an "ollama:<model>" spec.
func newOllama(spec Spec) (*Remote, error) {
	return newRemote(spec, DefaultOllamaURL, "/api/embed", spec.KeyEnv, spec.KeyEnv != "")
}

// Model returns the spec's model id, such as "openai:text-embedding-3-small".
func (r *Remote) Model() string { return r.spec.Model }

// Dim returns the spec's dimension, 0 when it gives none.
func (r *Remote) Dim() int { return r.spec.Dim }

// URL returns the endpoint requests go to.
func (r *Remote) URL() string { return r.url }

// Embed returns one vector per text; see Remote.
func (r *Remote) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := r.spec.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += batch {
		part := texts[start:min(start+batch, len(texts))]
		vs, err := r.embedBatch(ctx, part)
		if err != nil {
			return nil, err
		}
		if len(vs) != len(part) {
			return nil, fmt.Errorf("embedder %s: POST %s: %d vectors for %d texts", r.spec.Model, r.url, len(vs), len(part))
		}
		for _, v := range vs {
			want := r.spec.Dim
			if want == 0 && len(out) > 0 {
				want = len(out[0])
			}
			if want != 0 && len(v) != want {
				return nil, fmt.Errorf("embedder %s: POST %s: the server returned a %d-dimensional vector, want %d; "+
					"set dim=%d in the embedder spec (and rebuild the index with it)", r.spec.Model, r.url, len(v), want, len(v))
			}
			if len(v) == 0 {
				return nil, fmt.Errorf("embedder %s: POST %s: the server returned an empty vector", r.spec.Model, r.url)
			}
			if !slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
				return nil, fmt.Errorf("embedder %s: POST %s: the server returned an all-zero vector, which has no direction", r.spec.Model, r.url)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func (r *Remote) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	switch r.spec.Provider() {
	case "ollama":
		req := struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}{r.name, texts}
		var resp struct {
			Embeddings []vector `json:"embeddings"`
		}
		if err := r.client.Post(ctx, r.url, req, &resp); err != nil {
			return nil, err
		}
		out := make([][]float32, len(resp.Embeddings))
		for i, v := range resp.Embeddings {
			out[i] = v
		}
		return out, nil
	default: // openai
		req := struct {
			Model          string   `json:"model"`
			Input          []string `json:"input"`
			EncodingFormat string   `json:"encoding_format"`
			Dimensions     int      `json:"dimensions,omitempty"`
		}{Model: r.name, Input: texts, EncodingFormat: "float"}
		if r.spec.Dimensions {
			req.Dimensions = r.spec.Dim
		}
		var resp struct {
			Data []struct {
				Index     int    `json:"index"`
				Embedding vector `json:"embedding"`
			} `json:"data"`
		}
		if err := r.client.Post(ctx, r.url, req, &resp); err != nil {
			return nil, err
		}
		out := make([][]float32, len(texts))
		for _, d := range resp.Data {
			if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
				return nil, fmt.Errorf("embedder %s: POST %s: answer has a bad or repeated index %d", r.spec.Model, r.url, d.Index)
			}
			out[d.Index] = d.Embedding
		}
		if len(resp.Data) != len(texts) {
			return nil, fmt.Errorf("embedder %s: POST %s: %d vectors for %d texts", r.spec.Model, r.url, len(resp.Data), len(texts))
		}
		return out, nil
	}
}
