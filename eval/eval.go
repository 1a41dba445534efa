package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
)

// Options configure Run.
type Options struct {
	Dir   string // the BEIR dataset directory
	Split string // qrels split: "test" (default), "train", "dev"
	// Mode is index.ModeBM25 (the default), ModeDense or ModeHybrid; it
	// overrides Search.Mode.
	Mode string
	// IndexDir is where the index is built; "" means a temporary directory,
	// removed afterwards. It must not hold an index already.
	IndexDir string
	// Index holds the index settings. A zero Embedder means embed.None in
	// bm25 mode (no vectors are needed) and embed.Default otherwise.
	Index index.Options
	// Search holds the search settings; K is replaced by Depth.
	Search index.SearchOptions
	// Depth is how many blocks each query ranks before blocks are grouped
	// into documents (a document scores as its best block). Default 1000;
	// with a Search.Reranker, RerankDepth.
	Depth int
	// RerankDepth is how many blocks are retrieved with their rows and
	// reordered when Search.Reranker is set. Default 100.
	RerankDepth int
	// Reranker names the reranker in the report.
	Reranker string
	// PerQuery, when not nil, receives one JSON object per query.
	PerQuery io.Writer
}

// Report is the outcome of Run. Metrics are means over the judged queries.
type Report struct {
	Dataset          string         `json:"dataset"`
	Split            string         `json:"split"`
	Mode             string         `json:"mode"`
	Fusion           string         `json:"fusion,omitempty"`
	Reranker         string         `json:"reranker,omitempty"`
	Documents        int            `json:"documents"`
	Failed           int            `json:"failed_documents"`
	Blocks           int            `json:"blocks"`
	Queries          int            `json:"queries"`
	Depth            int            `json:"depth"`
	NDCG10           float64        `json:"ndcg@10"`
	Recall100        float64        `json:"recall@100"`
	MRR10            float64        `json:"mrr@10"`
	LatencyP50ms     float64        `json:"latency_p50_ms"` // Search, k 10, hits with their rows
	LatencyP95ms     float64        `json:"latency_p95_ms"`
	RankP50ms        float64        `json:"rank_p50_ms"` // Rank at Depth: ranking only
	RankP95ms        float64        `json:"rank_p95_ms"`
	IngestSeconds    float64        `json:"ingest_seconds"`
	IngestDocsPerSec float64        `json:"ingest_docs_per_s"`
	Manifest         index.Manifest `json:"manifest"`
	BM25             any            `json:"bm25"`
	Conjunctive      bool           `json:"conjunctive"`
}

// perQuery is one line of Options.PerQuery.
type perQuery struct {
	QueryID   string   `json:"query_id"`
	NDCG10    float64  `json:"ndcg@10"`
	Recall100 float64  `json:"recall@100"`
	MRR10     float64  `json:"mrr@10"`
	LatencyMS float64  `json:"latency_ms"`
	Top10     []string `json:"top10"`
}

