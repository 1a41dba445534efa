// Command fts benchmarks escurel's full-text index against bleve (v2.6.3,
// BM25, English analyzer) and SQLite FTS5 (mattn/go-sqlite3, bm25()) on the
// same passages and queries:
//
//	go run -tags sqlite_fts5 . -n 100000
//
// Each engine builds its index in a child process that reads the corpus
// from a file in batches (ingest rate; peak RSS, the child's own and over
// a baseline, the median peak of three processes that only read the file;
// corpusfile.go); then one process opens all three and runs the queries
// interleaved (each query on each engine in turn, after one warm-up
// pass), adds 1,000 passages and deletes 21, one at a time (their median
// is "delete one"); then each engine churns
// (-churn rounds: delete 10 % of the passages, ingest them again) and is
// closed, and its files are measured again. Files are what the disk pays
// (allocated blocks, as du counts). Every number is also given as a ratio
// to the best peer of the same run, and each of issue 16's targets gets a
// verdict line. See the README's benchmark section.
//
// Environment of a build child: BENCH_MEMTRACE=1 prints each new peak of
// its RSS with the Go runtime's share, the DuckDB files' sizes and the
// batch it was in (memtrace.go), BENCH_MEMTRACE=all a line every half
// second (BENCH_MEMTRACE_MS=N: every N ms); BENCH_MEMPROFILE=FILE writes a heap profile after the build;
// BENCH_MEMPROFILE_PEAK=FILE one at the Go heap's largest live size (memtrace.go);
// BENCH_MEMLIMIT=SIZE gives escurel that Options.MemoryLimit (fixed).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

var (
	nFlag      = flag.Int("n", 100000, "passages")
	queriesN   = flag.Int("queries", 200, "queries (SciFact claims)")
	work       = flag.String("work", "", "work directory (default: a temporary one, removed at the end)")
	shared     = flag.String("shared", "../../../shared/data", "the shared test data")
	enginesF   = flag.String("engines", strings.Join(engineNames, ","), "engines to run")
	memBlobs   = flag.Bool("mem-blobs", false, "give escurel a mem:// blob store (not durable: shows the index's own cost)")
	blobLoose  = flag.Bool("blob-loose", false, "give escurel's new file:// blob store the loose layout (one file per blob and record; blobstore.OpenOptions.Loose) instead of packs, the default")
	jsonOut    = flag.String("json", "", "also write the results as JSON to this file")
	childMode  = flag.String("child", "", "internal: corpus | build | baseline")
	childName  = flag.String("engine", "", "internal: the engine a child builds")
	corpusF    = flag.String("corpus", "", "internal: the corpus file a child reads (corpusfile.go)")
	cpuProfile = flag.String("cpuprofile", "", "with -child build: write a CPU profile of the build here; in a compare run: of the timed query pass; with -serve: profiles of the searches, FILE.local and FILE.http")
	switchF    = flag.Bool("switch", false, "instead of comparing engines: search escurel during a live rebuild and its switch (switch.go)")
	writesF    = flag.Int("writes", -1, "instead of comparing engines: on the indexes already built in -work (and written by earlier rounds), for rounds K, K+1, K+2 add the round's passages (the 1,000 past -n + 1,000 × round) and delete p(n/2+21+round) (the normal run deletes p(n/2) to p(n/2+20)), timed; with -cpuprofile FILE, profiles in FILE.ENGINE.add.R and .delete.R for round R")
	reuseF     = flag.Bool("reuse", false, "with -work: keep an engine's index built by an earlier run with the same -n (its build figures are read back from built.json) instead of building it again")
	serveF     = flag.Bool("serve", false, "instead of comparing engines: escurel serve over HTTP against in-process search, throughput, and a live switch (serve.go)")
	churnF     = flag.Int("churn", 10, "after the writes, rounds of churn (delete 10 % of the passages, ingest them again) before measuring the files again; 0: none")
)

// batchSize is the passages per write batch, for every engine.
const batchSize = 1000

