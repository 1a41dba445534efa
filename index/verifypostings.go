package index

// Verify's postings: held sorted and encoded term by term (postingRuns),
// then digested in the terms' lexical order.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/escurel/escurel/index/fts"
)

// postingRuns holds the postings verify digests, as runs: the postings
// of one term read in one piece (ForEachPosting reads term by term, so
// each term is one run, unless a term comes back after another, which no
// index of ours does: scattered). A run is sorted by block position as it
// ends (flush) and kept encoded: its length, then per posting the block
// position's difference from the one before and the frequencies, each a
// uvarint (encoding/binary), in chunks that double from 64 KiB up to
// runChunk bytes, so that no growth copies them. At 1M passages, 76M
// postings held as posting values took 924 MB, the largest part of
// verify's peak; encoded, 3-4 bytes a posting (TestPostingRunsDigest
// checks the digest is the definition's).
type postingRuns struct {
	blocks int32             // every block position is in [0, blocks)
	cur    []posting         // the run being read
	enc    []byte            // the run being encoded
	chunks [][]byte          // the encoded runs
	first  []int64           // first[r]: where the first run of the term first seen r-th begins (chunk<<32 | offset)
	more   map[int32][]int64 // where the later runs of a term that came back begin
	n      int64             // postings flushed
	rs     postingRadix      // reused from run to run
}

// runChunk is the largest size of postingRuns' chunks (a longer run gets
// a chunk of its own). A variable for tests.
var runChunk = 16 << 20

// firstRunChunk is the size of postingRuns' first chunk.
const firstRunChunk = 64 << 10

// flush sorts the run read (cur) and encodes it as a run of the term
// first seen rank-th; nothing when cur is empty. The first run of each
// term must come in the order of their ranks (the terms' first-seen
// order); a rank past the next one is an error.
func (p *postingRuns) flush(rank int32) error {
	if len(p.cur) == 0 {
		return nil
	}
	if int(rank) > len(p.first) {
		return fmt.Errorf("verify: postings of the term first seen %d-th before any of the %d-th", rank, len(p.first))
	}
	sortRun(p.cur, &p.rs, p.blocks)
	p.enc = binary.AppendUvarint(p.enc[:0], uint64(len(p.cur)))
	prev := int32(0)
	for _, x := range p.cur {
		p.enc = binary.AppendUvarint(p.enc, uint64(x.block-prev))
		prev = x.block
		for _, tf := range x.tf {
			p.enc = binary.AppendUvarint(p.enc, uint64(tf))
		}
	}
	c := len(p.chunks) - 1
	if c < 0 || len(p.chunks[c])+len(p.enc) > cap(p.chunks[c]) {
		size := min(firstRunChunk, runChunk)
		if c >= 0 {
			size = min(2*cap(p.chunks[c]), runChunk)
		}
		p.chunks = append(p.chunks, make([]byte, 0, max(size, len(p.enc))))
		c++
	}
	at := int64(c)<<32 | int64(len(p.chunks[c]))
	p.chunks[c] = append(p.chunks[c], p.enc...)
	if int(rank) == len(p.first) {
		p.first = append(p.first, at)
	} else {
		if p.more == nil {
			p.more = map[int32][]int64{}
		}
		p.more[rank] = append(p.more[rank], at)
	}
	p.n += int64(len(p.cur))
	p.cur = p.cur[:0]
	return nil
}

// size returns the bytes the encoded runs take.
func (p *postingRuns) size() int {
	n := 0
	for _, c := range p.chunks {
		n += len(c)
	}
	return n
}

// decode appends the postings of the run encoded at at (chunk<<32 |
// offset) to run.
func (p *postingRuns) decode(run []posting, at int64) []posting {
	data := p.chunks[at>>32][at&(1<<32-1):]
	next := func() uint64 {
		v, k := binary.Uvarint(data)
		data = data[k:]
		return v
	}
	block := int32(0)
	for n := next(); n > 0; n-- {
		var x posting
		block += int32(next())
		x.block = block
		for f := range x.tf {
			x.tf[f] = uint32(next())
		}
		run = append(run, x)
	}
	return run
}

