package analysis

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
)

// TestStemCacheBytes fills a stem cache with distinct words and checks
// that the heap it takes stays near maxStemCacheBytes: the estimate per
// entry (stemEntryBytes) neither undercounts (the cap would not hold) nor
// badly overcounts (the cache would hold fewer words than it could).
func TestStemCacheBytes(t *testing.T) {
	l := &language{stem: english.Stem}
	env := snowballstem.NewEnv("")
	words := make([]string, 0, 200_000) // more than the cap admits
	for i := range cap(words) {
		words = append(words, fmt.Sprintf("walk%xing", i*7919)) // stems to walk%x
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, w := range words {
		if s := l.stemmed(w, env); s == "" {
			t.Fatalf("stem of %q: %q", w, s)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(words)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	est := l.cacheBytes.Load()
	n := 0
	l.stems.Range(func(any, any) bool { n++; return true })
	t.Logf("%d entries, estimated %d bytes, heap grew %d bytes (%.0f per entry)", n, est, heap, float64(heap)/float64(n))
	if n == len(words) {
		t.Fatalf("all %d words cached: the cap did not apply", n)
	}
	if est < maxStemCacheBytes || est > maxStemCacheBytes+stemEntryBytes+64 {
		t.Errorf("estimated size %d, want the cap %d", est, maxStemCacheBytes)
	}
	if heap > est*5/4 || heap < est*3/4 {
		t.Errorf("heap grew %d bytes for an estimate of %d: stemEntryBytes is off", heap, est)
	}
}
