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

// TestWordCacheStartsAgainWhenFull checks that a full word cache takes
// new words (it starts again) instead of caching only the first
// maxLocalWords words it ever saw, which left a corpus's later
// vocabulary stemmed at every occurrence.
func TestWordCacheStartsAgainWhenFull(t *testing.T) {
	c := wordCache{}
	for i := range maxLocalWords {
		c.add(fmt.Sprintf("word%d", i), "")
	}
	if len(c) != maxLocalWords {
		t.Fatalf("%d words cached, want %d", len(c), maxLocalWords)
	}
	text := "walking is what the walkers walk"
	w := text[8:10] // a slice of a larger string: the cache keeps a copy
	if got := c.add(w, w); got != "is" {
		t.Fatalf("add returned %q", got)
	}
	if term, ok := c["is"]; !ok || term != "is" {
		t.Fatalf("a new word was not cached once the cache was full (%d words)", len(c))
	}
	if len(c) != 1 {
		t.Errorf("%d words after starting again, want 1", len(c))
	}
}
