// Package embed turns text into dense vectors for escurel's dense retrieval
// leg.
//
// An Embedder is named by a Spec, which the index manifest records: an index
// refuses to open with an embedder other than the one that built it, because
// vectors from two models are not comparable.
//
// Providers register by name (Register), as database/sql drivers do; New
// builds an embedder with the provider a Spec names. Built in, because they
// are light and pure Go:
//   - "hash" (Hash): feature hashing, offline and deterministic; the default.
//   - "openai:<model>" (Remote): any server speaking OpenAI's
//     POST /v1/embeddings (OpenAI, vLLM, llama.cpp, LM Studio, TEI, LocalAI).
//   - "ollama:<model>" (Remote): Ollama's POST /api/embed.
//   - "none": no dense vectors, a BM25-only index.
//
// Linked in by importing its package (a program that does not import it
// does not link ONNX Runtime's bindings or the tokenizer):
//   - "onnx:<name>?path=<dir>": a sentence-transformers model run
//     in-process by ONNX Runtime; import _ "github.com/escurel/escurel/embed/onnx".
//
// ParseSpec knows the syntax of all of these, linked or not, so a manifest
// naming an onnx model parses in any program; New and Fingerprint fail with
// ErrNotLinked for a provider that is not linked in.
//
// Optional provider capabilities, found by type assertion on the Provider:
//   - Fingerprinter: the model is local files, identified by a fingerprint
//     (Fingerprint, Spec.Fingerprint).
//
// Every vector escurel stores or searches with is scaled to unit L2 length
// (Normalize), so the inner product the dense leg ranks by is the cosine
// similarity, whatever the model returns.
package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Embedder maps texts to vectors of Dim() float32 values, one per text, in
// order. Implementations are safe for concurrent use.
type Embedder interface {
	// Model returns the model id recorded in the manifest, e.g. "hash" or
	// "openai:text-embedding-3-small".
	Model() string
	// Dim returns the vector dimension; 0 when not yet known (a remote
	// model whose dimension was not configured: see Probe).
	Dim() int
	// Embed returns len(texts) vectors. It honours ctx cancellation and
	// deadlines.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Spec names and configures an embedder. Model, Dim, QueryPrefix and
// DocumentPrefix are its identity (Identity): they decide the vectors, and
// an index records them in its manifest. The other fields say where and how
// to reach the model and may change between runs.
//
// Its string form (String, ParseSpec) is
//
//	none
//	hash | hash/<dim>
//	<provider>:<model>[?<option>=<value>&...]
//
// with options dim, query_prefix, document_prefix (identity) and url,
// key_env, batch, timeout, retries, dimensions, path (reach), URL-query
// encoded.
type Spec struct {
	// Model is "none", "hash", "openai:<name>", "ollama:<name>",
	// "onnx:<name>", or "<provider>:<name>" for another registered
	// provider.
	Model string
	// Dim is the vector dimension. 0 for a remote model means: ask the
	// model once (Probe) when a new index is created.
	Dim int
	// QueryPrefix and DocumentPrefix are prepended to queries and to
	// block texts before embedding (E5 wants "query: " and "passage: ",
	// nomic-embed "search_query: " and "search_document: ").
	QueryPrefix, DocumentPrefix string
	// Fingerprint, for a provider of local model files such as onnx,
	// identifies the files (Fingerprint): an index records it when it is
	// created, and the embedder refuses model files that differ. Option
	// sha256=<16 hex digits>.
	Fingerprint string

	// URL is the server's base URL: for openai the part before
	// "/embeddings" (default DefaultOpenAIURL), for ollama the part before
	// "/api/embed" (default DefaultOllamaURL).
	URL string
	// KeyEnv names the environment variable holding the API key, sent as
	// "Authorization: Bearer <key>". Default for openai: OPENAI_API_KEY,
	// sent only when set; a KeyEnv given explicitly must be set.
	KeyEnv string
	// Path is an onnx model's directory (model.onnx, tokenizer.json).
	Path string
	// Batch is the most texts sent in one request, or run through an
	// onnx model at once. Default DefaultBatch.
	Batch int
	// Timeout bounds each request, retries aside. Default DefaultTimeout.
	Timeout time.Duration
	// Retries is how often a request answered 429 or 5xx, or failing on
	// the network, is retried. Default DefaultRetries; -1 means none.
	Retries int
	// Dimensions, for openai, sends Dim as the request's "dimensions"
	// field (models that can shorten their vectors, such as
	// text-embedding-3-*). The spec option is dimensions=<n>, which also
	// sets Dim.
	Dimensions bool
}

// Defaults of the remote embedders' Spec fields.
const (
	DefaultOpenAIURL = "https://api.openai.com/v1"
	DefaultOllamaURL = "http://127.0.0.1:11434"
	DefaultBatch     = 32
	DefaultTimeout   = 60 * time.Second
	DefaultRetries   = 4
)

// None is the spec of an index without dense vectors.
var None = Spec{Model: "none"}

// Default is the embedder used when none is configured: Hash with
// DefaultHashDim dimensions.
var Default = Spec{Model: "hash", Dim: DefaultHashDim}

// Provider returns the part of Model before ':' ("hash", "openai", ...).
func (s Spec) Provider() string {
	p, _, _ := strings.Cut(s.Model, ":")
	return p
}

// Identity returns s with only the fields that decide the vectors: Model,
// Dim, the prefixes and, for local model files (onnx), their Fingerprint.
func (s Spec) Identity() Spec {
	return Spec{Model: s.Model, Dim: s.Dim, QueryPrefix: s.QueryPrefix, DocumentPrefix: s.DocumentPrefix, Fingerprint: s.Fingerprint}
}

// String returns the spec in the form ParseSpec reads: "none", "hash/384",
// or "<model>?<options>" with the options set, in a fixed order.
func (s Spec) String() string {
	if s.Model == None.Model && s.Dim == 0 {
		return "none"
	}
	v := url.Values{}
	if s.Provider() != "hash" && s.Dim != 0 {
		key := "dim"
		if s.Dimensions {
			key = "dimensions"
		}
		v.Set(key, strconv.Itoa(s.Dim))
	}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("query_prefix", s.QueryPrefix)
	set("document_prefix", s.DocumentPrefix)
	set("sha256", s.Fingerprint)
	set("url", s.URL)
	set("path", s.Path)
	set("key_env", s.KeyEnv)
	if s.Batch != 0 {
		v.Set("batch", strconv.Itoa(s.Batch))
	}
	if s.Timeout != 0 {
		v.Set("timeout", s.Timeout.String())
	}
	if s.Retries != 0 {
		v.Set("retries", strconv.Itoa(s.Retries))
	}
	out := s.Model
	if s.Provider() == "hash" {
		out += "/" + strconv.Itoa(s.Dim)
	}
	if len(v) > 0 {
		out += "?" + v.Encode() // url.Values.Encode sorts by key
	}
	return out
}

// IsZero reports whether s is the zero Spec (nothing configured).
func (s Spec) IsZero() bool { return s == Spec{} }

// ParseSpec parses a spec in the form Spec.String describes. It checks
// syntax only: an onnx spec parses whether or not the onnx provider is
// linked in (New says so). A provider registered under another name than
// the built-in ones parses as "<name>:<model>" with any option but
// dimensions; its New checks what it uses. Unknown providers, unknown
// options and out-of-range values are errors naming the spec; nothing falls
// back to a default silently.
func ParseSpec(s string) (Spec, error) {
	head, query, _ := strings.Cut(strings.TrimLeftFunc(s, unicode.IsSpace), "?")
	if query == "" {
		head = strings.TrimSpace(head)
	}
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("embedder %q: "+format, append([]any{s}, args...)...)
	}
	var spec Spec
	provider, name, hasName := strings.Cut(head, ":")
	switch {
	case head == "none":
		if query != "" {
			return bad("none takes no options")
		}
		return None, nil
	case head == "hash":
		spec = Default
	case strings.HasPrefix(head, "hash/"):
		d, err := strconv.Atoi(strings.TrimPrefix(head, "hash/"))
		if err != nil || d < 1 || d > MaxHashDim {
			return bad("dimension must be an integer from 1 to %d", MaxHashDim)
		}
		spec = Spec{Model: "hash", Dim: d}
	case provider == "openai" || provider == "ollama" || provider == "onnx" || (hasName && registered(provider) && provider != "hash" && provider != "none"):
		if !hasName || name == "" {
			return bad("%s needs a model name: %s:<model>", provider, provider)
		}
		spec = Spec{Model: head}
	default:
		return bad("unknown embedder; embedders: none, hash, hash/<dim>, openai:<model>, ollama:<model>, onnx:<name>?path=<dir>%s", others())
	}
	// other: a provider registered outside this package, whose options
	// its New checks.
	other := provider != "openai" && provider != "ollama" && provider != "onnx" && spec.Provider() != "hash"
	opts, err := url.ParseQuery(query)
	if err != nil {
		return bad("options: %v", err)
	}
	remote := spec.Provider() != "hash"
	for k, vs := range opts {
		if len(vs) != 1 {
			return bad("option %s given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "query_prefix":
			spec.QueryPrefix = v
		case "document_prefix":
			spec.DocumentPrefix = v
		case "dim", "dimensions":
			d, err := strconv.Atoi(v)
			if err != nil || d < 1 || d > MaxHashDim {
				return bad("%s must be an integer from 1 to %d", k, MaxHashDim)
			}
			if spec.Provider() == "hash" {
				return bad("give the hash dimension as hash/%d", d)
			}
			if k == "dimensions" && spec.Provider() != "openai" {
				return bad("dimensions is an openai option; use dim")
			}
			if spec.Dim != 0 && spec.Dim != d {
				return bad("dim and dimensions differ")
			}
			spec.Dim, spec.Dimensions = d, spec.Dimensions || k == "dimensions"
		case "path":
			if spec.Provider() != "onnx" && !other {
				return bad("option path applies to onnx models only")
			}
			spec.Path = v
		case "sha256":
			if (spec.Provider() != "onnx" && !other) || !fingerprintPattern.MatchString(v) {
				return bad("option sha256 is an onnx model's fingerprint: 16 lower-case hex digits")
			}
			spec.Fingerprint = v
		case "url", "key_env", "batch", "timeout", "retries":
			onnx := spec.Provider() == "onnx"
			if !remote || (onnx && k != "batch") {
				return bad("option %s applies to openai and ollama models only", k)
			}
			switch k {
			case "url":
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return bad("url %q: want http://host[:port][/path] or https://...", v)
				}
				spec.URL = strings.TrimRight(v, "/")
			case "key_env":
				spec.KeyEnv = v
			case "batch":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 4096 {
					return bad("batch must be an integer from 1 to 4096")
				}
				spec.Batch = n
			case "timeout":
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return bad("timeout %q: want a positive duration such as 30s", v)
				}
				spec.Timeout = d
			case "retries":
				n, err := strconv.Atoi(v)
				if err != nil || n < -1 || n > 20 {
					return bad("retries must be an integer from -1 (none) to 20")
				}
				spec.Retries = n
			}
		default:
			return bad("unknown option %s; options: dim, dimensions, query_prefix, document_prefix, url, key_env, batch, timeout, retries, path, sha256", k)
		}
	}
	return spec, nil
}

