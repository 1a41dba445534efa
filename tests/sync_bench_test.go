package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
)

// BenchmarkSyncNoop times escurel sync of 10,000 unchanged small files
// (100 directories of 100), ingested once before the timer starts: a walk,
// one query, no file read. Issue 14 asks for at most 1 s.
//
//	go test ./tests -run '^$' -bench SyncNoop -benchtime 5x
func BenchmarkSyncNoop(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "docs")
	for i := range 10_000 {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.md", i))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "# File %d\n\nsmall body number %d\n", i, i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ix, err := index.Open(ctx, filepath.Join(b.TempDir(), "idx"), &index.Options{Embedder: embed.None})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	if sum, err := ix.Sync(ctx, []string{dir}, nil); err != nil || sum.Ingest.Added != 10_000 {
		b.Fatalf("first sync: %v, %+v", err, sum.Plan)
	}
	b.ResetTimer()
	for range b.N {
		sum, err := ix.Sync(ctx, []string{dir}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if p := sum.Plan; p.Unchanged != 10_000 || len(p.Add)+len(p.Change)+len(p.Delete)+p.Touched != 0 {
			b.Fatalf("not a no-op: %+v", p)
		}
	}
}
