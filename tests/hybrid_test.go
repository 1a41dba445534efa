package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/embed/onnx"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/internal/onnxtest"
	"github.com/escurel/escurel/rebuild"
	"github.com/escurel/escurel/rerank"
)

func mustSpec(t *testing.T, s string) embed.Spec {
	t.Helper()
	spec, err := embed.ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func searchWith(t *testing.T, ix *index.Index, q string, opts index.SearchOptions) []index.Hit {
	t.Helper()
	hits, err := ix.Search(context.Background(), q, &opts)
	if err != nil {
		t.Fatalf("search %q %+v: %v", q, opts, err)
	}
	return hits
}

func ids(hits []index.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.BlockID
	}
	return out
}

// The dense leg embeds context + "\n" + body: a block whose body lacks the
// query's words is found by its title, in dense and hybrid mode, and with
// contextualize off it is not.
func TestDenseFindsBlockByTitle(t *testing.T) {
	docs := map[string]string{
		"/kb/ocelot.md": "# Ocelot husbandry\n\nFeed twice a day and keep the enclosure warm.\n",
		"/kb/heron.md":  "# Heron care\n\nWading birds need shallow water and fish.\n",
		"/kb/misc.md":   "# Misc\n\nNothing about wild cats here, only paperwork.\n",
	}
	for _, ctxMode := range []string{index.ContextStructural, index.ContextOff} {
		e := newEnv(t, index.Options{Contextualize: ctxMode})
		for src, d := range docs {
			e.ingest(src, d)
		}
		for _, mode := range []string{index.ModeDense, index.ModeHybrid} {
			hits := searchWith(t, e.ix, "ocelot husbandry", index.SearchOptions{Mode: mode, K: 3})
			var body []string
			for _, h := range hits {
				body = append(body, h.Body)
			}
			found := len(hits) > 0 && strings.HasPrefix(hits[0].Body, "Feed twice")
			if ctxMode == index.ContextStructural && !found {
				t.Errorf("%s mode, context on: best hits %q, want the ocelot body", mode, body)
			}
			if ctxMode == index.ContextOff && slices.ContainsFunc(hits, func(h index.Hit) bool { return strings.HasPrefix(h.Body, "Feed twice") && h.Score > 0.01 }) {
				t.Errorf("%s mode, context off: the body alone matched the title's words: %+v", mode, hits)
			}
		}
	}
}

