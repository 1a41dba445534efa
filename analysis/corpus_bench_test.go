package analysis

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// scifactTexts reads the SciFact titles and abstracts of the shared test
// data; the error says why it could not (absent when not os.ErrNotExist).
func scifactTexts() ([]string, error) {
	path := filepath.Join("..", "..", "shared", "data", "scifact", "corpus.jsonl")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var d struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		texts = append(texts, d.Title, d.Text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return texts, nil
}

// scifactOrSkip returns scifactTexts, skipping tb when the shared data is
// absent and failing it when it cannot be read.
func scifactOrSkip(tb testing.TB) []string {
	texts, err := scifactTexts()
	if errors.Is(err, os.ErrNotExist) {
		tb.Skipf("the shared test data is absent (%v): run in a worktree beside /work/shared", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return texts
}

// BenchmarkStandardCorpus analyzes the SciFact titles and abstracts on
// every core, as ingest's derivation does; bytes/s is the rate.
func BenchmarkStandardCorpus(b *testing.B) {
	texts := scifactOrSkip(b)
	var size int64
	for _, t := range texts {
		size += int64(len(t))
	}
	b.SetBytes(size / int64(len(texts)))
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var dst []string
		for pb.Next() {
			i := next.Add(1)
			dst = Standard{}.Terms(dst[:0], texts[int(i)%len(texts)], "en")
			// Each term a string the caller keeps, as derive's blocks do.
			keep := make([]string, len(dst))
			copy(keep, dst)
		}
	})
}
