package main

import "github.com/escurel/escurel/internal/benchcorpus"

// Passage is one unit of text every engine indexes
// (internal/benchcorpus, shared with index/dense's benchmarks).
type Passage = benchcorpus.Passage

// corpus builds n passages from real text, the same for the same
// arguments (benchcorpus.Passages).
func corpus(shared string, n int) []Passage { return benchcorpus.Passages(shared, n) }

// queries returns the first n SciFact claims (benchcorpus.Queries).
func queries(shared string, n int) []string { return benchcorpus.Queries(shared, n) }