// Every hybrid hit comes from a leg; explain says which, with ranks from 1;
// fusion is deterministic and ties go by the internal block order (the
// order of writing: here, of the sources).
func TestHybridExplainAndDeterminism(t *testing.T) {
	e := newEnv(t, index.Options{})
	for i := range 30 {
		// Pairs of identical bodies and titles in different documents:
		// exact ties.
		e.ingest(fmt.Sprintf("/d/%02d/r.txt", i), fmt.Sprintf("sensor %d drift calibration report number %d", i/2, i/2))
	}
	for _, fusion := range []string{index.FusionRRF, index.FusionConvex} {
		opts := index.SearchOptions{Mode: index.ModeHybrid, Fusion: fusion, K: 10, Explain: true, Depth: 20}
		first := searchWith(t, e.ix, "sensor 3 calibration", opts)
		if len(first) != 10 {
			t.Fatalf("%s: %d hits", fusion, len(first))
		}
		for i := 0; i < 20; i++ {
			if again := searchWith(t, e.ix, "sensor 3 calibration", opts); !slices.Equal(ids(again), ids(first)) {
				t.Fatalf("%s: run %d gave %v, first %v", fusion, i, ids(again), ids(first))
			}
		}
		for i, h := range first {
			x := h.Explain
			if x == nil || (x.BM25 == nil && x.Dense == nil) || x.Rerank != nil {
				t.Fatalf("%s hit %d: explain %+v", fusion, i, x)
			}
			if x.BM25 != nil && x.BM25.Rank < 1 || x.Dense != nil && x.Dense.Rank < 1 {
				t.Errorf("%s hit %d: ranks from 1: %+v %+v", fusion, i, x.BM25, x.Dense)
			}
			if i > 0 && h.Score == first[i-1].Score && h.Source < first[i-1].Source {
				t.Errorf("%s: tie at %d not in write order: %s after %s", fusion, i, h.Source, first[i-1].Source)
			}
			if i > 0 && h.Score > first[i-1].Score {
				t.Errorf("%s: scores not descending at %d", fusion, i)
			}
		}
		// The two blocks of "sensor 3" tie in both legs, where the one
		// written first ranks first; convex fusion keeps the tie, RRF
		// turns it into ranks.
		if (fusion == index.FusionConvex) != (first[0].Score == first[1].Score) || first[0].Source > first[1].Source || !strings.Contains(first[0].Body, "sensor 3 ") {
			t.Errorf("%s: top two %+v %+v", fusion, first[0], first[1])
		}
	}
	// RRF by hand: a block at rank r in one leg only scores 0.5/(60+r).
	hits := searchWith(t, e.ix, "sensor 3 calibration", index.SearchOptions{Mode: index.ModeHybrid, K: 30, Explain: true, Depth: 30})
	for _, h := range hits {
		want := 0.0
		if x := h.Explain.BM25; x != nil {
			want += 0.5 / float64(60+x.Rank)
		}
		if x := h.Explain.Dense; x != nil {
			want += 0.5 / float64(60+x.Rank)
		}
		if diff := h.Score - want; diff > 1e-12 || diff < -1e-12 {
			t.Fatalf("block %s: score %v, RRF by hand %v", h.BlockID, h.Score, want)
		}
	}
	// Without explain, no explain key.
	if h := searchWith(t, e.ix, "sensor", index.SearchOptions{Mode: index.ModeHybrid}); h[0].Explain != nil {
		t.Error("explain without asking")
	}
}

