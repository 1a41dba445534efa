// Package eval measures retrieval quality on a BEIR-format dataset
// (Thakur et al. 2021): corpus.jsonl, queries.jsonl and qrels/<split>.tsv.
// It ingests the corpus into an index, runs every judged query of a split
// and reports nDCG@10, recall@100 and MRR@10, as trec_eval computes them,
// with query latency and ingest speed.
package eval

import "math"

// NDCG returns nDCG@k of a ranking (Järvelin & Kekäläinen 2002,
// "Cumulated gain-based evaluation of IR techniques"), with trec_eval's
// linear gains: DCG@k = Σ_{i=1..k} rel_i / log2(i+1) over the ranking,
// divided by the same sum over the judged documents sorted by relevance.
// Unjudged documents have relevance 0. A query with no relevant document
// scores 0.
func NDCG(ranked []string, rels map[string]int, k int) float64 {
	var dcg float64
	for i, d := range ranked[:min(k, len(ranked))] {
		dcg += float64(rels[d]) / math.Log2(float64(i+2))
	}
	var ideal []int
	for _, r := range rels {
		if r > 0 {
			ideal = append(ideal, r)
		}
	}
	sortDesc(ideal)
	var idcg float64
	for i, r := range ideal[:min(k, len(ideal))] {
		idcg += float64(r) / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// Recall returns recall@k: the share of the relevant documents (relevance
// above 0) found in the first k of the ranking; 0 when none is relevant.
func Recall(ranked []string, rels map[string]int, k int) float64 {
	relevant, found := 0, 0
	for _, r := range rels {
		if r > 0 {
			relevant++
		}
	}
	for _, d := range ranked[:min(k, len(ranked))] {
		if rels[d] > 0 {
			found++
		}
	}
	if relevant == 0 {
		return 0
	}
	return float64(found) / float64(relevant)
}

// MRR returns the reciprocal rank of the first relevant document within the
// first k of the ranking, or 0 (averaged over queries: MRR@k).
func MRR(ranked []string, rels map[string]int, k int) float64 {
	for i, d := range ranked[:min(k, len(ranked))] {
		if rels[d] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

func sortDesc(xs []int) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] > xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}
