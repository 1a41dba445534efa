package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// memPhase names what a build child is doing, for memTrace's lines: the
// batch it is writing ("batch 37") or "close".
var memPhase atomic.Pointer[string]

// setPhase sets memPhase.
func setPhase(s string) { memPhase.Store(&s) }

// memTrace samples, every half second (BENCH_MEMTRACE_MS=N: every N ms;
// a build's peak can last less than half a second: at 100k passages the
// samples' highest was 20 MB under VmHWM) until stop, the process's resident
// set (VmRSS, MB, from /proc/self/status) and the Go runtime's share of it
// (its mapped memory less what it released to the OS), and prints a line
// to stderr: with BENCH_MEMTRACE=1 whenever the resident set reaches a new
// peak, with BENCH_MEMTRACE=all at every sample. A line has the RSS, the
// Go heap's objects and live bytes (as of the last GC), the Go runtime's
// resident total, the rest (C allocations: DuckDB's buffer pool, its
// allocations outside it, the allocator's caches), the sizes of the
// DuckDB write-ahead logs and database files under dir (MB; a checkpoint
// shows as the log shrinking) and the phase (memPhase).
func memTrace(dir string) (stop func()) {
	all := os.Getenv("BENCH_MEMTRACE") == "all"
	period := 500 * time.Millisecond
	if v := os.Getenv("BENCH_MEMTRACE_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			fmt.Fprintf(os.Stderr, "BENCH_MEMTRACE_MS=%q: want a positive number of milliseconds\n", v)
			os.Exit(2)
		}
		period = time.Duration(ms) * time.Millisecond
	}
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
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			rss := vmRSS()
			if !all && rss <= peak+10 {
				continue
			}
			peak = max(peak, rss)
			metrics.Read(samples)
			mb := func(i int) float64 { return float64(samples[i].Value.Uint64()) / (1 << 20) }
			goRes := mb(0) - mb(1)
			wal, db := duckFiles(dir)
			phase := ""
			if p := memPhase.Load(); p != nil {
				phase = *p
			}
			fmt.Fprintf(os.Stderr, "memtrace %6.1fs rss %5.0f MB go %5.0f (objects %5.0f, live %5.0f) other %5.0f wal %5.0f db %5.0f %s\n",
				time.Since(start).Seconds(), rss, goRes, mb(2), mb(3), rss-goRes, wal, db, phase)
		}
	}()
	return func() { close(done); <-ended }
}

// duckFiles sums the sizes, in MB, of the DuckDB write-ahead logs (*.wal)
// and database files (*.duckdb) anywhere under dir.
func duckFiles(dir string) (wal, db float64) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		switch {
		case strings.HasSuffix(p, ".wal"):
			if fi, err := d.Info(); err == nil {
				wal += float64(fi.Size()) / (1 << 20)
			}
		case strings.HasSuffix(p, ".duckdb"):
			if fi, err := d.Info(); err == nil {
				db += float64(fi.Size()) / (1 << 20)
			}
		}
		return nil
	})
	return wal, db
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

// peakHeapProfile writes, until stop, a heap profile to file each time the
// Go heap's live bytes (as of the last GC, /gc/heap/live:bytes) pass their
// highest so far by 2 MB (sampled every 20 ms): the profile left is that of
// the largest live heap, which with GOGC's default sets the heap's goal at
// twice it (BENCH_MEMPROFILE_PEAK). Errors go to stderr once.
func peakHeapProfile(file string) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(s)
			live := s[0].Value.Uint64()
			if live < peak+2<<20 {
				continue
			}
			peak = live
			f, err := os.Create(file)
			if err == nil {
				err = pprof.WriteHeapProfile(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "BENCH_MEMPROFILE_PEAK: %v\n", err)
				return
			}
			fmt.Fprintf(os.Stderr, "memprofile-peak live %.0f MB (%s)\n", float64(live)/(1<<20), phaseName())
		}
	}()
	return func() { close(done); <-ended }
}

// phaseName is memPhase's value, "" before the first.
func phaseName() string {
	if p := memPhase.Load(); p != nil {
		return *p
	}
	return ""
}
