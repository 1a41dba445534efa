package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// col is a column of the report.
type col struct {
	name   string
	get    func(*result) float64
	higher bool // higher is better
}

// report prints a table with escurel's ratio to the best peer per column.
func report(names []string, res map[string]*result) {
	cols := []col{
		{"ingest passages/s", func(r *result) float64 { return r.IngestPerSec }, true},
		{"query p50 ms", func(r *result) float64 { return r.QueryP50ms }, false},
		{"query p95 ms", func(r *result) float64 { return r.QueryP95ms }, false},
	}
	for _, n := range names {
		if res[n].Recall10 != nil { // bench-dense: recall@10 beside the latencies
			cols = append(cols, col{"recall@10", func(r *result) float64 {
				if r.Recall10 == nil {
					return math.NaN()
				}
				return *r.Recall10
			}, true})
			break
		}
	}
	cols = append(cols, []col{
		{"add 1,000 ms", func(r *result) float64 { return r.Add1000ms }, false},
		{"delete one ms (p50)", func(r *result) float64 { return r.DeleteMs }, false},
		{"files MB", func(r *result) float64 { return r.FileMB }, false},
		{"build RSS MB", func(r *result) float64 { return r.RSSMB }, false},
	}...)
	fmt.Printf("\n| engine |")
	for _, c := range cols {
		fmt.Printf(" %s |", c.name)
	}
	fmt.Printf(" hits |\n|---|")
	for range cols {
		fmt.Printf("---|")
	}
	fmt.Printf("---|\n")
	for _, n := range names {
		fmt.Printf("| %s |", n)
		for _, c := range cols {
			if v := c.get(res[n]); math.IsNaN(v) || (shares[n] != "" && v == 0) {
				fmt.Printf(" – |") // not measured: an exact scan, or another engine's index
			} else if c.name == "recall@10" {
				fmt.Printf(" %.4f |", v)
			} else {
				fmt.Printf(" %.2f |", v)
			}
		}
		fmt.Printf(" %d |\n", res[n].Hits)
	}
	for _, mine := range names {
		if strings.HasPrefix(mine, "escurel") {
			ratioRow(mine, names, res, cols)
		}
	}
	fullText := false // a full-text peer ran: issue 16's targets are against it
	for _, n := range names {
		fullText = fullText || slices.Contains(engineNames, n) && !strings.HasPrefix(n, "escurel")
	}
	for _, mine := range names {
		if strings.HasPrefix(mine, "escurel") && shares[mine] == "" && fullText {
			verdicts(mine, names, res)
		}
		if mine == "escurel-dense" {
			denseVerdicts(mine, res[mine])
		}
	}
}

// Issue 16's target for dense search: top 10 over 1M × 384 vectors at
// p50 ≤ denseP50Bound ms on 2 cores, with recall@10 ≥ denseRecallBound
// against the exact search.
const (
	denseP50Bound    = 15.0
	denseRecallBound = 0.99
)

// denseVerdicts prints issue 16's dense target for the dense engine mine
// (escurel-dense: the dense leg of escurel-hybrid's index). The issue
// sets it at 1M vectors; a smaller BENCH_N is held to the same bound,
// which is easier to meet there, and says so.
func denseVerdicts(mine string, r *result) {
	fmt.Printf("\nTargets (issue 16, dense), %s at %d passages:\n", mine, *nFlag)
	if *nFlag < 1_000_000 {
		fmt.Printf("  (the issue sets them at 1,000,000 vectors; BENCH_N=1000000 measures them there)\n")
	}
	verdictLine("dense top-10 p50 ≤ 15 ms", r.QueryP50ms, 2, "ms", denseP50Bound, false, "absolute")
	if r.Recall10 == nil {
		fmt.Printf("  %-40s no figure\n", "recall@10 ≥ 0.99")
		return
	}
	verdictLine("recall@10 ≥ 0.99", *r.Recall10, 4, "", denseRecallBound, true, "against the exact search")
}

// verdictLine prints one target's line: its figure got (digits after the
// point), the bound, why the bound is what it is, and whether got meets
// it (higher: at least the bound; else at most).
func verdictLine(target string, got float64, digits int, unit string, bound float64, higher bool, why string) {
	verdict := "met"
	if (higher && got < bound) || (!higher && got > bound) {
		verdict = "MISSED"
	}
	fmt.Printf("  %-40s %10.*f %-4s bound %10.2f (%s): %s\n", target, digits, got, unit, bound, why, verdict)
}