// deleteSamples is how many passages each engine deletes, one delete
// each, timed one by one: the median is the "delete one" figure (one
// delete alone was a single noisy sample: 13.08 ms where 60 deletes had a
// median of 4.97 on the same index).
const deleteSamples = 21

// result is one engine's measurements.
type result struct {
	Engine       string  `json:"engine"`
	IngestPerSec float64 `json:"ingest_passages_per_s"`
	QueryP50ms   float64 `json:"query_p50_ms"`
	QueryP95ms   float64 `json:"query_p95_ms"`
	// Add1000ms is adding 1,000 passages to the built index until the
	// work it caused is done: for escurel, its background full-text
	// merges too (Index.WaitForMerges); AddVisibleMs, until the add
	// returned (searchable; for escurel, merges still to run).
	Add1000ms    float64 `json:"add_1000_ms"`
	AddVisibleMs float64 `json:"add_visible_ms,omitempty"`
	// DeleteMs is the median of deleteSamples deletes of one passage each
	// (durable, one after the other, right after the add); DeleteFirstMs,
	// the first of them (what a process loads on its first delete);
	// DeleteP90ms, their 90th percentile.
	DeleteMs      float64 `json:"delete_one_ms"`
	DeleteFirstMs float64 `json:"delete_first_ms,omitempty"`
	DeleteP90ms   float64 `json:"delete_p90_ms,omitempty"`
	FileMB        float64 `json:"file_mb"`          // allocated on disk (st_blocks), after the build
	FileApparent  float64 `json:"file_apparent_mb"` // the files' sizes
	ChurnMB       float64 `json:"churn_file_mb"`    // allocated after -churn rounds
	ChurnSec      float64 `json:"churn_s"`
	// RSSMB is the build child's peak resident set (VmHWM) less
	// BaselineMB; BuildPeakMB that peak itself.
	RSSMB       float64 `json:"rss_mb"`
	BuildPeakMB float64 `json:"build_peak_mb"`
	// BaselineMB is the median peak (VmHWM) of baselineRuns
	// corpus-reading children: what a process of this binary that only
	// reads the corpus in batches takes, subtracted from every build's
	// peak (one such child ranged 51-78 MB from run to run, with the
	// Go collector's timing).
	BaselineMB float64 `json:"baseline_mb"`
	Hits       int     `json:"hits"` // total hits over all queries, a sanity check
	// Recall10 is the share of the exact top 10 (the dense leg scanning
	// every vector) that the timed search returns, over all queries: for
	// the escurel engines of bench-dense only.
	Recall10 *float64 `json:"recall_at_10,omitempty"`
}

