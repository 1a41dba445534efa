// Package embed turns text into dense vectors for escurel's dense retrieval
// leg.
//
// An Embedder is named by a Spec, "<model>/<dim>", which the index manifest
// records: an index refuses to open with an embedder other than the one that
// built it, because vectors from two models are not comparable.
//
// Providers: "hash" (Hash, offline and deterministic; the default) and "none"
// (no dense vectors: a BM25-only index).
package embed

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Embedder maps texts to vectors of Dim() float32 values, one per text, in
// order. Implementations are safe for concurrent use.
type Embedder interface {
	// Model returns the model id recorded in the manifest, e.g. "hash".
	Model() string
	// Dim returns the vector dimension.
	Dim() int
	// Embed returns len(texts) vectors. It honours ctx cancellation.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Spec names an embedder: a model id and a dimension.
type Spec struct {
	Model string
	Dim   int
}

// None is the spec of an index without dense vectors.
var None = Spec{Model: "none", Dim: 0}

// Default is the embedder used when none is configured: Hash with
// DefaultHashDim dimensions.
var Default = Spec{Model: "hash", Dim: DefaultHashDim}

// String returns "<model>/<dim>", or "none".
func (s Spec) String() string {
	if s == None {
		return "none"
	}
	return s.Model + "/" + strconv.Itoa(s.Dim)
}

// IsZero reports whether s is the zero Spec (nothing configured).
func (s Spec) IsZero() bool { return s == Spec{} }

// ParseSpec parses "none", "hash" (DefaultHashDim dimensions) or
// "hash/<dim>". Other models are errors listing the known ones.
func ParseSpec(s string) (Spec, error) {
	model, dimText, hasDim := strings.Cut(strings.TrimSpace(s), "/")
	switch model {
	case "none":
		if hasDim {
			return Spec{}, fmt.Errorf("embedder %q: none takes no dimension", s)
		}
		return None, nil
	case "hash":
		spec := Default
		if hasDim {
			d, err := strconv.Atoi(dimText)
			if err != nil || d < 1 || d > MaxHashDim {
				return Spec{}, fmt.Errorf("embedder %q: dimension must be an integer from 1 to %d", s, MaxHashDim)
			}
			spec.Dim = d
		}
		return spec, nil
	}
	return Spec{}, fmt.Errorf("embedder %q: unknown model; embedders: hash, hash/<dim>, none", s)
}

// New returns the embedder for spec, or nil for None. A spec that ParseSpec
// would not accept is an error.
func New(spec Spec) (Embedder, error) {
	if spec == None {
		return nil, nil
	}
	parsed, err := ParseSpec(spec.String())
	if err != nil {
		return nil, err
	}
	return NewHash(parsed.Dim), nil
}