// best is the best peer's (non-escurel engine's) value of get, and its name;
// ok is false when no peer ran or measured it.
func best(names []string, res map[string]*result, get func(*result) float64, higher bool) (v float64, who string, ok bool) {
	for _, n := range names {
		if strings.HasPrefix(n, "escurel") {
			continue
		}
		x := get(res[n])
		if x <= 0 {
			continue
		}
		if !ok || (higher && x > v) || (!higher && x < v) {
			v, who, ok = x, n, true
		}
	}
	return v, who, ok
}

// verdicts prints one line per target of issue 16 for engine mine: its
// figure, the bound the target sets in this run, and whether it is met.
// A target that needs a peer the run lacks is "no peer".
func verdicts(mine string, names []string, res map[string]*result) {
	r := res[mine]
	queryRatio := 0.5
	if *nFlag >= 1_000_000 {
		queryRatio = 0.3
	}
	fmt.Printf("\nTargets (issue 16), %s at %d passages:\n", mine, *nFlag)
	line := func(target string, got float64, unit string, bound float64, higher bool, why string) {
		verdictLine(target, got, 2, unit, bound, higher, why)
	}
	peer := func(target string, get func(*result) float64, unit string, factor float64, higher bool) {
		b, who, ok := best(names, res, get, higher)
		if !ok || get(r) <= 0 {
			fmt.Printf("  %-40s no peer or no figure\n", target)
			return
		}
		line(target, get(r), unit, b*factor, higher, fmt.Sprintf("%.1f× %s", factor, who))
	}
	peer("ingest passages/s ≥ 1.2× best peer", func(r *result) float64 { return r.IngestPerSec }, "/s", 1.2, true)
	peer("add 1,000 ≤ 1× best peer", func(r *result) float64 { return r.Add1000ms }, "ms", 1, false)
	peer("delete one ≤ 1× best peer", func(r *result) float64 { return r.DeleteMs }, "ms", 1, false)
	if r.DeleteMs > 0 {
		line("delete one ≤ 5 ms", r.DeleteMs, "ms", 5, false, "absolute")
	}
	peer("files ≤ 1.5× best peer", func(r *result) float64 { return r.FileMB }, "MB", 1.5, false)
	// A peer's RSS over the baseline could come out below 0: it counts
	// as 0.
	b, who := -1.0, ""
	for _, n := range names {
		if p := res[n]; !strings.HasPrefix(n, "escurel") && p.IngestPerSec > 0 && (b < 0 || max(p.RSSMB, 0) < b) {
			b, who = max(p.RSSMB, 0), n
		}
	}
	bound, why := 300.0, "300 MB floor"
	if 2*b > bound {
		bound, why = 2*b, fmt.Sprintf("2× %s", who)
	}
	line("build RSS ≤ max(2× best peer, 300 MB)", r.RSSMB, "MB", bound, false, why)
	if r.BuildPeakMB > 0 {
		fmt.Printf("    (build RSS: the build's own peak, %.0f MB, less the corpus-reading baseline's, %.0f MB, the median of %d)\n", r.BuildPeakMB, r.BaselineMB, baselineRuns)
	}
	peer(fmt.Sprintf("query p50 ≤ %.1f× best peer", queryRatio), func(r *result) float64 { return r.QueryP50ms }, "ms", queryRatio, false)
	peer(fmt.Sprintf("query p95 ≤ %.1f× best peer", queryRatio), func(r *result) float64 { return r.QueryP95ms }, "ms", queryRatio, false)
	if r.ChurnMB > 0 && r.FileMB > 0 {
		line(fmt.Sprintf("disk after %d churn rounds ≤ 1.2× fresh", *churnF), r.ChurnMB/r.FileMB, "×", 1.2, false, fmt.Sprintf("%.1f MB / %.1f MB", r.ChurnMB, r.FileMB))
	}
}

// ratioRow prints engine mine's ratio to the best non-escurel engine per
// column.
func ratioRow(mine string, names []string, res map[string]*result, cols []col) {
	fmt.Printf("| %s / best peer |", mine)
	for _, c := range cols {
		best := -1.0
		for _, n := range names {
			if strings.HasPrefix(n, "escurel") {
				continue
			}
			v := c.get(res[n])
			if best < 0 || (c.higher && v > best) || (!c.higher && v < best) {
				best = v
			}
		}
		// No peer's figure, or none of mine: a shared index
		// (escurel-dense) has no build or write figures of its own.
		if v := c.get(res[mine]); best <= 0 || math.IsNaN(best) || v <= 0 || math.IsNaN(v) {
			fmt.Printf(" – |")
			continue
		}
		fmt.Printf(" %.2f× |", c.get(res[mine])/best)
	}
	fmt.Printf(" |\n")
}