// Blocks above the clearance are left out inside the dense leg, so k
// allowed hits still come back, in dense and hybrid mode.
func TestDenseLegHonoursClearance(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	for i := range 12 {
		sens := index.Public
		if i%3 != 0 {
			sens = index.Restricted // 8 restricted, all closer to the query
		}
		text := "quarterly revenue forecast"
		if sens == index.Public {
			text = "revenue notes for the archive"
		}
		if _, err := e.ix.Ingest(ctx, index.Input{Source: fmt.Sprintf("/s/%d.txt", i), Data: []byte(text), Sensitivity: sens}); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{index.ModeDense, index.ModeHybrid} {
		hits := searchWith(t, e.ix, "quarterly revenue forecast", index.SearchOptions{Mode: mode, K: 4, Explain: true})
		if len(hits) != 4 {
			t.Errorf("%s: %d hits, want the 4 public ones", mode, len(hits))
		}
		for _, h := range hits {
			if strings.Contains(h.Body, "quarterly") {
				t.Errorf("%s: a restricted block reached a public caller: %+v", mode, h)
			}
		}
		all := searchWith(t, e.ix, "quarterly revenue forecast", index.SearchOptions{Mode: mode, K: 4, Clearance: index.Restricted})
		if len(all) != 4 || !strings.Contains(all[0].Body, "quarterly") {
			t.Errorf("%s with clearance: %+v", mode, all)
		}
	}
}

// An index whose embedder is a model behind an OpenAI-compatible server:
// ingest and search go through the protocol; the query carries the query
// prefix and blocks the document prefix; a reopen without settings reaches
// the recorded url, a new url is accepted and recorded, another model is
// refused with the command that fixes it.
func TestOpenAIEmbedderIndex(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 64 })
	spec := "openai:test-model?url=" + srv.URL + "/v1&query_prefix=query%3A+&document_prefix=passage%3A+&batch=2"
	e := newEnv(t, index.Options{Embedder: mustSpec(t, spec)})
	if m := e.ix.Manifest(); m.EmbedderModel != "openai:test-model" || m.EmbedderDim != 64 {
		t.Fatalf("manifest %+v: the dimension should come from the server", m)
	}
	e.ingest("/a.md", "# Alpha\n\nThe alpha block.\n\nSecond paragraph.\n")
	e.ingest("/b.md", "# Beta\n\nThe beta block.\n")
	if e.ix.DefaultMode() != index.ModeHybrid {
		t.Errorf("default mode with a trained model: %s", e.ix.DefaultMode())
	}
	hits := searchWith(t, e.ix, "beta", index.SearchOptions{Mode: index.ModeDense, K: 1})
	if len(hits) != 1 || hits[0].Body != "The beta block." {
		t.Fatalf("dense hits %+v", hits)
	}
	var sawQuery, sawPassage bool
	for _, r := range srv.Requests() {
		if r.Path != "/v1/embeddings" {
			t.Errorf("request to %s", r.Path)
		}
		if r.Inputs > 2 {
			t.Errorf("a request with %d texts, batch is 2", r.Inputs)
		}
	}
	// The server saw the prefixes: compare with the hash embedder's own
	// vectors of the prefixed texts, as the server computes them.
	h := embed.NewHash(64)
	want, _ := h.Embed(context.Background(), []string{"query: beta", "passage: [Beta]\nThe beta block."})
	sim := func(a, b []float32) (s float64) {
		for i := range a {
			s += float64(a[i]) * float64(b[i])
		}
		return
	}
	if got := hits[0].Score; got-sim(want[0], want[1]) > 1e-6 || sim(want[0], want[1])-got > 1e-6 {
		t.Errorf("dense score %v, want cos(query: …, passage: …) = %v", got, sim(want[0], want[1]))
	} else {
		sawQuery, sawPassage = true, true
	}
	if !sawQuery || !sawPassage {
		t.Error("prefixes not applied")
	}

	// Reopen without an embedder: the recorded spec, url included.
	e.opts = index.Options{}
	e.reopen()
	if got := searchWith(t, e.ix, "alpha", index.SearchOptions{Mode: index.ModeDense, K: 1}); !strings.Contains(got[0].Body, "alpha") {
		t.Errorf("after reopen: %+v", got)
	}
	// A mistyped url fails the search and does not stick.
	e.opts = index.Options{Embedder: mustSpec(t, "openai:test-model?retries=-1&url=http://127.0.0.1:1/v1")}
	e.reopen()
	if _, err := e.ix.Search(context.Background(), "alpha", &index.SearchOptions{Mode: index.ModeDense}); err == nil {
		t.Error("a search through a dead url succeeded")
	}
	e.opts = index.Options{}
	e.reopen()
	searchWith(t, e.ix, "alpha", index.SearchOptions{Mode: index.ModeDense})
	// The server moved: a new url is the same model, recorded once an
	// ingest has used it.
	srv2 := modelserver.Start(t)
	srv2.Set(func(s *modelserver.Server) { s.Dim = 64 })
	e.opts = index.Options{Embedder: mustSpec(t, "openai:test-model?url="+srv2.URL+"/v1")}
	e.reopen()
	searchWith(t, e.ix, "alpha", index.SearchOptions{Mode: index.ModeDense})
	if len(srv2.Requests()) != 1 {
		t.Errorf("the new server got %d requests", len(srv2.Requests()))
	}
	e.ingest("/c.md", "# Gamma\n\nThe gamma block.\n")
	e.opts = index.Options{}
	e.reopen()
	if mustSpec(t, e.ix.Manifest().EmbedderSpec).URL != srv2.URL+"/v1" {
		t.Errorf("the new url was not recorded: %s", e.ix.Manifest().EmbedderSpec)
	}
	e.ix.Close()
	// Another model, or the same without its prefixes' values, is refused.
	for _, other := range []string{"openai:other-model?url=" + srv.URL + "/v1", "hash", "openai:test-model?dim=32",
		"openai:test-model?query_prefix=q%3A+"} {
		_, err := index.Open(context.Background(), e.dir, &index.Options{Embedder: mustSpec(t, other)})
		var me *index.MismatchError
		if !errors.As(err, &me) || me.Option != "Embedder" {
			t.Errorf("open with %s: %v", other, err)
		}
	}
	e.open()
}

