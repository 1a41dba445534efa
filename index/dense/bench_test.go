package dense

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/benchcorpus"
)

// The dense benchmark's data: hash/384 vectors (the offline default
// embedder, and what make bench-dense indexes) of real passages, the same
// ones bench/fts builds (internal/benchcorpus): SciFact abstracts, the shared FastAPI Markdown, then the text
// files under /usr/share/doc, cut into windows of about 150 words; past
// the real passages, perturbed copies (15% of the words replaced by words
// of the pool). Real text rather than random vectors, because quantization
// is judged by how well it keeps the neighbours of real queries (SciFact
// claims), and near-duplicate passages (the copies) are the hard case for
// ranking: many scores close together at the top.
//
// ESCUREL_DENSE_N sets the passages (default 100,000);
// ESCUREL_DENSE_CACHE names a directory where the vectors of each N are
// kept between runs (embedding 1M passages takes minutes).

// benchData is the shared test data.
const benchData = "../../../shared/data"

func benchN(b *testing.B) int {
	n := 100000
	if s := os.Getenv("ESCUREL_DENSE_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("ESCUREL_DENSE_N=%q: not a positive integer", s)
		}
		n = v
	}
	return n
}

// benchPassages returns n passage texts ("[title]\nbody") of the corpus
// bench/fts builds (internal/benchcorpus).
func benchPassages(n int) []string {
	pool := benchcorpus.Passages(benchData, n)
	out := make([]string, len(pool))
	for i, p := range pool {
		out[i] = "[" + p.Title + "]\n" + p.Body
	}
	return out
}

// benchVectors returns n hash/384 vectors of benchPassages, row after row,
// from the cache when ESCUREL_DENSE_CACHE has them.
func benchVectors(b *testing.B, n int) []float32 {
	const dim = embed.DefaultHashDim
	cache := ""
	if dir := os.Getenv("ESCUREL_DENSE_CACHE"); dir != "" {
		cache = filepath.Join(dir, fmt.Sprintf("hash%d-%d.f32", dim, n))
		if data, err := os.ReadFile(cache); err == nil && len(data) == 4*n*dim {
			vecs := make([]float32, n*dim)
			for i := range vecs {
				vecs[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
			return vecs
		}
	}
	if _, err := os.Stat(filepath.Join(benchData, "scifact", "corpus.jsonl")); err != nil {
		b.Skipf("the shared test data is not in %s: %v", benchData, err)
	}
	texts := benchPassages(n)
	if len(texts) < n {
		b.Fatalf("only %d passages", len(texts))
	}
	vecs := make([]float32, n*dim)
	emb := embed.NewHash(dim)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				v, err := emb.Embed(context.Background(), texts[i:i+1])
				if err != nil {
					panic(err)
				}
				copy(vecs[i*dim:], v[0])
			}
		}()
	}
	wg.Wait()
	if cache != "" {
		data := make([]byte, 4*len(vecs))
		for i, x := range vecs {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
		if err := os.WriteFile(cache, data, 0o644); err != nil {
			b.Logf("cache: %v", err)
		}
	}
	return vecs
}

