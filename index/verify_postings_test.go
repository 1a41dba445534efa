package index

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// postingRuns digests postings as the digest defines it (each term in
// lexical order, its posting count, its postings by block position and
// then frequencies; checked against a plain reading of that definition
// here), whether they were read one run per term (sorted a run at a
// time, by radix for a long one) or scattered (a term coming back after
// another: here every posting is a run of its own); it counts the
// postings that repeat a block of their term; and its encoding of 12-byte
// postings takes less than half their size.
func TestPostingRunsDigest(t *testing.T) {
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
		dup := run[len(run)/2]
		dup.tf[1]--            // below the first: a stable sort by block alone leaves them out of order
		run = append(run, dup) // the same block again, other frequencies (damage): counted
		runs = append(runs, run)
	}
	// The largest frequencies.
	runs[2] = append(runs[2], posting{blocks - 1, [2]uint32{math.MaxUint32, math.MaxUint32}})

	// The definition, read plainly.
	want := newDigester()
	wantDups := 0
	for _, r := range []int{1, 3, 0, 2} { // apple, mango, pear, zebra
		all := slices.Clone(runs[r])
		slices.SortFunc(all, func(a, b posting) int {
			if a.block != b.block {
				return int(a.block) - int(b.block)
			}
			for f := range a.tf {
				if a.tf[f] != b.tf[f] {
					if a.tf[f] < b.tf[f] {
						return -1
					}
					return 1
				}
			}
			return 0
		})
		want.str(terms[r])
		want.int(int64(len(all)))
		for k, p := range all {
			if k > 0 && p.block == all[k-1].block {
				wantDups++
			}
			want.int(int64(p.block))
			want.int(int64(p.tf[0]))
			want.int(int64(p.tf[1]))
		}
	}
	if wantDups != len(terms) {
		t.Fatalf("the test's postings repeat %d blocks, want %d", wantDups, len(terms))
	}

	check := func(what string, pr *postingRuns) {
		t.Helper()
		d := newDigester()
		dups, err := pr.digest(d, terms)
		if got, w := d.sum(), want.sum(); err != nil || !bytes.Equal(got, w) || dups != wantDups {
			t.Errorf("%s: digest %x, %d duplicates, %v; want %x, %d", what, got, dups, err, w, wantDups)
		}
	}
	// Chunks of 16 MiB (one holds every run here), and of 40 bytes (runs
	// share some, a long run takes one of its own).
	defer func(c int) { runChunk = c }(runChunk)
	for _, runChunk = range []int{16 << 20, 40} {
		t.Logf("chunks of %d bytes", runChunk)
		// One run per term, in first-seen order.
		n := 0
		one := &postingRuns{blocks: blocks}
		for r, run := range runs {
			one.cur = append(one.cur, run...)
			if err := one.flush(int32(r)); err != nil {
				t.Fatal(err)
			}
			n += len(run)
		}
		check("one run per term", one)
		if runChunk > firstRunChunk && (len(one.chunks) != 1 || cap(one.chunks[0]) != firstRunChunk) {
			t.Errorf("one run per term: %d chunks, the first of %d bytes; want one of %d (a small verify does not take %d)", len(one.chunks), cap(one.chunks[0]), firstRunChunk, runChunk)
		}
		if one.n != int64(n) || one.size() >= 6*n {
			t.Errorf("one run per term: %d postings in %d bytes, want %d in less than %d", one.n, one.size(), n, 6*n)
		}
		// Scattered: the same postings interleaved, each a run.
		sc := &postingRuns{blocks: blocks}
		for i := 0; ; i++ {
			added := false
			for r, run := range runs {
				if i < len(run) {
					sc.cur = append(sc.cur, run[i])
					if err := sc.flush(int32(r)); err != nil {
						t.Fatal(err)
					}
					added = true
				}
			}
			if !added {
				break
			}
		}
		check("scattered", sc)
		// Nothing read: nothing flushed.
		if err := sc.flush(-1); err != nil {
			t.Fatal(err)
		}
		if sc.n != int64(n) {
			t.Errorf("scattered: %d postings, want %d", sc.n, n)
		}
		if runChunk < 100 && len(sc.chunks) < n/10 {
			t.Errorf("scattered: %d chunks of %d bytes for %d postings", len(sc.chunks), runChunk, n)
		}
	}
	// A term's first run after a later term's, or a term with none: an
	// error, not postings put under another term.
	pr := &postingRuns{blocks: blocks}
	pr.cur = append(pr.cur, runs[0]...)
	if err := pr.flush(1); err == nil {
		t.Error("the term first seen second flushed before the first: no error")
	}
	pr.cur = pr.cur[:0]
	pr.cur = append(pr.cur, runs[0]...)
	if err := pr.flush(0); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.digest(newDigester(), terms[:2]); err == nil {
		t.Error("a term without postings kept: no error")
	}
}