// A model server that never answers fails the ingest after the timeout,
// and nothing of the document is stored: no blob, no record, no rows.
func TestEmbedderTimeoutWritesNothing(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 16 })
	e := newEnv(t, index.Options{Embedder: mustSpec(t, "ollama:m?timeout=300ms&retries=-1&url="+srv.URL)})
	e.ingest("/kept.md", "# Kept\n\nAlready here.\n")
	srv.Set(func(s *modelserver.Server) { s.Hang = true })
	start := time.Now()
	_, err := e.ix.Ingest(context.Background(), index.Input{Source: "/new.md", Data: []byte("# New\n\nnever stored\n")})
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("gave up after %v", el)
	}
	st, err := e.ix.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Documents != 1 || st.Blocks != 1 || st.Embeddings != 1 {
		t.Errorf("after the failed ingest: %d documents, %d blocks, %d vectors", st.Documents, st.Blocks, st.Embeddings)
	}
	recs, _ := e.ix.Blobs().Records(context.Background())
	if len(recs) != 1 {
		t.Errorf("%d records in the blob store, want 1", len(recs))
	}
	if blobs := blobCount(t, e.ix.Blobs()); blobs != 1 {
		t.Errorf("%d blobs stored, want 1", blobs)
	}
	srv.Set(func(s *modelserver.Server) { s.Hang = false })
	e.ingest("/new.md", "# New\n\nstored now\n")
}

// The reranker gets each hit's context and body joined by one newline,
// only reorders, and a reranker answering for fewer passages keeps the
// others after, in their order.
func TestRerank(t *testing.T) {
	srv := modelserver.Start(t)
	e := newEnv(t, index.Options{})
	e.ingest("/guide.md", "# Guide\n\n## Setup\n\nInstall the sensor driver.\n\n## Usage\n\nRead the sensor values every second.\n")
	e.ingest("/plain.txt", "sensor values and sensor driver notes")
	rr, err := rerank.NewHTTP(srv.URL+"/rerank", rerank.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain := searchWith(t, e.ix, "sensor driver", index.SearchOptions{K: 10})
	got := searchWith(t, e.ix, "sensor driver", index.SearchOptions{K: 10, Reranker: rr, Explain: true})
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Query != "sensor driver" {
		t.Fatalf("requests %+v", reqs)
	}
	want := map[string]bool{"[Guide › Setup]\nInstall the sensor driver.": true, "[Guide › Usage]\nRead the sensor values every second.": true,
		"[plain]\nsensor values and sensor driver notes": true}
	for _, p := range reqs[0].Passages {
		if !want[p] {
			t.Errorf("passage %q, want one of %v", p, want)
		}
	}
	if len(reqs[0].Passages) != 3 {
		t.Errorf("%d passages", len(reqs[0].Passages))
	}
	a, b := ids(plain), ids(got)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("rerank changed the hit set: %v vs %v", a, b)
	}
	for i, h := range got {
		if h.Explain == nil || h.Explain.Rerank == nil || h.Explain.Rerank.Rank != i+1 || h.Explain.BM25 == nil {
			t.Errorf("hit %d explain %+v", i, h.Explain)
		}
	}
	// Cohere shape, answering for the first passage only.
	srv.Set(func(s *modelserver.Server) { s.RerankDrop = 2 })
	rr2, _ := rerank.NewHTTP(srv.URL+"/v1/rerank", rerank.Options{Model: "m"})
	part := searchWith(t, e.ix, "sensor driver", index.SearchOptions{K: 10, Reranker: rr2})
	if len(part) != 3 || part[0].BlockID != plain[0].BlockID || part[1].BlockID != plain[1].BlockID || part[2].BlockID != plain[2].BlockID {
		t.Errorf("partial rerank: %v, plain %v", ids(part), ids(plain))
	}
	// A failing reranker fails the search; it never silently skips.
	srv.Set(func(s *modelserver.Server) { s.Fail500 = 100 })
	rr3, _ := rerank.NewHTTP(srv.URL+"/rerank", rerank.Options{Retries: -1})
	if _, err := e.ix.Search(context.Background(), "sensor", &index.SearchOptions{Reranker: rr3}); err == nil {
		t.Error("a failing reranker was ignored")
	}
}

