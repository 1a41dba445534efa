package main

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// memTrace samples, every second until stop, the process's resident set
// (VmRSS, kB from /proc/self/status) and the Go runtime's share of it (its
// mapped memory less what it released to the OS), and prints a line to
// stderr whenever the resident set reaches a new peak: RSS, Go heap live
// and in spans, Go total resident, and the rest (C allocations: DuckDB).
// On with BENCH_MEMTRACE=1 in a build child.
func memTrace() (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	start := time.Now()
	go func() {
		defer close(ended)
		peak := 0.0
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			rss := vmRSS()
			metrics.Read(samples)
			mb := func(i int) float64 { return float64(samples[i].Value.Uint64()) / (1 << 20) }
			goRes := mb(0) - mb(1)
			if rss > peak+10 {
				peak = rss
				fmt.Fprintf(os.Stderr, "memtrace %6.0fs rss %5.0f MB go %5.0f (objects %5.0f, live %5.0f) other %5.0f\n",
					time.Since(start).Seconds(), rss, goRes, mb(2), mb(3), rss-goRes)
			}
		}
	}()
	return func() { close(done); <-ended }
}

// vmRSS is the process's resident set in MB, 0 if unreadable.
func vmRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
