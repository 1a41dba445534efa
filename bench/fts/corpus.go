package main

import (
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/escurel/escurel/internal/benchcorpus"
)

// Passage is one unit of text every engine indexes
// (internal/benchcorpus, shared with index/dense's benchmarks).
type Passage = benchcorpus.Passage

// corpus builds n passages from real text, the same for the same
// arguments (benchcorpus.Passages).
func corpus(shared string, n int) []Passage { return benchcorpus.Passages(shared, n) }

// corpusTail returns passages from to to-1 of the corpus (to > from), copied
// out of the whole corpus, which it generates (each passage depends on those
// before it) and then gives back to the operating system: the timed writes
// that follow run in an engine that shares this process, and escurel, a Go
// library, would otherwise pay collections over a live heap of the
// harness's (1.1 GB at 1M passages: a first add of 1,000 passages took
// 1,332 ms beside it, 722 ms in another run of the same).
func corpusTail(shared string, from, to int) []Passage {
	tail := slices.Clone(corpus(shared, to)[from:])
	runtime.GC()
	debug.FreeOSMemory()
	return tail
}

// queries returns the first n SciFact claims (benchcorpus.Queries).
func queries(shared string, n int) []string { return benchcorpus.Queries(shared, n) }
