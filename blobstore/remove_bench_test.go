package blobstore

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkRemovePacked times a delete's part of the blob store in the
// pack layout on file://: RemoveRecord then SyncRemovals (one pack of one
// tombstone written durably, numbered, renamed, packs/ fsynced), on a
// store of ESCUREL_REMOVE_PACKS packs (default 2,000: a bench-fts index
// of 1M passages has 2,004), each a record written alone. It reports the
// CPU time per removal (the process's, all threads: steadier than the
// wall time on a shared machine) beside ns/op. ESCUREL_REMOVE_TMP is
// where the store goes (default the system's temporary directory).
func BenchmarkRemovePacked(b *testing.B) {
	ctx := context.Background()
	packs := 2000
	if v := os.Getenv("ESCUREL_REMOVE_PACKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("ESCUREL_REMOVE_PACKS=%q: want a positive integer", v)
		}
		packs = n
	}
	dir, err := os.MkdirTemp(os.Getenv("ESCUREL_REMOVE_TMP"), "remove-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	u := "file://" + dir + "/blobs"
	if err := UsePacks(ctx, u); err != nil {
		b.Fatal(err)
	}
	s, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range packs {
		if err := s.PutRecord(ctx, testRecord("/r"+strconv.Itoa(i), "sha256:"+strings.Repeat("ab", 32), "t")); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	c0, cpuOK := cpuTime()
	for i := 0; i < b.N; i++ {
		if err := s.RemoveRecord(ctx, DocID("/r"+strconv.Itoa(i%packs))); err != nil {
			b.Fatal(err)
		}
		if err := s.SyncRemovals(); err != nil {
			b.Fatal(err)
		}
	}
	if c1, ok := cpuTime(); ok && cpuOK {
		b.ReportMetric(float64((c1-c0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
}
