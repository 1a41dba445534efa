package eval

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "gocloud.dev/blob/fileblob"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/rerank"
)

func TestMetrics(t *testing.T) {
	rels := map[string]int{"a": 1, "b": 2, "z": 1} // z is never retrieved
	ranked := []string{"x", "b", "a", "y"}
	// DCG@10 = 2/log2(3) + 1/log2(4); IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4).
	dcg := 2/math.Log2(3) + 1/math.Log2(4)
	idcg := 2.0 + 1/math.Log2(3) + 1/math.Log2(4)
	if got := NDCG(ranked, rels, 10); math.Abs(got-dcg/idcg) > 1e-12 {
		t.Errorf("NDCG = %v, want %v", got, dcg/idcg)
	}
	if got := NDCG(ranked, rels, 1); got != 0 {
		t.Errorf("NDCG@1 = %v, want 0", got)
	}
	if got := Recall(ranked, rels, 100); math.Abs(got-2.0/3) > 1e-12 {
		t.Errorf("Recall = %v, want 2/3", got)
	}
	if got := MRR(ranked, rels, 10); got != 0.5 {
		t.Errorf("MRR = %v, want 0.5", got)
	}
	if NDCG(ranked, map[string]int{}, 10) != 0 || Recall(nil, rels, 100) != 0 || MRR(nil, rels, 10) != 0 {
		t.Error("empty cases must score 0")
	}
}

func write(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRun evaluates a three-document dataset end to end: the title of d1 is
// what makes it relevant to q1, so the context must reach the ranking.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "corpus.jsonl", `{"_id": "d1", "title": "Platypus venom", "text": "A study of spurs in monotremes."}
{"_id": "d2", "title": "Birds", "text": "Feathers and flight of birds."}
{"_id": "d3", "title": "Fish", "text": "Gills, fins and platypus-free rivers."}
`)
	write(t, dir, "queries.jsonl", `{"_id": "q1", "text": "venom of the platypus"}
{"_id": "q2", "text": "bird flight"}
{"_id": "q9", "text": "unjudged query"}
`)
	write(t, dir, "qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
	var per bytes.Buffer
	rep, err := Run(context.Background(), Options{Dir: dir, PerQuery: &per})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Documents != 3 || rep.Queries != 2 || rep.NDCG10 != 1 || rep.MRR10 != 1 || rep.Recall100 != 1 {
		t.Errorf("report %+v", rep)
	}
	if lines := strings.Count(per.String(), "\n"); lines != 2 || !strings.Contains(per.String(), `"top10":["d1"`) {
		t.Errorf("per-query output:\n%s", per.String())
	}
	// Malformed input names the file and line.
	write(t, dir, "qrels/bad.tsv", "query-id\tcorpus-id\tscore\nq1 d1 1\n")
	if _, err := Run(context.Background(), Options{Dir: dir, Split: "bad"}); err == nil || !strings.Contains(err.Error(), "bad.tsv:2") {
		t.Errorf("bad qrels: %v", err)
	}
	if _, err := Run(context.Background(), Options{Dir: dir, Mode: "colbert"}); err == nil {
		t.Error("mode colbert accepted")
	}
	// The dense and hybrid legs (hash/384 by default) find d1 for q1 too,
	// and a reranker on a loopback server reorders without losing it.
	for _, mode := range []string{index.ModeDense, index.ModeHybrid} {
		rep, err := Run(context.Background(), Options{Dir: dir, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Manifest.Embedder() != embed.Default || rep.MRR10 != 1 {
			t.Errorf("mode %s: %+v", mode, rep)
		}
	}
	srv := modelserver.Start(t)
	rr, _ := rerank.NewHTTP(srv.URL+"/rerank", rerank.Options{})
	rep, err = Run(context.Background(), Options{Dir: dir, Mode: index.ModeHybrid, Search: index.SearchOptions{Reranker: rr}, Reranker: "loopback"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MRR10 != 1 || rep.Reranker != "loopback" || rep.Depth != 100 || len(srv.Requests()) != 2*rep.Queries {
		t.Errorf("reranked: %+v, %d rerank requests", rep, len(srv.Requests()))
	}
}
