// Package fusion merges the rankings of escurel's two search legs (BM25F
// and dense) into one, as bleve's search/fusion (rrf.go) does for its text
// and vector legs.
//
// Two methods:
//   - RRF, reciprocal rank fusion (Cormack, Clarke & Büttcher 2009,
//     "Reciprocal Rank Fusion outperforms Condorcet and individual Rank
//     Learning Methods"): an item scores Σ w_l / (k + rank_l) over the legs
//     l that ranked it, rank from 1. With equal weights the order is that
//     of plain RRF.
//   - Convex, the convex combination Σ w_l · norm_l(score) of each leg's
//     scores min-max normalised over that leg's candidates (Bruch, Gai &
//     Ingber 2023, "An Analysis of Fusion Functions for Hybrid Retrieval");
//     a leg that did not rank an item adds 0, and a leg whose candidates
//     all score the same gives each of them 1.
//
// The weights are 1 − Alpha for the first leg (BM25) and Alpha for the
// second (dense). Equal fused scores are ordered by ascending id, so equal
// inputs give the same order on every run.
package fusion

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Methods.
const (
	RRF    = "rrf"
	Convex = "convex"
)

// Leg is one ranking, best first: IDs[i] has Scores[i].
type Leg struct {
	IDs    []int64
	Scores []float64
}

// Params configure Fuse.
type Params struct {
	Method string  // RRF or Convex
	K      float64 // RRF's k, > 0
	Alpha  float64 // weight of the second leg, in [0, 1]; the first's is 1 − Alpha
}

// Validate reports parameters outside their ranges.
func (p Params) Validate() error {
	switch p.Method {
	case RRF:
		if !(p.K > 0) || math.IsInf(p.K, 0) {
			return fmt.Errorf("fusion: rrf k = %v, want > 0", p.K)
		}
	case Convex:
	default:
		return fmt.Errorf("fusion: method %q: want %s or %s", p.Method, RRF, Convex)
	}
	if !(p.Alpha >= 0 && p.Alpha <= 1) {
		return fmt.Errorf("fusion: alpha = %v, want in [0, 1]", p.Alpha)
	}
	return nil
}

// Result is one fused item: its fused score and, per leg, its rank there
// (from 1; 0 when that leg did not rank it) and its score in that leg.
type Result struct {
	ID    int64
	Score float64
	Rank  [2]int
	Leg   [2]float64
}

// Fuse merges two legs as p says and returns the best n, fused score
// descending, equal scores by ascending id. An id a leg lists twice counts
// at its first (best) place there. p must be valid (Validate).
func Fuse(legs [2]Leg, p Params, n int) []Result {
	byID := map[int64]*Result{}
	var order []*Result
	for l, lg := range legs {
		weight := 1 - p.Alpha
		if l == 1 {
			weight = p.Alpha
		}
		lo, hi := 0.0, 0.0
		if p.Method == Convex && len(lg.Scores) > 0 {
			lo, hi = slices.Min(lg.Scores), slices.Max(lg.Scores)
		}
		for i, id := range lg.IDs {
			r, ok := byID[id]
			if !ok {
				r = &Result{ID: id}
				byID[id] = r
				order = append(order, r)
			}
			if r.Rank[l] != 0 {
				continue // listed twice: the first place counts
			}
			s := lg.Scores[i]
			r.Rank[l], r.Leg[l] = i+1, s
			switch p.Method {
			case RRF:
				r.Score += weight / (p.K + float64(i+1))
			default:
				norm := 1.0 // all equal: each is the leg's best
				if hi > lo {
					norm = (s - lo) / (hi - lo)
				}
				r.Score += weight * norm
			}
		}
	}
	out := make([]Result, len(order))
	for i, r := range order {
		out[i] = *r
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ID < out[j].ID
	})
	return out[:min(len(out), max(n, 0))]
}
