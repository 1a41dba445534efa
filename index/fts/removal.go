package fts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// A removal (a delete's, or an ingest's replaced blocks) is one row of
// fts_removals: one BLOB holding the blocks it tombstoned and its changes
// to the document frequencies (sql/0016_fts_removals.sql). One row, not a
// row per block and per term, because each append is a statement on the
// delete's path, and a BLOB column costs a commit less than list columns.
//
//	uvarint nblocks
//	nblocks × varint gap             block id minus the previous one (the
//	                                 first: minus 0), ascending
//	uvarint nterms
//	nterms × (uvarint gap,           term id minus the previous one
//	          varint df, varint df_body, varint df_context)
//
// The frequency changes of a removal are negative; the codec does not
// require it.

// errRemoval is wrapped by the errors of a damaged fts_removals row.
var errRemoval = errors.New("fts: damaged removal row")

// encodeRemoval encodes killed (any order; written ascending) and the
// changes df.
func encodeRemoval(killed []int64, changes map[int32]df) []byte {
	blocks := slices.Clone(killed)
	slices.Sort(blocks)
	terms := make([]int32, 0, len(changes))
	for id := range changes {
		terms = append(terms, id)
	}
	slices.Sort(terms)
	out := make([]byte, 0, 2+3*len(blocks)+6*len(terms))
	out = binary.AppendUvarint(out, uint64(len(blocks)))
	prev := int64(0)
	for _, b := range blocks {
		out = binary.AppendVarint(out, b-prev)
		prev = b
	}
	out = binary.AppendUvarint(out, uint64(len(terms)))
	prevTerm := int32(0)
	for _, id := range terms {
		out = binary.AppendUvarint(out, uint64(id-prevTerm))
		prevTerm = id
		for _, d := range changes[id] {
			out = binary.AppendVarint(out, int64(d))
		}
	}
	return out
}

// decodeRemoval calls block for each block of an encoded removal, then
// term for each term with its changes. Damaged data (truncated, trailing
// bytes, a count larger than the data, a negative block id, a term id or a
// change out of range) is an error wrapping errRemoval.
func decodeRemoval(data []byte, block func(id int64) error, term func(id int32, d df) error) error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", errRemoval, what) }
	uv := func() (uint64, bool) {
		v, k := binary.Uvarint(data)
		if k <= 0 {
			return 0, false
		}
		data = data[k:]
		return v, true
	}
	sv := func() (int64, bool) {
		v, k := binary.Varint(data)
		if k <= 0 {
			return 0, false
		}
		data = data[k:]
		return v, true
	}
	n, ok := uv()
	if !ok || n > uint64(len(data)) { // a block takes a byte at least
		return bad("block count")
	}
	prev := int64(0)
	for i := range n {
		gap, ok := sv()
		if !ok {
			return bad("truncated block ids")
		}
		if (i > 0 && gap <= 0) || (gap > 0 && prev > math.MaxInt64-gap) || prev+gap < 0 {
			return bad("block ids not ascending or negative")
		}
		prev += gap
		if err := block(prev); err != nil {
			return err
		}
	}
	if n, ok = uv(); !ok || n > uint64(len(data))/4 { // a term takes four bytes at least
		return bad("term count")
	}
	prevTerm := int64(0)
	for i := range n {
		gap, ok := uv()
		if !ok || gap > math.MaxInt32 || (i > 0 && gap == 0) || prevTerm+int64(gap) > math.MaxInt32 {
			return bad("term ids not ascending or out of range")
		}
		prevTerm += int64(gap)
		var d df
		for f := range d {
			v, ok := sv()
			if !ok || v < math.MinInt32 || v > math.MaxInt32 {
				return bad("document frequency change")
			}
			d[f] = int32(v)
		}
		if err := term(int32(prevTerm), d); err != nil {
			return err
		}
	}
	if len(data) > 0 {
		return bad("trailing bytes")
	}
	return nil
}