// benchQueries returns hash/384 vectors of the first n SciFact claims.
func benchQueries(b *testing.B, n int) [][]float32 {
	f, err := os.Open(filepath.Join(benchData, "scifact", "queries.jsonl"))
	if err != nil {
		b.Skipf("the shared test data is not in %s: %v", benchData, err)
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(texts) < n {
		var q struct{ Text string }
		if json.Unmarshal(sc.Bytes(), &q) == nil && q.Text != "" {
			texts = append(texts, q.Text)
		}
	}
	qs, err := embed.NewHash(embed.DefaultHashDim).Embed(context.Background(), texts)
	if err != nil {
		b.Fatal(err)
	}
	return qs
}

// BenchmarkRecall is issue 16's dense target: top 10 (ESCUREL_DENSE_K;
// hybrid search asks the dense leg for 100) over ESCUREL_DENSE_N vectors
// of 384 dimensions (default 100,000), 200 queries, the exact scan
// and the quantized search in the same run, each query on both in turn.
// It reports each one's p50 and p95 in ms and the quantized search's
// recall@k against the exact top k, and the CPU time of a query on all
// cores together, which a loaded machine inflates less than the wall
// time (run it with -benchtime 1x: each iteration is one pass over the
// queries).
func BenchmarkRecall(b *testing.B) {
	n := benchN(b)
	vecs := benchVectors(b, n)
	qs := benchQueries(b, 200)
	const dim = embed.DefaultHashDim
	ids, levels := make([]int64, n), make([]uint8, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	t0 := time.Now()
	ix, err := Build(dim, ids, levels, vecs)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d vectors: built in %v", n, time.Since(t0))
	ctx := context.Background()
	k := 10
	if s := os.Getenv("ESCUREL_DENSE_K"); s != "" {
		if k, err = strconv.Atoi(s); err != nil || k <= 0 {
			b.Fatalf("ESCUREL_DENSE_K=%q: not a positive integer", s)
		}
	}
	var exact, quant []time.Duration
	var exactCPU, quantCPU time.Duration
	found, want := 0, 0
	b.ResetTimer()
	for range b.N {
		for _, q := range qs {
			t, c := time.Now(), cpuTime()
			e, err := ix.search(ctx, q, k, 0, nil, 0, exactScan)
			if err != nil {
				b.Fatal(err)
			}
			exact, exactCPU = append(exact, time.Since(t)), exactCPU+cpuTime()-c
			t, c = time.Now(), cpuTime()
			a, err := ix.search(ctx, q, k, 0, nil, 0, quantizedScan)
			if err != nil {
				b.Fatal(err)
			}
			quant, quantCPU = append(quant, time.Since(t)), quantCPU+cpuTime()-c
			found += overlap(e, a)
			want += len(e)
		}
	}
	b.StopTimer()
	b.ReportMetric(pctMs(exact, 50), "exact-p50-ms")
	b.ReportMetric(pctMs(exact, 95), "exact-p95-ms")
	b.ReportMetric(pctMs(quant, 50), "quant-p50-ms")
	b.ReportMetric(pctMs(quant, 95), "quant-p95-ms")
	b.ReportMetric(float64(exactCPU.Microseconds())/1000/float64(len(exact)), "exact-cpu-ms")
	b.ReportMetric(float64(quantCPU.Microseconds())/1000/float64(len(quant)), "quant-cpu-ms")
	b.ReportMetric(float64(found)/float64(max(want, 1)), fmt.Sprintf("recall@%d", k))
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the CPU time the process has used, all threads: on a loaded
// machine it tells the work apart from the wait for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// overlap counts the blocks of got that are in want.
func overlap(want, got []Hit) int {
	n := 0
	for _, g := range got {
		for _, w := range want {
			if g.Block == w.Block {
				n++
				break
			}
		}
	}
	return n
}

func pctMs(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)].Microseconds()) / 1000
}

// BenchmarkCandidates is how the candidates of stage 1 were chosen: the
// quantized search's recall@10 and wall p50 with stage 1 keeping 1%, 2%
// and 4% of ESCUREL_DENSE_N vectors (at least 1,000), printed one line
// each (-benchtime 1x).
func BenchmarkCandidates(b *testing.B) {
	n := benchN(b)
	vecs := benchVectors(b, n)
	qs := benchQueries(b, 200)
	ix, err := Build(embed.DefaultHashDim, ids1(n), make([]uint8, n), vecs)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	exact := make([][]Hit, len(qs))
	for i, q := range qs {
		exact[i], _ = ix.search(ctx, q, 10, 0, nil, 0, exactScan)
	}
	defer func(a, b int) { candShare, candMin = a, b }(candShare, candMin)
	for range b.N {
		for _, share := range []int{100, 50, 25} {
			candShare, candMin = share, 1000
			found := 0
			var d []time.Duration
			for i, q := range qs {
				t := time.Now()
				a, _ := ix.search(ctx, q, 10, 0, nil, 0, quantizedScan)
				d = append(d, time.Since(t))
				found += overlap(exact[i], a)
			}
			fmt.Printf("%d vectors, %d candidates: recall@10 %.4f, p50 %.2f ms\n", n, candidates(10, n), float64(found)/float64(10*len(qs)), pctMs(d, 50))
		}
	}
}
