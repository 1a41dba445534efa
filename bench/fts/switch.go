package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rebuild"
)

// switchBench measures searches on an index of *nFlag passages (hash/384
// vectors) while a live rebuild runs and switches generations (make
// bench-switch). Two searchers, one in bm25 and one in hybrid mode, loop
// over the SciFact claims throughout; each search records when it started,
// how long it took and the generation it ended on. The report splits them:
//
//	steady      no rebuild running
//	rebuilding  the rebuild deriving the new generation, before its swap
//	switch      from 1 s before the first search on the new generation to
//	            2 s after it: the catch-up, verification, publish and
//	            switch, and the first searches on the new generation
//	after       the new generation, the rebuild done
//
// Issue 12's target: p95 in "switch" within 2× of p95 in "rebuilding" (the
// same load without a switch).
func switchBench(dir string) error {
	edir, e, qs, err := hybridIndex(dir)
	if err != nil {
		return err
	}
	defer e.Close()
	for _, mode := range []string{index.ModeBM25, index.ModeHybrid} { // warm up
		for _, q := range qs {
			if _, err := e.ix.Rank(context.Background(), q, &index.SearchOptions{K: 10, Mode: mode}); err != nil {
				return err
			}
		}
	}
	var mu sync.Mutex
	var samples []sample
	var stop atomic.Bool
	var failed atomic.Int64
	var wg sync.WaitGroup
	for _, mode := range []string{index.ModeBM25, index.ModeHybrid} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				q := qs[i%len(qs)]
				t0 := time.Now()
				_, err := e.ix.Rank(context.Background(), q, &index.SearchOptions{K: 10, Mode: mode})
				took := time.Since(t0)
				if err != nil {
					failed.Add(1)
					continue
				}
				s := sample{mode, t0, took, e.ix.Generation()}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}()
	}
	steadyFor := 10 * time.Second
	time.Sleep(steadyFor)
	before := e.ix.Generation()
	rebuildStart := time.Now()
	sum, err := rebuild.Run(context.Background(), rebuild.Options{Dir: edir, Blobs: e.ix.Blobs(), Live: e.ix})
	rebuildEnd := time.Now()
	time.Sleep(steadyFor)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	phases, err := splitPhases(samples, before, "steady", rebuildStart, rebuildEnd, sum.Generation)
	if err != nil {
		return err
	}
	fmt.Printf("live rebuild of %d documents: %.1f s (%s → %s), %d searches failed\n\n",
		sum.Documents, rebuildEnd.Sub(rebuildStart).Seconds(), before, sum.Generation, failed.Load())
	fmt.Printf("%-18s %8s %9s %9s %9s\n", "phase", "searches", "p50 ms", "p95 ms", "max ms")
	var rows []string
	for _, p := range []string{"steady", "rebuilding", "switch", "after"} {
		rows = append(rows, p, p+" "+index.ModeBM25, p+" "+index.ModeHybrid)
	}
	for _, p := range rows {
		ds := phases[p]
		if len(ds) == 0 {
			fmt.Printf("%-18s %8d\n", p, 0)
			continue
		}
		sorted := append([]time.Duration(nil), ds...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		fmt.Printf("%-18s %8d %9.2f %9.2f %9.2f\n", p, len(ds), pct(ds, 50), pct(ds, 95), ms(sorted[len(sorted)-1]))
	}
	for _, m := range []string{"", " " + index.ModeBM25, " " + index.ModeHybrid} {
		if len(phases["switch"+m]) > 0 && len(phases["rebuilding"+m]) > 0 {
			r := pct(phases["switch"+m], 95) / pct(phases["rebuilding"+m], 95)
			verdict := "within"
			if r > 2 {
				verdict = "OVER"
			}
			fmt.Printf("p95 switch%s / p95 rebuilding%s = %.2f× (%s the 2× target)\n", m, m, r, verdict)
		}
	}
	fmt.Println(strings.Repeat("-", 50))
	return nil
}

// sample is one search of a benchmark around a live rebuild: its mode,
// when it started, how long it took, and the generation it ended on.
type sample struct {
	mode  string
	start time.Time
	took  time.Duration
	gen   string
}

// splitPhases sorts samples by when they started into the phases of a
// live rebuild that ran from rebuildStart to rebuildEnd, away from
// generation before to next: first (before the rebuild; named first),
// "rebuilding", "switch" (from 1 s before the first search on the new
// generation to 2 s after it) and "after" (the rebuild done); each phase
// also by mode ("switch bm25"). An error when no search ran on the new
// generation.
func splitPhases(samples []sample, before, first string, rebuildStart, rebuildEnd time.Time, next string) (map[string][]time.Duration, error) {
	var switched time.Time
	for _, s := range samples {
		if s.gen != before && (switched.IsZero() || s.start.Before(switched)) {
			switched = s.start
		}
	}
	if switched.IsZero() {
		return nil, fmt.Errorf("no search ran on the new generation %s", next)
	}
	phases := map[string][]time.Duration{}
	for _, s := range samples {
		var p string
		switch {
		case s.start.Before(rebuildStart):
			p = first
		case s.start.After(switched.Add(-time.Second)) && s.start.Before(switched.Add(2*time.Second)):
			p = "switch"
		case s.start.Before(switched):
			p = "rebuilding"
		case s.start.After(rebuildEnd):
			p = "after"
		default:
			continue // rebuild ending (old generations removed)
		}
		phases[p] = append(phases[p], s.took)
		phases[p+" "+s.mode] = append(phases[p+" "+s.mode], s.took)
	}
	return phases, nil
}

// hybridIndex opens the escurel-hybrid index of *nFlag passages (hash/384
// vectors) under dir, building it in a child process unless an earlier
// run with -work left one there, and returns its directory, the engine
// and the SciFact claims to query it with.
func hybridIndex(dir string) (string, *escurelEngine, []string, error) {
	name := "escurel-hybrid"
	edir := filepath.Join(dir, name)
	if !index.Exists(edir) {
		os.MkdirAll(edir, 0o755)
		common, err := buildArgs(dir)
		if err != nil {
			return "", nil, nil, err
		}
		out, _, err := child(append([]string{"-child", "build", "-engine", name, "-work", edir}, common...)...)
		if err != nil {
			return "", nil, nil, err
		}
		fmt.Printf("built %d passages in %s s\n", *nFlag, out)
	}
	qs := queries(*shared, *queriesN)
	if len(qs) == 0 {
		return "", nil, nil, fmt.Errorf("no queries: %s/scifact/queries.jsonl is absent", *shared)
	}
	e, err := openEscurelVectors(edir, false, "")
	if err != nil {
		return "", nil, nil, err
	}
	return edir, e, qs, nil
}
