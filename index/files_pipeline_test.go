package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/escurel/escurel/embed"
)

// writeFiles writes n Markdown files under a new directory, in names that
// list in order, and returns it.
func writeFiles(t testing.TB, n int, body func(i int) string) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("doc-%05d.md", i))
		if err := os.WriteFile(p, []byte(body(i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// IngestFiles keeps two batches under way (ingestListed): the outcomes
// still come in the files' order, and a batch that fails starts no more,
// with the summary counting exactly what is stored (the batch under way
// beside it may commit: then it is counted).
func TestIngestFilesPipeline(t *testing.T) {
	ctx := context.Background()
	const n = 4*batchFiles + 8
	files := writeFiles(t, n, func(i int) string { return fmt.Sprintf("# Doc %d\n\nPassage number %d about pipelines.\n", i, i) })
	ingestAll := func(t *testing.T) (*Index, Summary, []string, error) {
		dir := t.TempDir()
		ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs"), Embedder: embed.None})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		var seen []string
		sum, err := ix.IngestFiles(ctx, []string{files}, IngestOptions{Progress: func(fr FileResult) { seen = append(seen, filepath.Base(fr.Path)) }})
		return ix, sum, seen, err
	}
	stored := func(t *testing.T, ix *Index) int {
		docs, err := ix.Documents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(docs)
	}

	t.Run("in order", func(t *testing.T) {
		ix, sum, seen, err := ingestAll(t)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Added != n || stored(t, ix) != n {
			t.Errorf("added %d, stored %d, want %d", sum.Added, stored(t, ix), n)
		}
		if len(seen) != n || !slices.IsSorted(seen) {
			t.Errorf("%d outcomes, in order %v; want %d in the files' order", len(seen), slices.IsSorted(seen), n)
		}
	})

	t.Run("a batch fails", func(t *testing.T) {
		var commits atomic.Int32
		writeFault = func() error {
			if commits.Add(1) == 2 {
				return errors.New("injected failure of the second batch")
			}
			return nil
		}
		defer func() { writeFault = nil }()
		ix, sum, seen, err := ingestAll(t)
		if err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("IngestFiles: %v, want the second batch's failure", err)
		}
		got := stored(t, ix)
		if sum.Added != got {
			t.Errorf("the summary counts %d added, the index holds %d", sum.Added, got)
		}
		// The first batch, and the third only if it committed before the
		// failure was seen; never the fourth or the fifth.
		if got != batchFiles && got != 2*batchFiles {
			t.Errorf("the index holds %d documents, want %d or %d", got, batchFiles, 2*batchFiles)
		}
		if len(seen) != got || !slices.IsSorted(seen) {
			t.Errorf("%d outcomes (in order %v) for %d documents stored", len(seen), slices.IsSorted(seen), got)
		}
		if c := commits.Load(); c > 3 {
			t.Errorf("%d batches reached their commit, want at most 3", c)
		}
	})
}

// goid returns the calling goroutine's id (runtime.Stack's first line):
// ingestListed starts its batches' goroutines in order, so the lower id
// is the earlier batch.
func goid() int64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// The second batch commits before the first fails: the summary counts it,
// and only it (review 15b: the failure case of TestIngestFilesPipeline
// depends on timing; this one does not).
func TestIngestFilesPipelineLaterCommitsFirst(t *testing.T) {
	ctx := context.Background()
	files := writeFiles(t, 2*batchFiles, func(i int) string { return fmt.Sprintf("# Doc %d\n\nPassage %d.\n", i, i) })
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs"), Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var mu sync.Mutex
	var ids []int64
	calls := 0
	both, second := make(chan struct{}), make(chan struct{})
	ingestHook = func(stage string) {
		if stage != "prepared" {
			return
		}
		me := goid()
		mu.Lock()
		ids = append(ids, me)
		if len(ids) == 2 {
			close(both)
		}
		mu.Unlock()
		<-both
		mu.Lock()
		first := me == min(ids[0], ids[1])
		mu.Unlock()
		if first {
			<-second // batch 1 waits until batch 2 has reached its commit
		}
	}
	writeFault = func() error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			close(second)
			return nil
		}
		return errors.New("injected failure of the first batch")
	}
	defer func() { ingestHook, writeFault = nil, nil }()
	var seen []string
	sum, err := ix.IngestFiles(ctx, []string{files}, IngestOptions{Progress: func(fr FileResult) { seen = append(seen, filepath.Base(fr.Path)) }})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("IngestFiles: %v, want the first batch's failure", err)
	}
	docs, err := ix.Documents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != batchFiles || sum.Added != len(docs) || len(seen) != len(docs) {
		t.Errorf("stored %d, added %d, %d outcomes; want %d each", len(docs), sum.Added, len(seen), batchFiles)
	}
}

// BenchmarkIngestFiles ingests SciFact's 5,183 abstracts as Markdown
// files (one a document, written once into a temporary directory) with
// IngestFiles into a fresh index per iteration, with escurel's default
// embedder (hash/384, as the command line) and with none, with one batch
// under way at a time and with ingestAhead's two, and reports documents
// a second. It skips without ../shared/data.
func BenchmarkIngestFiles(b *testing.B) {
	corpus, err := filepath.Abs(filepath.Join("..", "..", "shared", "data", "scifact", "corpus.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(corpus)
	if err != nil {
		b.Skipf("shared test data %s is absent (%v): this benchmark needs ../shared/data beside the repository", corpus, err)
	}
	var docs []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var d struct{ Title, Text string }
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			b.Fatal(err)
		}
		docs = append(docs, "# "+d.Title+"\n\n"+d.Text+"\n")
	}
	files := writeFiles(b, len(docs), func(i int) string { return docs[i] })
	ctx := context.Background()
	for _, run := range []struct {
		name  string
		spec  embed.Spec
		ahead int
	}{{"hash384/ahead=1", embed.Default, 1}, {"hash384/ahead=2", embed.Default, 2}, {"none/ahead=1", embed.None, 1}, {"none/ahead=2", embed.None, 2}} {
		b.Run(run.name, func(b *testing.B) {
			defer func(v int) { ingestAhead = v }(ingestAhead)
			ingestAhead = run.ahead
			for b.Loop() {
				b.StopTimer()
				ix, err := Open(ctx, b.TempDir(), &Options{Embedder: run.spec})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				sum, err := ix.IngestFiles(ctx, []string{files}, IngestOptions{})
				if err != nil || sum.Added != len(docs) {
					b.Fatal(sum.Added, err)
				}
				b.StopTimer()
				ix.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(len(docs)*b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