// Dense and hybrid modes need vectors: an index built without them says
// what to do.
func TestDenseModeWithoutVectors(t *testing.T) {
	e := newEnv(t, index.Options{Embedder: embed.None})
	e.ingest("/a.txt", "alpha")
	_, err := e.ix.Search(context.Background(), "alpha", &index.SearchOptions{Mode: index.ModeDense})
	if !errors.Is(err, index.ErrNoVectors) || !strings.Contains(err.Error(), "use mode bm25") {
		t.Errorf("err = %v", err)
	}
	for _, bad := range []index.SearchOptions{{Mode: "vector"}, {Fusion: "max"}, {Alpha: 1.5}, {Alpha: -1}, {RRFK: -1}, {Depth: -1},
		{Fusion: index.FusionRRF}, {Mode: index.ModeBM25, Alpha: 0.3}} { // fusion settings outside hybrid mode
		if _, err := e.ix.Search(context.Background(), "alpha", &bad); err == nil {
			t.Errorf("options %+v accepted", bad)
		}
	}
}

// An index whose vectors come from an in-process ONNX model: ingest embeds
// through ONNX Runtime, dense search finds the block, and the manifest
// records the model with the dimension the model declares.
func TestONNXEmbedderIndex(t *testing.T) {
	if err := onnx.RuntimeAvailable(); err != nil {
		t.Skipf("ONNX Runtime not available (%v): run `make onnxruntime` and set %s", err, onnx.RuntimeEnv)
	}
	dir := t.TempDir()
	if err := onnxtest.Write(dir); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, index.Options{Embedder: mustSpec(t, "onnx:test-model?path="+dir)})
	if m := e.ix.Manifest(); m.EmbedderModel != "onnx:test-model" || m.EmbedderDim != onnxtest.Dim {
		t.Fatalf("manifest %+v", m)
	}
	e.ingest("/care.txt", "feed the ocelot")
	e.ingest("/text.txt", "a long text with many words")
	// The toy model's vectors mean nothing, but a query equal to a
	// block's embedded text (context, newline, body) has cosine 1 with it.
	hits := searchWith(t, e.ix, "[care]\nfeed the ocelot", index.SearchOptions{Mode: index.ModeDense, K: 2})
	if len(hits) != 2 || hits[0].Body != "feed the ocelot" || hits[0].Score < 0.99999 {
		t.Errorf("dense hits %+v", hits)
	}
	if e.ix.DefaultMode() != index.ModeHybrid {
		t.Errorf("default mode %s", e.ix.DefaultMode())
	}
}

// An embedder that cannot be built (its key gone from the environment)
// fails dense search and ingest, naming the variable, and nothing else.
func TestEmbedderKeyMissing(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 16 })
	t.Setenv("ESCUREL_TEST_KEY", "sk-test")
	e := newEnv(t, index.Options{Embedder: mustSpec(t, "openai:m?key_env=ESCUREL_TEST_KEY&url="+srv.URL+"/v1")})
	e.ingest("/a.txt", "alpha beta")
	os.Unsetenv("ESCUREL_TEST_KEY")
	e.opts = index.Options{}
	e.reopen()
	if hits := searchWith(t, e.ix, "alpha", index.SearchOptions{Mode: index.ModeBM25}); len(hits) != 1 {
		t.Errorf("bm25 without the key: %+v", hits)
	}
	if _, err := e.ix.Stats(context.Background()); err != nil {
		t.Error(err)
	}
	_, err := e.ix.Search(context.Background(), "alpha", &index.SearchOptions{Mode: index.ModeDense})
	if err == nil || !strings.Contains(err.Error(), "ESCUREL_TEST_KEY") {
		t.Errorf("dense without the key: %v", err)
	}
	if _, err := e.ix.Ingest(context.Background(), index.Input{Source: "/b.txt", Data: []byte("gamma")}); err == nil {
		t.Error("ingest without the key succeeded")
	}
}

