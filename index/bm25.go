package index

import "math"

// BM25 holds the Okapi BM25 parameters (Robertson & Zaragoza 2009, "The
// Probabilistic Relevance Framework: BM25 and Beyond", eq. 3.15). The score
// of a block d for a query of distinct terms q₁…qₙ is
//
//	score(d) = Σᵢ idf(qᵢ) · tf(qᵢ,d)·(k1+1) / (tf(qᵢ,d) + k1·(1 − b + b·|d|/avgdl))
//	idf(q)   = ln(1 + (N − df(q) + 0.5) / (df(q) + 0.5))
//
// with tf the term's occurrences in the block, |d| the block's length in
// terms, avgdl the mean length over the N blocks, and df the number of
// blocks containing the term. The idf is Lucene's non-negative variant. A
// block's indexed text is its context, a newline and its body, as one field.
type BM25 struct {
	K1 float64 // term-frequency saturation, ≥ 0
	B  float64 // length normalisation, 0 to 1
}

// DefaultBM25 is k1 = 1.2, b = 0.75.
var DefaultBM25 = BM25{K1: 1.2, B: 0.75}

// IDF returns idf for a term found in df of n blocks.
func (p BM25) IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// TF returns the saturated, length-normalised term-frequency factor for tf
// occurrences in a block of length dl when blocks average avgdl terms.
func (p BM25) TF(tf, dl int, avgdl float64) float64 {
	norm := 1.0
	if avgdl > 0 {
		norm = 1 - p.B + p.B*float64(dl)/avgdl
	}
	t := float64(tf)
	return t * (p.K1 + 1) / (t + p.K1*norm)
}
