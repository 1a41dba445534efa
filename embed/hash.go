package embed

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// DefaultHashDim is the default dimension of the hash embedder.
const DefaultHashDim = 384

// MaxHashDim is the largest dimension the hash embedder accepts.
const MaxHashDim = 65536

// Hash is a feature-hashing embedder (Weinberger et al. 2009, "Feature
// Hashing for Large Scale Multitask Learning"). The text is cut into tokens
// (maximal runs of letters, digits and marks, lower-cased); each token and
// each pair of adjacent tokens is hashed with 64-bit FNV-1a into one of Dim
// buckets, adding +1 or -1 by the hash's top bit; the vector is then scaled
// to unit L2 length (a text without tokens gives the zero vector).
//
// It needs no model weights and no network, and is deterministic: the same
// text gives the same bits in every process on every platform. Its
// quality is that of a bag of words and bigrams; it is the offline default
// and the reference for tests, not a substitute for a trained model.
type Hash struct {
	dim int
}

// NewHash returns a hash embedder of dim dimensions (1 to MaxHashDim).
func NewHash(dim int) *Hash { return &Hash{dim: dim} }

var _ Embedder = (*Hash)(nil)

// Model returns "hash".
func (h *Hash) Model() string { return "hash" }

// Dim returns the vector dimension.
func (h *Hash) Dim() int { return h.dim }

// Embed returns one unit vector (or zero vector) per text.
func (h *Hash) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = h.vector(t)
	}
	return out, nil
}

func (h *Hash) vector(text string) []float32 {
	acc := make([]float64, h.dim)
	add := func(feature string) {
		f := fnv.New64a()
		f.Write([]byte(feature))
		x := f.Sum64()
		sign := 1.0
		if x>>63 == 1 {
			sign = -1
		}
		acc[x%uint64(h.dim)] += sign
	}
	prev := ""
	for _, tok := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
	}) {
		tok = strings.ToLower(tok)
		add("u\x00" + tok)
		if prev != "" {
			add("b\x00" + prev + "\x00" + tok)
		}
		prev = tok
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	vec := make([]float32, h.dim)
	if norm == 0 {
		return vec
	}
	norm = math.Sqrt(norm)
	for i, v := range acc {
		vec[i] = float32(v / norm)
	}
	return vec
}