// A rebuild given only a new url for the same model keeps the recorded
// prefixes and dimension.
func TestRebuildKeepsEmbedderIdentity(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 32 })
	e := newEnv(t, index.Options{Embedder: mustSpec(t, "openai:m?query_prefix=q%3A+&document_prefix=p%3A+&url="+srv.URL+"/v1")})
	e.ingest("/a.txt", "alpha beta")
	e.ix.Close()
	srv2 := modelserver.Start(t)
	srv2.Set(func(s *modelserver.Server) { s.Dim = 32 })
	_, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: blobsOf(e),
		Index: index.Options{Embedder: mustSpec(t, "openai:m?url="+srv2.URL+"/v1"), Contextualize: index.ContextOff}})
	if err != nil {
		t.Fatal(err)
	}
	e.opts = index.Options{}
	e.open()
	got := e.ix.Manifest().Embedder()
	if got.QueryPrefix != "q: " || got.DocumentPrefix != "p: " || got.Dim != 32 || got.URL != srv2.URL+"/v1" {
		t.Errorf("embedder after rebuild: %+v", got)
	}
}

// The onnx model's files are part of its identity: an index records their
// fingerprint, and a path to other files of the same dimension fails
// dense search and ingest, naming both fingerprints, while BM25 works.
func TestONNXFingerprint(t *testing.T) {
	if err := onnx.RuntimeAvailable(); err != nil {
		t.Skipf("ONNX Runtime not available (%v): run `make onnxruntime` and set %s", err, onnx.RuntimeEnv)
	}
	dir, other := t.TempDir(), t.TempDir()
	if err := onnxtest.Write(dir); err != nil {
		t.Fatal(err)
	}
	if err := onnxtest.Write(other); err != nil {
		t.Fatal(err)
	}
	// Another tokenizer: the same vocabulary, one word renamed.
	tok, _ := os.ReadFile(filepath.Join(other, "tokenizer.json"))
	os.WriteFile(filepath.Join(other, "tokenizer.json"), []byte(strings.Replace(string(tok), `"ocelot"`, `"jaguar"`, 1)), 0o644)
	e := newEnv(t, index.Options{Embedder: mustSpec(t, "onnx:test-model?path="+dir)})
	if fp := e.ix.Manifest().Embedder().Fingerprint; len(fp) != 16 {
		t.Fatalf("no fingerprint recorded: %+v", e.ix.Manifest())
	}
	e.ingest("/a.txt", "feed the ocelot")
	e.opts = index.Options{Embedder: mustSpec(t, "onnx:test-model?path="+other)}
	e.reopen()
	if hits := searchWith(t, e.ix, "ocelot", index.SearchOptions{Mode: index.ModeBM25}); len(hits) != 1 {
		t.Errorf("bm25: %+v", hits)
	}
	_, err := e.ix.Search(context.Background(), "ocelot", &index.SearchOptions{Mode: index.ModeDense})
	if err == nil || !strings.Contains(err.Error(), "not the ones the index was built with") {
		t.Errorf("dense with other model files: %v", err)
	}
	e.opts = index.Options{Embedder: mustSpec(t, "onnx:test-model?path="+dir)}
	e.reopen()
	searchWith(t, e.ix, "ocelot", index.SearchOptions{Mode: index.ModeDense})
}
