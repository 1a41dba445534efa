package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/eval"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/fts"
)

// EvalCommand is "escurel eval": retrieval quality on a BEIR dataset.
type EvalCommand struct {
	m *Main
	g globals
}

// Run evaluates. The index is temporary unless --keep names a directory.
func (c *EvalCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("eval", &c.g)
	dir := fs.String("beir", "", "BEIR dataset directory (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)")
	split := fs.String("split", "test", "qrels split to evaluate: test, train or dev")
	mode := fs.String("mode", "bm25", "retrieval mode: bm25, dense or hybrid")
	fusion := fs.String("fusion", "", "hybrid fusion: rrf (default) or convex")
	alpha := fs.Float64("alpha", 0, "weight of the dense leg in fusion, in (0, 1] (default 0.5)")
	rrfK := fs.Float64("rrf-k", 0, "RRF's k (default 60)")
	legDepth := fs.Int("leg-depth", 0, "candidates per leg in hybrid mode (default 100, at least --depth)")
	rr := c.m.rerankFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	perQuery := fs.String("per-query", "", "write one JSON line per query (metrics, latency, top 10) to this file")
	keep := fs.String("keep", "", "build the index in this empty directory and keep it (default: a temporary one)")
	depth := fs.Int("depth", 1000, "blocks retrieved per query before grouping them into documents")
	p := fts.DefaultParams
	fs.Float64Var(&p.K1, "k1", p.K1, "BM25F k1")
	fs.Float64Var(&p.B[fts.Body], "b", p.B[fts.Body], "BM25F b of the body")
	fs.Float64Var(&p.B[fts.Context], "b-context", p.B[fts.Context], "BM25F b of the context")
	fs.Float64Var(&p.Weight[fts.Body], "body-weight", p.Weight[fts.Body], "BM25F weight of the body")
	fs.Float64Var(&p.Weight[fts.Context], "context-weight", p.Weight[fts.Context], "BM25F weight of the context")
	and := fs.Bool("and", false, "require every query term (default: any)")
	analyzer := fs.String("analyzer", "", "analyzer of the evaluation index (default: standard)")
	contextualize := fs.String("contextualize", "", "structural or off (default: structural)")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("eval: unexpected argument %q", args[0])
	}
	if *dir == "" {
		return usageError("eval: --beir DIR is required")
	}
	if err := p.Validate(); err != nil {
		return usageError("eval: %v", err)
	}
	if *contextualize != "" {
		if _, err := index.ParseContextualize(*contextualize); err != nil {
			return usageError("eval: %v", err)
		}
	}
	opts := eval.Options{Dir: *dir, Split: *split, Mode: *mode, IndexDir: *keep, Depth: *depth,
		Index: index.Options{Chunker: c.g.chunker, Analyzer: *analyzer, Contextualize: *contextualize},
		Search: index.SearchOptions{BM25: &p, Conjunctive: *and, Fusion: *fusion, Alpha: *alpha, RRFK: *rrfK,
			Depth: *legDepth}}
	if c.g.embedder != "" { // default: none for bm25, hash/384 otherwise
		if opts.Index.Embedder, err = embed.ParseSpec(c.g.embedder); err != nil {
			return usageError("eval: %v", err)
		}
	}
	if opts.Search.Reranker, err = rr.reranker(); err != nil {
		return usageError("eval: %v", err)
	}
	opts.Reranker = rr.url
	if *perQuery != "" {
		f, err := os.Create(*perQuery)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.PerQuery = f
	}
	rep, err := eval.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	how := rep.Mode
	if rep.Fusion != "" {
		how += " (" + rep.Fusion + ")"
	}
	if rep.Reranker != "" {
		how += ", reranked by " + rep.Reranker
	}
	fmt.Fprintf(c.m.Stdout, "%s %s split, %s, embedder %s: %d queries over %d documents (%d blocks, %d failed)\n",
		rep.Dataset, rep.Split, how, rep.Manifest.Embedder(), rep.Queries, rep.Documents, rep.Blocks, rep.Failed)
	fmt.Fprintf(c.m.Stdout, "nDCG@10 %.4f  recall@100 %.4f  MRR@10 %.4f\n", rep.NDCG10, rep.Recall100, rep.MRR10)
	fmt.Fprintf(c.m.Stdout, "search (k 10, with hit rows) p50 %.2f ms, p95 %.2f ms; ranking (depth %d) p50 %.2f ms, p95 %.2f ms\n",
		rep.LatencyP50ms, rep.LatencyP95ms, rep.Depth, rep.RankP50ms, rep.RankP95ms)
	fmt.Fprintf(c.m.Stdout, "ingest %.1f s (%.0f docs/s)\n", rep.IngestSeconds, rep.IngestDocsPerSec)
	fmt.Fprintf(c.m.Stdout, "k1 %.2f, b %.2f/%.2f, weights %.2f/%.2f (body/context), analyzer %s, chunker %s, contextualize %s\n",
		p.K1, p.B[fts.Body], p.B[fts.Context], p.Weight[fts.Body], p.Weight[fts.Context],
		rep.Manifest.Analyzer, rep.Manifest.Chunker, rep.Manifest.Contextualize)
	return nil
}
