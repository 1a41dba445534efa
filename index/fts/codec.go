package fts

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
)

// Posting is one block's occurrences of a term.
type Posting struct {
	Block int64
	TF    [NumFields]uint32 // occurrences per field
}

// A posting list is the postings of one term in one segment, ascending by
// block id, stored as one BLOB:
//
//	uvarint n                         number of postings
//	n × (uvarint gap, uvarint tf_body, uvarint tf_context)
//
// where gap is the block id minus the previous posting's (the first
// posting's gap is its block id).

// encode appends the encoding of ps (ascending block ids) to dst, which
// grows at most once (by encodedLen).
func encode(dst []byte, ps []Posting) []byte {
	dst = slices.Grow(dst, encodedLen(ps))
	dst = binary.AppendUvarint(dst, uint64(len(ps)))
	prev := int64(0)
	for _, p := range ps {
		dst = binary.AppendUvarint(dst, uint64(p.Block-prev))
		for _, tf := range p.TF {
			dst = binary.AppendUvarint(dst, uint64(tf))
		}
		prev = p.Block
	}
	return dst
}

// encodedLen is the length of encode's output for ps (ascending block ids):
// one pass over the postings, so that a list is allocated once at its size
// instead of growing by doubling (merges and Invert encode every list).
func encodedLen(ps []Posting) int {
	n := uvarintLen(uint64(len(ps)))
	prev := int64(0)
	for _, p := range ps {
		n += uvarintLen(uint64(p.Block - prev))
		for _, tf := range p.TF {
			n += uvarintLen(uint64(tf))
		}
		prev = p.Block
	}
	return n
}

// uvarintLen is the length of binary.AppendUvarint's encoding of v.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

var errCorrupt = errors.New("fts: corrupt posting list")

// decoder iterates an encoded posting list.
type decoder struct {
	data []byte
	left uint64
	prev int64
}

func newDecoder(data []byte) (decoder, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 {
		return decoder{}, errCorrupt
	}
	return decoder{data: data[k:], left: n}, nil
}

// next decodes the next posting into p; ok is false at the end. A
// truncated list is an error.
func (d *decoder) next(p *Posting) (ok bool, err error) {
	if d.left == 0 {
		return false, nil
	}
	gap, k := binary.Uvarint(d.data)
	if k <= 0 {
		return false, errCorrupt
	}
	d.data = d.data[k:]
	d.prev += int64(gap)
	p.Block = d.prev
	for f := range p.TF {
		tf, k := binary.Uvarint(d.data)
		if k <= 0 {
			return false, errCorrupt
		}
		d.data = d.data[k:]
		p.TF[f] = uint32(tf)
	}
	d.left--
	return true, nil
}

// decodeAll appends the postings of data to ps.
func decodeAll(ps []Posting, data []byte) ([]Posting, error) {
	d, err := newDecoder(data)
	if err != nil {
		return ps, err
	}
	var p Posting
	for {
		ok, err := d.next(&p)
		if err != nil || !ok {
			return ps, err
		}
		ps = append(ps, p)
	}
}
