package dense

import "math/rand/v2"

// rotation is a fixed random orthogonal map of R^dim, applied to the
// vectors and the query before they are quantized: it spreads a vector's
// energy evenly over the components (a short query's hash vector has a few
// large ones), which is what makes the one-bit estimate's error small and
// even (RaBitQ's random rotation, here structured: Ailon & Chazelle's
// randomized Hadamard transform). It depends on dim only (a fixed seed), so
// a vector's code depends on the vector alone.
//
// rotationRounds rounds of random sign flips, each followed by a
// Walsh–Hadamard transform of size p (the largest power of two ≤ dim,
// scaled by 1/√p to be orthogonal) on the components [0, p) in even rounds
// and [dim−p, dim) in odd ones, so that every component is mixed with
// every other when p < dim. kernel.c's dense_rotate computes it.
type rotation struct {
	dim, p int
	signs  []float32 // round r's are signs[r*dim : (r+1)*dim], each ±1
}

const rotationRounds = 3

func newRotation(dim int) *rotation {
	r := &rotation{dim: dim, p: 1, signs: make([]float32, rotationRounds*dim)}
	for r.p*2 <= dim {
		r.p *= 2
	}
	rng := rand.New(rand.NewPCG(uint64(dim), 0x5eed))
	for j := range r.signs {
		r.signs[j] = 1
		if rng.Uint64()&1 == 1 {
			r.signs[j] = -1
		}
	}
	return r
}
