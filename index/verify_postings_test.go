package index

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// digestPostings gives the same digest and duplicate count for postings
// read one run per term (sorted a run at a time, by radix for a long one)
// and for the same postings read scattered (a term coming back: one sort
// of them all, with pterms), and the runs' order of terms is the lexical
// one either way; the struct it holds 76M of at 1M passages is 12 bytes.
func TestDigestPostingsScatteredAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const blocks = 5000
	terms := []string{"pear", "apple", "zebra", "mango"}
	lens := []int{40, radixMinRun + 500, 3, 700} // apple's run takes the radix sort
	var runs [][]posting
	for r := range terms {
		var run []posting
		for _, b := range rng.Perm(blocks)[:lens[r]] { // distinct blocks, in no order
			run = append(run, posting{int32(b), [2]uint32{uint32(rng.IntN(3)), uint32(1 + rng.IntN(9))}})
		}
		run = append(run, run[len(run)/2]) // a duplicate (damage), counted
		runs = append(runs, run)
	}
	// One run per term, in first-seen order.
	var ps []posting
	var starts []int
	for _, run := range runs {
		starts = append(starts, len(ps))
		ps = append(ps, run...)
	}
	// Scattered: the same postings interleaved.
	var sc []posting
	var pterms []int32
	for i := 0; ; i++ {
		added := false
		for r, run := range runs {
			if i < len(run) {
				sc = append(sc, run[i])
				pterms = append(pterms, int32(r))
				added = true
			}
		}
		if !added {
			break
		}
	}
	if len(sc) != len(ps) {
		t.Fatalf("%d scattered postings, %d in runs", len(sc), len(ps))
	}
	sum := func(ps []posting, starts []int, pterms []int32) ([]byte, int) {
		d := newDigester()
		n := digestPostings(d, terms, slices.Clone(starts), slices.Clone(ps), pterms, blocks)
		return d.sum(), n
	}
	a, na := sum(ps, starts, nil)
	b, nb := sum(sc, nil, pterms)
	if !bytes.Equal(a, b) || na != nb || na != len(terms) {
		t.Fatalf("runs: digest %x, %d duplicates; scattered: %x, %d; want the same, %d duplicates", a, na, b, nb, len(terms))
	}
	// runTerms backfills the ranks of postings read before a term came
	// back.
	if got := runTerms(starts, len(ps)); len(got) != len(ps) || got[0] != 0 || got[starts[1]] != 1 || got[len(got)-1] != int32(len(terms)-1) {
		t.Fatalf("runTerms: %d ranks, ends %v", len(got), []int32{got[0], got[starts[1]], got[len(got)-1]})
	}
}
