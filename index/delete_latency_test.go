package index

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/duck"
)

// BenchmarkDeleteOne times deleting one document at a time from a copy
// of an index bench-fts built (issue 16): ESCUREL_DELETE_DIR is its
// escurel directory (bench/fts -work DIR: DIR/escurel) of
// ESCUREL_DELETE_N passages (default 100000), ESCUREL_DELETE_TMP where
// the copy goes (/dev/shm leaves out the fsyncs; default the system's
// temporary directory), ESCUREL_DELETE_K how many deletes of each kind
// (default 40). It reports the p50 and p90 of Index.Delete, of the rows
// alone (the record's removal already durable) and of the blob store's
// part alone (RemoveRecord, SyncRemovals), with the rows' steps, and the
// CPU time per delete (the process's, all threads: steadier than the
// wall time on a loaded machine), and reports the p50s as metrics. It
// measures once whatever b.N is (run it with -benchtime 1x), and skips
// without ESCUREL_DELETE_DIR.
func BenchmarkDeleteOne(b *testing.B) {
	t := b
	src := os.Getenv("ESCUREL_DELETE_DIR")
	if src == "" {
		t.Skip("ESCUREL_DELETE_DIR (a bench-fts escurel index directory) not set")
	}
	n := envInt(t, "ESCUREL_DELETE_N", 100000)
	k := envInt(t, "ESCUREL_DELETE_K", 40)
	tmp, err := os.MkdirTemp(os.Getenv("ESCUREL_DELETE_TMP"), "dl-latency-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "escurel")
	t0 := time.Now()
	if err := copyTree(src, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("copied %s to %s in %v", src, dir, time.Since(t0).Round(time.Millisecond))
	ctx := context.Background()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// Passages p0 … p(n-1) are documents bench://pN; take them spread out,
	// away from the ones bench-fts -writes deletes (n/2 + round + 1).
	next := 0
	name := func() string {
		next++
		return "bench://p" + strconv.Itoa((n/7+next*997)%n)
	}
	// Warm up: the first write of a state loads what it needs.
	if _, err := ix.Delete(ctx, name()); err != nil {
		t.Fatal(err)
	}
	whole := make([]time.Duration, k)
	cpu0 := cpuTime()
	for i := range whole {
		nm := name()
		t0 := time.Now()
		if _, err := ix.Delete(ctx, nm); err != nil {
			t.Fatal(err)
		}
		whole[i] = time.Since(t0)
	}
	cpuWhole := (cpuTime() - cpu0) / time.Duration(k)
	rows := make([]time.Duration, k)
	blobs := make([]time.Duration, k)
	var steps [6][]time.Duration
	var cpuSteps [6]time.Duration
	var cpuBlobs time.Duration
	for j := range steps {
		steps[j] = make([]time.Duration, k)
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s := ix.cur.Load()
	for i := range rows {
		id := blobstore.DocID(name())
		t0, c0 := time.Now(), cpuTime()
		if err := s.blobs.RemoveRecord(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := s.blobs.SyncRemovals(); err != nil {
			t.Fatal(err)
		}
		blobs[i] = time.Since(t0)
		cpuBlobs += cpuTime() - c0
		// The rows, step by step as deleteDocs and deleteCommit take them.
		t0, c0 = time.Now(), cpuTime()
		lap := func(j int) {
			now, c := time.Now(), cpuTime()
			steps[j][i] = now.Sub(t0)
			cpuSteps[j] += c - c0
			t0, c0 = now, c
		}
		tx, err := duck.Begin(ctx, s.db)
		if err != nil {
			t.Fatal(err)
		}
		lap(0)
		docs, err := deleteDocuments(ctx, tx, []any{id})
		if err != nil || len(docs) != 1 {
			t.Fatal(len(docs), err)
		}
		lap(1)
		del, err := s.deleteDocRows(ctx, tx, []any{id}, docs)
		if err != nil {
			t.Fatal(err)
		}
		lap(2)
		rm, err := s.fts.Remove(ctx, tx, del.blocks)
		if err != nil {
			t.Fatal(err)
		}
		lap(3)
		gone := blockIDs(del.blocks)
		if err := s.fts.CommitWith(ctx, tx, func() {
			s.applyDense(nil, gone)
			s.applyLanguages(del.langs)
			s.texts.apply(-del.texts)
			s.metaChanged(del.docs)
			s.pub.apply(nil, nil, gone)
			s.docs.apply(nil, del.docs)
			s.hitDocs.apply(nil, del.docs)
		}, rm); err != nil {
			t.Fatal(err)
		}
		lap(4)
		if err := s.fts.Maintain(ctx, s.db, 0); err != nil {
			t.Fatal(err)
		}
		lap(5)
		for j := range 6 {
			rows[i] += steps[j][i]
		}
	}
	var cpuRows time.Duration
	for _, c := range cpuSteps {
		cpuRows += c
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(k) }
	for _, m := range []struct {
		what string
		ds   []time.Duration
		cpu  time.Duration // per delete, all threads
	}{{"Delete", whole, cpuWhole}, {"rows only", rows, per(cpuRows)}, {"blob store only", blobs, per(cpuBlobs)},
		{"  begin", steps[0], per(cpuSteps[0])}, {"  documents", steps[1], per(cpuSteps[1])}, {"  blocks", steps[2], per(cpuSteps[2])},
		{"  fts.Remove", steps[3], per(cpuSteps[3])}, {"  commit", steps[4], per(cpuSteps[4])}, {"  maintain", steps[5], per(cpuSteps[5])}} {
		p50, p90 := quantile(m.ds, 50), quantile(m.ds, 90)
		t.Logf("%-16s p50 %6.2f ms  p90 %6.2f ms  CPU %6.2f ms  (%d deletes)", m.what, ms(p50), ms(p90), ms(m.cpu), len(m.ds))
	}
	b.ReportMetric(ms(quantile(whole, 50)), "delete-p50-ms")
	b.ReportMetric(ms(cpuWhole), "delete-cpu-ms")
	b.ReportMetric(ms(quantile(rows, 50)), "rows-p50-ms")
	b.ReportMetric(ms(quantile(blobs, 50)), "blobs-p50-ms")
}

func envInt(t testing.TB, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

func quantile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// copyTree copies the directory src to dst (regular files and
// directories; the lock file too, unlocked).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