func main() {
	flag.Parse()
	switch *childMode {
	case "corpus":
		if err := writeCorpusFile(*corpusF, corpus(*shared, *nFlag)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	case "baseline":
		if err := readCorpusFile(*corpusF, batchSize, func([]Passage) error { return nil }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		printPeak()
		return
	case "build":
		if err := build(*childName, *work); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		printPeak()
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// build is a child: it indexes the corpus in batches, read from the
// corpus file, closes the engine and prints the seconds of both (the heap
// profile of BENCH_MEMPROFILE between them is not counted).
func build(name, dir string) error {
	e, err := openEngine(name, dir, *memBlobs)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if os.Getenv("BENCH_MEMTRACE") != "" {
		stop := memTrace(dir)
		defer stop()
	}
	if p := os.Getenv("BENCH_MEMPROFILE_PEAK"); p != "" {
		stop := peakHeapProfile(p)
		defer stop()
	}
	start := time.Now()
	batches := 0
	add := func(ps []Passage) error {
		batches++
		setPhase(fmt.Sprintf("batch %d", batches))
		return e.Add(ps)
	}
	if err := readCorpusFile(*corpusF, batchSize, add); err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if p := os.Getenv("BENCH_MEMPROFILE"); p != "" {
		f, _ := os.Create(p)
		runtime.GC()
		pprof.WriteHeapProfile(f)
		f.Close()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "heap in use %d MB, sys %d MB\n", ms.HeapInuse>>20, ms.Sys>>20)
	}
	// The build ends when Close returns: what an engine leaves for Close
	// (escurel: the last batch's merges, the file's rewrite) is part of
	// it, so the seconds count it too.
	closeStart := time.Now()
	setPhase("close")
	if err := e.Close(); err != nil {
		return err
	}
	closeSecs := time.Since(closeStart).Seconds()
	fmt.Fprintf(os.Stderr, "%s: batches %.1f s, Close %.1f s\n", name, secs, closeSecs)
	fmt.Printf("%f\n", secs+closeSecs)
	return nil
}

// child runs this program as a child and returns its output and peak RSS
// in MB: the VmHWM it printed last (printPeak), else its rusage's maxrss,
// which starts at the parent's RSS when the child execs.
func child(args ...string) (string, float64, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", 0, fmt.Errorf("child %v: %w", args, err)
	}
	text := strings.TrimSpace(string(out))
	if i := strings.LastIndex(text, peakPrefix); i >= 0 {
		var kb float64
		if _, err := fmt.Sscanf(text[i+len(peakPrefix):], "%f", &kb); err == nil {
			return strings.TrimSpace(text[:i]), kb / 1024, nil
		}
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return text, float64(ru.Maxrss) / 1024, nil
}

const peakPrefix = "peak-rss-kb "

// baselineRuns is how many corpus-reading children baseline runs.
const baselineRuns = 3

// baseline runs baselineRuns corpus-reading children one after another
// and returns the median of their peaks (MB) and the peaks in run order.
// One child's peak moved 51-78 MB from run to run (when the Go collector
// ran against the batches it read), and the build figure with it; the
// median of three leaves out one outlier either way.
func baseline(common []string) (float64, []float64, error) {
	var peaks []float64
	for range baselineRuns {
		_, rss, err := child(append([]string{"-child", "baseline"}, common...)...)
		if err != nil {
			return 0, nil, err
		}
		peaks = append(peaks, rss)
	}
	return median(peaks), peaks, nil
}

// median is the middle value of v (the mean of the two middle ones for
// an even count), v left unsorted; 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mbList is v as "51, 57 and 78 MB".
func mbList(v []float64) string {
	var b strings.Builder
	for i, x := range v {
		switch {
		case i == 0:
		case i == len(v)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.0f", x)
	}
	return b.String() + " MB"
}

// printPeak prints the process's peak resident set (VmHWM, which exec
// resets) for child.
func printPeak() {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			fmt.Printf("\n%s%s\n", peakPrefix, f[1])
		}
	}
}

func run() error {
	dir := *work
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("/work", "bench-fts-*"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	if *switchF {
		return switchBench(dir)
	}
	if *serveF {
		return serveBench(dir)
	}
	if *writesF >= 0 {
		return writesBench(dir, *writesF)
	}
	names := strings.Split(*enginesF, ",")
	common, err := buildArgs(dir)
	if err != nil {
		return err
	}
	if *memBlobs {
		common = append(common, "-mem-blobs")
	}
	if *blobLoose {
		common = append(common, "-blob-loose")
	}
	baseRSS, basePeaks, err := baseline(common)
	if err != nil {
		return err
	}
	fmt.Printf("%d passages; corpus-reading process peak RSS %.0f MB (the median of %s), subtracted from each build's peak\n", *nFlag, baseRSS, mbList(basePeaks))
	res := map[string]*result{}
	reused := map[string]bool{}
	for _, name := range names {
		if shares[name] != "" {
			res[name] = &result{Engine: name}
			continue
		}
		edir := filepath.Join(dir, name)
		marker := filepath.Join(dir, name+".built.json")
		if *reuseF {
			if r, ok := readBuilt(marker); ok {
				res[name], reused[name] = r, r.Add1000ms > 0
				fmt.Printf("reusing %s built earlier (%.0f passages/s)\n", name, r.IngestPerSec)
				continue
			}
		}
		os.RemoveAll(edir)
		os.MkdirAll(edir, 0o755)
		out, rss, err := child(append([]string{"-child", "build", "-engine", name, "-work", edir}, common...)...)
		if err != nil {
			return err
		}
		var secs float64
		fmt.Sscanf(out, "%f", &secs)
		app, alloc := diskUsage(edir)
		res[name] = &result{Engine: name, IngestPerSec: float64(*nFlag) / secs,
			RSSMB: rss - baseRSS, BuildPeakMB: rss, BaselineMB: baseRSS,
			FileMB: float64(alloc) / 1e6, FileApparent: float64(app) / 1e6}
		fmt.Printf("built %s in %.1f s: %.1f MB on disk (apparent %.1f); peak RSS %.0f MB, %.0f over the baseline's %.0f\n  %s\n",
			name, secs, res[name].FileMB, res[name].FileApparent, rss, rss-baseRSS, baseRSS, breakdown(edir))
		if *reuseF {
			writeBuilt(marker, res[name])
		}
	}

	engines := map[string]Engine{}
	for _, name := range names {
		if of := shares[name]; of != "" {
			base, ok := engines[of].(*escurelEngine)
			if !ok {
				return fmt.Errorf("%s searches %s's index: list %s before it", name, of, of)
			}
			engines[name] = &view{ix: base.ix, mode: strings.TrimPrefix(name, "escurel-")}
			continue
		}
		e, err := openEngine(name, filepath.Join(dir, name), *memBlobs)
		if err != nil {
			return err
		}
		engines[name] = e
	}
	closed := map[string]bool{} // closed by the churn, to measure its files
	defer func() {
		for name, e := range engines {
			if shares[name] == "" && !closed[name] {
				e.Close()
			}
		}
	}()
	qs := queries(*shared, *queriesN)
	lat := map[string][]time.Duration{}
	found, want := map[string]int{}, map[string]int{}
	for pass := 0; pass < 2; pass++ { // pass 0 warms up
		if pass == 1 && *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return err
			}
			pprof.StartCPUProfile(f)
		}
		for i, q := range qs {
			for j := range names {
				name := names[(i+j)%len(names)] // rotate who goes first
				t0 := time.Now()
				n, err := engines[name].Search(q)
				if err != nil {
					return fmt.Errorf("%s: query %q: %w", name, q, err)
				}
				if pass == 1 {
					lat[name] = append(lat[name], time.Since(t0))
					res[name].Hits += n
				}
				if rc, ok := engines[name].(recaller); ok && pass == 0 && slices.Contains(denseEngines, name) {
					f, w, err := recall(rc, q)
					if err != nil {
						return fmt.Errorf("%s: query %q: %w", name, q, err)
					}
					found[name] += f
					want[name] += w
				}
			}
		}
	}
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	extra := corpusTail(*shared, *nFlag, *nFlag+batchSize)
	// The passages each engine deletes, one at a time, after its add.
	deleted := make([]string, deleteSamples)
	for i := range deleted {
		deleted[i] = fmt.Sprintf("p%d", *nFlag/2+i)
	}
	for _, name := range names {
		r, e := res[name], engines[name]
		r.QueryP50ms, r.QueryP95ms = pct(lat[name], 50), pct(lat[name], 95)
		if want[name] > 0 {
			rec := float64(found[name]) / float64(want[name])
			r.Recall10 = &rec
		}
		if reused[name] {
			continue // its writes were timed (and done) by the run that built it
		}
		if shares[name] != "" {
			continue // another engine's index: its writes are that engine's
		}
		t0 := time.Now()
		if err := e.Add(extra); err != nil {
			return fmt.Errorf("%s: add: %w", name, err)
		}
		r.AddVisibleMs = ms(time.Since(t0))
		if err := waitMerges(e); err != nil {
			return fmt.Errorf("%s: add: %w", name, err)
		}
		r.Add1000ms = ms(time.Since(t0))
		if r.Add1000ms-r.AddVisibleMs >= 0.05 {
			fmt.Printf("%s: add 1,000 returned (searchable) after %.1f ms; its background merges done after %.1f ms\n", name, r.AddVisibleMs, r.Add1000ms)
		}
		var dels []time.Duration
		for _, id := range deleted {
			t0 = time.Now()
			if err := e.Delete(id); err != nil {
				return fmt.Errorf("%s: delete: %w", name, err)
			}
			dels = append(dels, time.Since(t0))
		}
		r.DeleteMs, r.DeleteP90ms, r.DeleteFirstMs = pct(dels, 50), pct(dels, 90), ms(dels[0])
		fmt.Printf("%s: %d deletes of one passage: p50 %.2f ms, p90 %.2f, the first %.2f\n", name, len(dels), r.DeleteMs, r.DeleteP90ms, r.DeleteFirstMs)
		if *reuseF && shares[name] == "" {
			writeBuilt(filepath.Join(dir, name+".built.json"), r)
		}
	}
	if *churnF > 0 {
		all := corpus(*shared, *nFlag)
		for _, name := range names {
			r := res[name]
			if reused[name] || shares[name] != "" || r.Add1000ms == 0 {
				continue // a reused index is not churned (its fresh size is another run's)
			}
			if _, ok := engines[name].(batchDeleter); !ok {
				fmt.Printf("%s: no churn (the engine deletes one passage at a time only)\n", name)
				continue
			}
			gone := map[string]bool{}
			for _, id := range deleted {
				gone[id] = true
			}
			d, err := churn(engines[name], all, gone, *churnF)
			if err != nil {
				return fmt.Errorf("%s: churn: %w", name, err)
			}
			closed[name] = true
			if err := engines[name].Close(); err != nil {
				return fmt.Errorf("%s: close after churn: %w", name, err)
			}
			edir := filepath.Join(dir, name)
			app, alloc := diskUsage(edir)
			r.ChurnMB, r.ChurnSec = float64(alloc)/1e6, d.Seconds()
			fmt.Printf("%s after %d rounds of 10 %% churn (%.1f s): %.1f MB on disk (apparent %.1f), %.2f× the fresh build\n  %s\n",
				name, *churnF, d.Seconds(), r.ChurnMB, float64(app)/1e6, r.ChurnMB/r.FileMB, breakdown(edir))
		}
	}
	report(names, res)
	if *jsonOut != "" {
		var list []*result
		for _, n := range names {
			list = append(list, res[n])
		}
		data, _ := json.MarshalIndent(map[string]any{"passages": *nFlag, "queries": len(qs), "mem_blobs": *memBlobs, "results": list}, "", "  ")
		return os.WriteFile(*jsonOut, data, 0o644)
	}
	return nil
}

// builtRecord is what -reuse keeps of a build: its figures, and the size it
// was built at (a record for another -n is not reused).
type builtRecord struct {
	N      int     `json:"n"`
	Result *result `json:"result"`
}

// readBuilt reads a build record written by writeBuilt for this -n.
func readBuilt(path string) (*result, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var b builtRecord
	if json.Unmarshal(data, &b) != nil || b.N != *nFlag || b.Result == nil {
		return nil, false
	}
	b.Result.Hits = 0
	return b.Result, true
}

// writeBuilt records a finished build, and again with its writes (the
// compare run adds 1,000 passages and deletes one after its queries; a
// reused index that has had those writes is searched with them, and they are
// not done again).
func writeBuilt(path string, r *result) {
	data, _ := json.Marshal(builtRecord{N: *nFlag, Result: r})
	os.WriteFile(path, data, 0o644)
}

// recall returns how many of the exact top 10 of q the search returns,
// and how many there are (untimed: in the warm-up pass).
func recall(rc recaller, q string) (found, want int, err error) {
	got, err := rc.Top10(q, false)
	if err != nil {
		return 0, 0, err
	}
	exact, err := rc.Top10(q, true)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range exact {
		if slices.Contains(got, id) {
			found++
		}
	}
	return found, len(exact), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p int) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return ms(s[min(len(s)-1, len(s)*p/100)])
}