// digest digests the postings flushed, terms[r] being the term first
// seen r-th: each term in lexical order, then its postings' count and
// its postings by block position (a block posted twice under a term, which
// is damage, by its frequencies, so that the digest does not depend on
// the order the postings were read in). It returns how many postings
// repeat a block of their term (DuplicatePostings), and an error when a
// term has no run (flush was not called for it).
func (p *postingRuns) digest(d digester, terms []string) (dups int, err error) {
	byText := make([]int32, len(terms)) // lexical rank → first-seen rank
	for i := range byText {
		byText[i] = int32(i)
	}
	slices.SortFunc(byText, func(a, b int32) int { return strings.Compare(terms[a], terms[b]) })
	var run []posting
	for _, r := range byText {
		if int(r) >= len(p.first) {
			return 0, fmt.Errorf("verify: no postings kept for term %q", terms[r])
		}
		run = p.decode(run[:0], p.first[r])
		if later := p.more[r]; len(later) > 0 {
			for _, off := range later {
				run = p.decode(run, off)
			}
			slices.SortFunc(run, byBlock)
		}
		d.str(terms[r]) // the term, its posting count, its postings
		d.int(int64(len(run)))
		for k, x := range run {
			if k > 0 && x.block == run[k-1].block {
				dups++
			}
			d.int(int64(x.block))
			for _, tf := range x.tf {
				d.int(int64(tf))
			}
		}
	}
	return dups, nil
}

// byBlock orders postings by block position, then by frequencies.
func byBlock(a, b posting) int {
	if c := cmp.Compare(a.block, b.block); c != 0 {
		return c
	}
	return slices.Compare(a.tf[:], b.tf[:])
}

// sortRun sorts run by block position, then frequencies (byBlock), every
// block in [0, blocks). A long run (a frequent term's) is sorted by radix:
// block positions are dense and below the blocks' count. One sort of all
// 76M postings at 1M passages took 17 s of CPU; comparison sorts of each
// run apart still took 12 s.
func sortRun(run []posting, rs *postingRadix, blocks int32) {
	if len(run) < radixMinRun {
		slices.SortFunc(run, byBlock)
		return
	}
	rs.sort(run, blocks)
	for i := 0; i < len(run); { // equal blocks (damage) by their frequencies
		j := i + 1
		for j < len(run) && run[j].block == run[i].block {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(run[i:j], byBlock)
		}
		i = j
	}
}

// posting is a posting as verify reads it: its block's position in the
// canonical order and its frequencies per field (the term is its run's,
// see postingRuns).
type posting struct {
	block int32
	tf    [fts.NumFields]uint32
}

// radixMinRun is the shortest run of postings postingRadix sorts; shorter
// ones take a comparison sort.
const radixMinRun = 1024

// postingRadix sorts runs of postings by block position, least
// significant digit first (radixBits at a time, stable), reusing its
// buffers from run to run.
type postingRadix struct {
	tmp   []posting
	count [1<<radixBits + 1]int
}

const radixBits = 11

// sort sorts run by block, every block in [0, n): stable, so equal
// blocks keep their order.
func (rs *postingRadix) sort(run []posting, n int32) {
	if cap(rs.tmp) < len(run) {
		rs.tmp = make([]posting, len(run))
	}
	src, dst := run, rs.tmp[:len(run)]
	for shift := uint(0); shift == 0 || n>>shift > 0; shift += radixBits {
		clear(rs.count[:])
		for _, p := range src {
			rs.count[(uint32(p.block)>>shift)&(1<<radixBits-1)+1]++
		}
		for i := 1; i < len(rs.count); i++ {
			rs.count[i] += rs.count[i-1]
		}
		for _, p := range src {
			k := (uint32(p.block) >> shift) & (1<<radixBits - 1)
			dst[rs.count[k]] = p
			rs.count[k]++
		}
		src, dst = dst, src
	}
	if &src[0] != &run[0] {
		copy(run, src)
	}
}
