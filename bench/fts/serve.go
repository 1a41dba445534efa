package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escurel/escurel/client"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rebuild"
	"github.com/escurel/escurel/serve"
)

var (
	overheadOnly = flag.Bool("overhead-only", false, "with -serve: measure the HTTP overhead (step 1) only")
	noSwitch     = flag.Bool("no-switch", false, "with -serve: measure the HTTP overhead and the throughput (steps 1 and 2), not the live switch")
	switchOnly   = flag.Bool("switch-only", false, "with -serve: measure the live switch (step 3) only")
	serveModes   = flag.String("serve-modes", "bm25,hybrid", "with -serve: the search modes steps 1 and 2 measure, comma-separated")
)

// overheadPasses is how many times step 1 runs every query in each mode
// and path, after one warm-up pass: 3 × 200 claims keep the spread of the
// paired p50 between runs small.
const overheadPasses = 3

// serveBench measures escurel serve (make bench-serve) on an index of
// *nFlag passages with hash/384 vectors, the server on 127.0.0.1 in this
// process and its clients real HTTP clients with keep-alive connections:
//
//  1. overhead: each query in-process (Index.Search, the call the server
//     makes), through escurel's Go client (package client: POST
//     /v1/search, the answer decoded as its users get it) and through
//     net/http with encoding/json (as a Go program without the client
//     would), back to back, which of the three goes first rotating, one
//     warm-up pass then overheadPasses passes of the queries. The
//     overhead of a request is its HTTP time minus the in-process time of
//     the same query next to it; "paired" is the p50 (and p95) of those
//     differences for the client, the figure issue 13's target (p50 ≤ 1
//     ms) is checked against: it cancels what the load of the moment adds
//     to both. "p50 diff." is client p50 − in-process p50. Under
//     "encoding/json": its paired overhead, "decode", the part of its time
//     spent decoding the hits, and "in-request", each request's time less
//     the index's time in that same request (the answer's Server-Timing):
//     the overhead without the noise of a second search (hybrid's dense
//     leg varies by tens of ms on busy cores).
//  2. throughput: 16 concurrent clients (package client) for a fixed time, in bm25
//     and in hybrid mode: queries/s and p50/p95.
//  3. switch: 4 HTTP clients (-serve-modes in turn: 2 bm25, 2 hybrid) while the server's index
//     is rebuilt live and switches generations; p95 while idle (no
//     rebuild), while rebuilding, and in the switch window (as in
//     switch.go). Issue 13's target: p95 in the switch window ≤ 2× idle
//     p95.
//
// -overhead-only stops after step 1, -no-switch after step 2;
// -switch-only runs step 3 alone, after one warm-up pass of the queries.
// With -work DIR an index already built there by an earlier run is
// reused (hybridIndex). With -cpuprofile FILE, after step 1 the same
// queries run again in-process only and over HTTP only, each profiled:
// FILE.local and FILE.http (their difference is the server's cost).
func serveBench(dir string) error {
	if *switchOnly && (*overheadOnly || *noSwitch) {
		return fmt.Errorf("-switch-only runs step 3 alone: it does not go with -overhead-only or -no-switch")
	}
	edir, e, qs, err := hybridIndex(dir)
	if err != nil {
		return err
	}
	defer e.Close()
	ix := e.ix
	srv, err := serve.New(ix, &serve.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	url := "http://" + ln.Addr().String() + "/v1/search"
	client0 := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// searchHTTP searches over HTTP and also returns how long decoding
	// the answer took and how long the index took in the server (its
	// Server-Timing header; -1 when absent).
	searchHTTP := func(q, mode string) (int, time.Duration, time.Duration, error) {
		body, _ := json.Marshal(map[string]any{"query": q, "k": 10, "mode": mode})
		resp, err := client0.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, 0, 0, err
		}
		defer resp.Body.Close()
		var out struct {
			Hits []index.Hit `json:"hits"`
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(resp.Body)
			return 0, 0, 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
		}
		t0 := time.Now()
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return 0, 0, 0, err
		}
		decode := time.Since(t0)
		inServer := time.Duration(-1)
		if v, ok := strings.CutPrefix(resp.Header.Get("Server-Timing"), "search;dur="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				inServer = time.Duration(f * float64(time.Millisecond))
			}
		}
		return len(out.Hits), decode, inServer, nil
	}
	cl, err := client.New("http://"+ln.Addr().String(), &client.Options{HTTPClient: client0})
	if err != nil {
		return err
	}
	// clientSearch searches through escurel's Go client (package client),
	// the path the overhead target is checked on.
	clientSearch := func(q, mode string) (int, error) {
		res, err := cl.Search(context.Background(), &client.SearchRequest{Query: q, K: 10, Mode: mode})
		if err != nil {
			return 0, err
		}
		return len(res.Hits), nil
	}
	localSearch := func(q, mode string) (int, error) {
		hits, err := ix.Search(context.Background(), q, &index.SearchOptions{K: 10, Mode: mode, Clearance: index.Public})
		return len(hits), err
	}
	modes := strings.Split(*serveModes, ",")
	for _, m := range modes {
		if m != index.ModeBM25 && m != index.ModeDense && m != index.ModeHybrid {
			return fmt.Errorf("-serve-modes: %q is not bm25, dense or hybrid", m)
		}
	}

	// 1. Overhead, one query at a time; the first pass warms up.
	if *switchOnly {
		return switchStep(ix, edir, qs, modes, clientSearch)
	}
	fmt.Printf("%d passages, %d queries × %d passes, server at %s\n\n", *nFlag, len(qs), overheadPasses, ln.Addr())
	fmt.Printf("%-8s %-14s %9s %9s\n", "mode", "path", "p50 ms", "p95 ms")
	overhead := map[string]float64{}
	for _, mode := range modes {
		var local, viaClient, raw, diff, rawDiff, decode, inRequest []time.Duration
		for pass := 0; pass <= overheadPasses; pass++ {
			for i, q := range qs {
				var tl, tc, tr, td, ts time.Duration
				for j := 0; j < 3; j++ { // rotate who goes first
					switch (i + j + pass) % 3 {
					case 0:
						t0 := time.Now()
						if _, err := localSearch(q, mode); err != nil {
							return err
						}
						tl = time.Since(t0)
					case 1:
						t0 := time.Now()
						if _, err := clientSearch(q, mode); err != nil {
							return err
						}
						tc = time.Since(t0)
					default:
						t0 := time.Now()
						var err error
						if _, td, ts, err = searchHTTP(q, mode); err != nil {
							return err
						}
						tr = time.Since(t0)
					}
				}
				if pass > 0 {
					local, viaClient, raw = append(local, tl), append(viaClient, tc), append(raw, tr)
					diff, rawDiff, decode = append(diff, tc-tl), append(rawDiff, tr-tl), append(decode, td)
					if ts >= 0 {
						inRequest = append(inRequest, tr-ts)
					}
				}
			}
		}
		fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "in-process", pct(local, 50), pct(local, 95))
		fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "client", pct(viaClient, 50), pct(viaClient, 95))
		fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "paired", pct(diff, 50), pct(diff, 95))
		fmt.Printf("%-8s %-14s %9.2f\n", mode, "p50 diff.", pct(viaClient, 50)-pct(local, 50))
		fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "encoding/json", pct(raw, 50), pct(raw, 95))
		fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "  paired", pct(rawDiff, 50), pct(rawDiff, 95))
		fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "  decode", pct(decode, 50), pct(decode, 95))
		if len(inRequest) > 0 {
			fmt.Printf("%-8s %-14s %9.2f %9.2f\n", mode, "  in-request", pct(inRequest, 50), pct(inRequest, 95))
		}
		overhead[mode] = pct(diff, 50)
	}
	for _, mode := range modes {
		verdict := "within"
		if overhead[mode] > 1 {
			verdict = "OVER"
		}
		fmt.Printf("p50 overhead %s (paired): %.3f ms (%s the 1 ms target)\n", mode, overhead[mode], verdict)
	}

	if *cpuProfile != "" {
		if err := profileSearches(*cpuProfile, qs, modes, localSearch, clientSearch); err != nil {
			return err
		}
	}

	if *overheadOnly {
		return nil
	}

	// 2. Throughput with 16 clients.
	const clients = 16
	const window = 10 * time.Second
	fmt.Printf("\n%d concurrent HTTP clients, %s each mode\n", clients, window)
	fmt.Printf("%-8s %9s %9s %9s %7s\n", "mode", "queries/s", "p50 ms", "p95 ms", "errors")
	for _, mode := range modes {
		var mu sync.Mutex
		var lat []time.Duration
		var errs atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(window)
		start := time.Now()
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for i := c; time.Now().Before(end); i++ {
					t0 := time.Now()
					if _, err := clientSearch(qs[i%len(qs)], mode); err != nil {
						errs.Add(1)
						continue
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		fmt.Printf("%-8s %9.0f %9.2f %9.2f %7d\n", mode, float64(len(lat))/secs, pct(lat, 50), pct(lat, 95), errs.Load())
	}

	if *noSwitch {
		return nil
	}
	return switchStep(ix, edir, qs, modes, clientSearch)
}

// switchStep is serveBench's step 3: latency over HTTP around a live
// rebuild's switch. With -cpuprofile FILE, the process's CPU profile
// from the end of the rebuild to the end of the step (the "after" phase
// and the old generation's removal) goes to FILE.after.
func switchStep(ix *index.Index, edir string, qs, modes []string, clientSearch func(q, mode string) (int, error)) error {
	const window = 10 * time.Second
	if *switchOnly { // warm up as steps 1 and 2 would have
		for _, mode := range modes {
			for _, q := range qs {
				if _, err := clientSearch(q, mode); err != nil {
					return err
				}
			}
		}
	}
	var mu sync.Mutex
	var samples []sample
	var stop atomic.Bool
	var failed atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		mode := modes[c%len(modes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; !stop.Load(); i++ {
				t0 := time.Now()
				_, err := clientSearch(qs[i%len(qs)], mode)
				took := time.Since(t0)
				if err != nil {
					failed.Add(1)
					continue
				}
				s := sample{mode, t0, took, ix.Generation()}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(window)
	before := ix.Generation()
	rebuildStart := time.Now()
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: edir, Blobs: ix.Blobs(), Live: ix})
	rebuildEnd := time.Now()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile + ".after")
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("profile %s: %w", f.Name(), err)
		}
		defer pprof.StopCPUProfile()
	}
	time.Sleep(window)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	phases, err := splitPhases(samples, before, "idle", rebuildStart, rebuildEnd, sum.Generation)
	if err != nil {
		return err
	}
	fmt.Printf("\n4 HTTP clients (modes %s in turn) around a live rebuild of %d documents (%.1f s, %s → %s); %d searches failed\n",
		*serveModes, sum.Documents, rebuildEnd.Sub(rebuildStart).Seconds(), before, sum.Generation, failed.Load())
	fmt.Printf("%-12s %8s %9s %9s %9s\n", "phase", "searches", "p50 ms", "p95 ms", "max ms")
	for _, p := range []string{"idle", "rebuilding", "switch", "after"} {
		ds := phases[p]
		if len(ds) == 0 {
			fmt.Printf("%-12s %8d\n", p, 0)
			continue
		}
		sorted := append([]time.Duration(nil), ds...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		fmt.Printf("%-12s %8d %9.2f %9.2f %9.2f\n", p, len(ds), pct(ds, 50), pct(ds, 95), ms(sorted[len(sorted)-1]))
	}
	if len(phases["switch"]) > 0 && len(phases["idle"]) > 0 {
		r := pct(phases["switch"], 95) / pct(phases["idle"], 95)
		verdict := "within"
		if r > 2 {
			verdict = "OVER"
		}
		fmt.Printf("p95 switch / p95 idle = %.2f× (%s the 2× target)\n", r, verdict)
	}
	if len(phases["switch"]) > 0 && len(phases["rebuilding"]) > 0 {
		fmt.Printf("p95 switch / p95 rebuilding = %.2f×\n", pct(phases["switch"], 95)/pct(phases["rebuilding"], 95))
	}
	return nil
}

// profileSearches runs every query in every mode 3 times through each of
// local and remote, writing a CPU profile of each: prefix.local and
// prefix.http.
func profileSearches(prefix string, qs, modes []string, local, remote func(q, mode string) (int, error)) error {
	for _, p := range []struct {
		suffix string
		search func(q, mode string) (int, error)
	}{{"local", local}, {"http", remote}} {
		f, err := os.Create(prefix + "." + p.suffix)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		start := time.Now()
		for pass := 0; pass < 3; pass++ {
			for _, mode := range modes {
				for _, q := range qs {
					if _, err := p.search(q, mode); err != nil {
						pprof.StopCPUProfile()
						f.Close()
						return err
					}
				}
			}
		}
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Printf("profiled %s searches: %s (%.1f s)\n", p.suffix, f.Name(), time.Since(start).Seconds())
	}
	return nil
}