// New returns the embedder for spec from the provider registered under
// spec.Provider(), or nil for None. A spec that ParseSpec would not accept
// is an error; so is a provider not linked into this program, wrapping
// ErrNotLinked and naming the package to import (for onnx:
// import _ "github.com/escurel/escurel/embed/onnx"). New does no I/O for
// the built-in providers; a provider of local models (onnx) loads them.
func New(spec Spec) (Embedder, error) {
	if spec.Model == None.Model {
		return nil, nil
	}
	parsed, err := ParseSpec(spec.String())
	if err != nil {
		return nil, err
	}
	if parsed != spec {
		return nil, fmt.Errorf("embedder %v: invalid settings", spec)
	}
	p, err := lookup(spec.Provider())
	if err != nil {
		return nil, fmt.Errorf("embedder %s: %w", spec.Model, err)
	}
	return p.New(spec)
}

// others lists, for ParseSpec's error, the registered providers that are
// not built in: ", <name>:<model>" each.
func others() string {
	var b strings.Builder
	for _, name := range Providers() {
		switch name {
		case "none", "hash", "openai", "ollama", "onnx":
		default:
			b.WriteString(", " + name + ":<model>")
		}
	}
	return b.String()
}

// fingerprintPattern is the form of Spec.Fingerprint: 16 lower-case hex
// digits.
var fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// Probe returns the dimension of e's vectors: e.Dim() when known, else the
// length of the vector e returns for a short text.
func Probe(ctx context.Context, e Embedder) (int, error) {
	if d := e.Dim(); d > 0 {
		return d, nil
	}
	vs, err := e.Embed(ctx, []string{"dimension probe"})
	if err != nil {
		return 0, fmt.Errorf("embedder %s: find the dimension: %w", e.Model(), err)
	}
	if len(vs) != 1 || len(vs[0]) == 0 {
		return 0, fmt.Errorf("embedder %s: find the dimension: no vector returned", e.Model())
	}
	return len(vs[0]), nil
}

// Normalize scales v to unit L2 length in place and returns it; the zero
// vector stays zero. It fails on NaN or infinite components.
func Normalize(v []float32) ([]float32, error) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		return nil, errors.New("vector has NaN or infinite components")
	}
	if sum == 0 {
		return v, nil
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return v, nil
}