// Run ingests opts.Dir's corpus, runs its judged queries and reports.
// Errors name the file and line of malformed input.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Split == "" {
		opts.Split = "test"
	}
	if opts.Mode == "" {
		opts.Mode = index.ModeBM25
	}
	switch opts.Mode {
	case index.ModeBM25, index.ModeDense, index.ModeHybrid:
	default:
		return nil, fmt.Errorf("eval: mode %q: want %s, %s or %s", opts.Mode, index.ModeBM25, index.ModeDense, index.ModeHybrid)
	}
	opts.Search.Mode = opts.Mode
	if opts.Depth == 0 {
		opts.Depth = 1000
	}
	if opts.RerankDepth == 0 {
		opts.RerankDepth = 100
	}
	if opts.Search.Reranker != nil {
		opts.Depth = opts.RerankDepth
	}
	qrels, err := readQrels(filepath.Join(opts.Dir, "qrels", opts.Split+".tsv"))
	if err != nil {
		return nil, err
	}
	queries, err := readQueries(filepath.Join(opts.Dir, "queries.jsonl"), qrels)
	if err != nil {
		return nil, err
	}
	dir := opts.IndexDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "escurel-eval-*"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	} else if index.Exists(dir) {
		return nil, fmt.Errorf("eval: %s already holds an index; give an empty directory", dir)
	}
	iopts := opts.Index
	if iopts.Embedder.IsZero() {
		iopts.Embedder = embed.None
		if opts.Mode != index.ModeBM25 {
			iopts.Embedder = embed.Default
		}
	}
	if iopts.Embedder == embed.None && opts.Mode != index.ModeBM25 {
		return nil, fmt.Errorf("eval: mode %s needs vectors: give an embedder other than none", opts.Mode)
	}
	ix, err := index.Open(ctx, dir, &iopts)
	if err != nil {
		return nil, err
	}
	defer ix.Close()

	rep := &Report{Dataset: filepath.Base(filepath.Clean(opts.Dir)), Split: opts.Split, Mode: opts.Mode, Reranker: opts.Reranker,
		Queries: len(queries), Manifest: ix.Manifest(), Conjunctive: opts.Search.Conjunctive}
	if opts.Search.BM25 != nil {
		rep.BM25 = *opts.Search.BM25
	} else {
		rep.BM25 = "default"
	}
	if opts.Mode == index.ModeHybrid {
		rep.Fusion = opts.Search.Fusion
		if rep.Fusion == "" {
			rep.Fusion = index.FusionRRF
		}
	}
	name := rep.Dataset
	start := time.Now()
	if err := ingestCorpus(ctx, ix, filepath.Join(opts.Dir, "corpus.jsonl"), name, rep); err != nil {
		return nil, err
	}
	rep.IngestSeconds = time.Since(start).Seconds()
	rep.IngestDocsPerSec = float64(rep.Documents) / rep.IngestSeconds

	prefix := "beir://" + name + "/"
	docOf := map[string]string{}
	err = ix.ForEachBlock(ctx, index.Restricted, func(h index.Hit) error {
		docOf[h.BlockID] = strings.TrimPrefix(h.Source, prefix)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Depth = opts.Depth
	sopts := opts.Search
	sopts.K = opts.Depth
	top10 := opts.Search
	top10.K = 10
	var lat, rankLat []time.Duration
	enc := json.NewEncoder(io.Discard)
	if opts.PerQuery != nil {
		enc = json.NewEncoder(opts.PerQuery)
	}
	rank := func(q string) ([]index.Ranked, error) {
		if sopts.Reranker == nil {
			return ix.Rank(ctx, q, &sopts)
		}
		hits, err := ix.Search(ctx, q, &sopts)
		out := make([]index.Ranked, len(hits))
		for i, h := range hits {
			out[i] = index.Ranked{BlockID: h.BlockID, Score: h.Score}
		}
		return out, err
	}
	for _, q := range queries {
		t0 := time.Now()
		hits, err := rank(q.text)
		if err != nil {
			return nil, fmt.Errorf("eval: query %s: %w", q.id, err)
		}
		rankLat = append(rankLat, time.Since(t0))
		t0 = time.Now()
		if _, err := ix.Search(ctx, q.text, &top10); err != nil {
			return nil, fmt.Errorf("eval: query %s: %w", q.id, err)
		}
		lat = append(lat, time.Since(t0))
		var ranked []string
		seen := map[string]bool{}
		for _, h := range hits {
			d := docOf[h.BlockID]
			if !seen[d] {
				seen[d] = true
				ranked = append(ranked, d)
			}
		}
		rels := qrels[q.id]
		pq := perQuery{QueryID: q.id, NDCG10: NDCG(ranked, rels, 10), Recall100: Recall(ranked, rels, 100),
			MRR10: MRR(ranked, rels, 10), LatencyMS: ms(lat[len(lat)-1]), Top10: ranked[:min(10, len(ranked))]}
		rep.NDCG10 += pq.NDCG10
		rep.Recall100 += pq.Recall100
		rep.MRR10 += pq.MRR10
		if err := enc.Encode(pq); err != nil {
			return nil, err
		}
	}
	if n := float64(len(queries)); n > 0 {
		rep.NDCG10 /= n
		rep.Recall100 /= n
		rep.MRR10 /= n
		rep.LatencyP50ms, rep.LatencyP95ms = percentiles(lat)
		rep.RankP50ms, rep.RankP95ms = percentiles(rankLat)
	}
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentiles returns the 50th and 95th percentiles of ds, in ms
// (nearest rank).
func percentiles(ds []time.Duration) (p50, p95 float64) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return ms(s[len(s)/2]), ms(s[len(s)*95/100])
}

// ingestCorpus ingests corpus.jsonl: _id names the document
// (beir://<dataset>/<_id>), title is its title, text its body.
func ingestCorpus(ctx context.Context, ix *index.Index, path, dataset string, rep *Report) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var batch []index.Input
	flush := func() error {
		res, errs, err := ix.IngestBatch(ctx, batch)
		if err != nil {
			return fmt.Errorf("eval: ingest %s: %w", path, err)
		}
		for i := range batch {
			if errs[i] != nil {
				rep.Failed++
				continue
			}
			rep.Documents++
			rep.Blocks += res[i].Blocks
		}
		batch = batch[:0]
		return nil
	}
	for line := 1; sc.Scan(); line++ {
		var doc struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil || doc.ID == "" {
			return fmt.Errorf("eval: %s:%d: want a JSON object with _id, title and text (%v)", path, line, err)
		}
		batch = append(batch, index.Input{Source: "beir://" + dataset + "/" + doc.ID, Name: doc.ID + ".txt",
			MediaType: "text/plain", Title: doc.Title, Data: []byte(doc.Text)})
		if len(batch) == 512 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("eval: read %s: %w", path, err)
	}
	return flush()
}

type query struct{ id, text string }

// readQueries returns the queries of queries.jsonl that have judgements, in
// file order.
func readQueries(path string, qrels map[string]map[string]int) ([]query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []query
	for line := 1; sc.Scan(); line++ {
		var q struct {
			ID   string `json:"_id"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil || q.ID == "" {
			return nil, fmt.Errorf("eval: %s:%d: want a JSON object with _id and text (%v)", path, line, err)
		}
		if _, ok := qrels[q.ID]; ok {
			out = append(out, query{q.ID, q.Text})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("eval: %s: no query has a judgement", path)
	}
	return out, nil
}

// readQrels reads "query-id corpus-id score" lines, tab separated, after a
// header line.
func readQrels(path string) (map[string]map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	out := map[string]map[string]int{}
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(strings.TrimRight(sc.Text(), "\r"), "\t")
		if line == 1 && len(fields) > 0 && fields[0] == "query-id" {
			continue
		}
		if len(fields) != 3 {
			return nil, fmt.Errorf("eval: %s:%d: want query-id, corpus-id, score separated by tabs", path, line)
		}
		score, err := strconv.Atoi(fields[2])
		if err != nil {
			return nil, fmt.Errorf("eval: %s:%d: score %q is not an integer", path, line, fields[2])
		}
		if out[fields[0]] == nil {
			out[fields[0]] = map[string]int{}
		}
		out[fields[0]][fields[1]] = score
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, errors.New("eval: " + path + ": no judgements")
	}
	return out, nil
}
