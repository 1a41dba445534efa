package fts

import (
	"hash/maphash"
	"math/bits"
)

// maxTermLen is the longest term the dictionary holds, in bytes (the
// analyzers stop at analysis.MaxTermBytes, 100).
const maxTermLen = 1<<16 - 1

// dict is the dictionary in memory: term → term id. A map[string]int32
// took about 56 bytes a term with the term's own allocation (39 MB of a
// 200k-passage build's heap, about 700,000 terms) and gave the collector
// a pointer to follow per term. dict keeps every term's bytes in one
// arena, an 8-byte location per id, and an open-addressing table of ids
// (4 bytes a slot, at most 3/4 full): about 17 bytes a term besides its
// bytes, and no pointers. It is not safe for concurrent writes; the Index's lock
// guards it as it guarded the map.
type dict struct {
	arena []byte
	loc   []uint64 // by id: offset<<16 | length; 0: no term
	slots []int32  // id+1; 0: empty
	n     int      // terms
	seed  maphash.Seed
}

func newDict() *dict { return &dict{seed: maphash.MakeSeed()} }

// term returns the term of id, "" if none.
func (d *dict) term(id int32) string {
	if id < 0 || int(id) >= len(d.loc) || d.loc[id] == 0 {
		return ""
	}
	off, n := d.loc[id]>>16, d.loc[id]&maxTermLen
	return string(d.arena[off : off+n])
}

// termBytes is term without a copy: valid until the next put.
func (d *dict) termBytes(id int32) []byte {
	off, n := d.loc[id]>>16, d.loc[id]&maxTermLen
	return d.arena[off : off+n]
}

// get returns the id of t.
func (d *dict) get(t string) (int32, bool) {
	if d.n == 0 {
		return 0, false
	}
	mask := uint64(len(d.slots) - 1)
	for i := maphash.String(d.seed, t) & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s == 0 {
			return 0, false
		}
		if string(d.termBytes(s-1)) == t {
			return s - 1, true
		}
	}
}

// reserve sizes an empty dictionary for terms terms of bytes bytes in
// all, ids up to maxID, so that loading them grows nothing (at 639k
// terms the doublings and rehashes took a fifth of Load), and leaves
// room (withRoom) for the terms the next writes add: without it a
// process's first add copied the whole dictionary. An id past 4 × terms
// + 1,024 (a damaged file) reserves no ids: put grows as before.
func (d *dict) reserve(terms, bytes int, maxID int32) {
	if d.n != 0 || terms <= 0 {
		return
	}
	size := 1024
	for size*3 < (withRoom(terms)+1)*4 {
		size *= 2
	}
	d.slots = make([]int32, size)
	d.arena = make([]byte, 0, withRoom(bytes))
	if maxID >= 0 && int64(maxID) < 4*int64(terms)+1024 {
		d.loc = make([]uint64, 0, withRoom(int(maxID)+1))
	}
}

// withRoom is the capacity a loaded array of n elements gets: n plus an
// eighth and 1,024, so that the writes after a load append in place until
// the index has grown by an eighth (then the arena, locations and
// frequencies grow as append does, the blocks by a quarter, the slots
// double). In a CPU profile of a process's first add of 1,000 passages
// at 100k (bench-fts -writes 1), the copies of the dictionary, the
// document frequencies and the blocks took 110 of its 310 ms. The room
// is heap by the runtime's accounting (GOGC, GOMEMLIMIT); it is resident
// where written, where the heap reused pages (make zeroes them), and for
// the hash slots, which inserts touch all over: the slot table, a power
// of two, doubles when the room crosses one (4 bytes a slot). About 3 MB
// at 100k passages (605k terms) besides the slots.
func withRoom(n int) int { return n + n/8 + 1024 }

// putNew adds t with id unless t is present (dup), with one probe of the
// table where get and put took two (Load, 639k terms at 1M). id has no
// term yet (has); 0 < len(t) ≤ maxTermLen, which the caller checks.
func (d *dict) putNew(t string, id int32) (dup bool) {
	if (d.n+1)*4 > len(d.slots)*3 {
		d.grow()
	}
	mask := uint64(len(d.slots) - 1)
	i := maphash.String(d.seed, t) & mask
	for ; d.slots[i] != 0; i = (i + 1) & mask {
		if string(d.termBytes(d.slots[i]-1)) == t {
			return true
		}
	}
	d.setLoc(id, len(t))
	d.arena = append(d.arena, t...)
	d.slots[i] = id + 1
	d.n++
	return false
}

// has reports whether id has a term.
func (d *dict) has(id int32) bool {
	return id >= 0 && int(id) < len(d.loc) && d.loc[id] != 0
}

// setLoc records that id's term, of n bytes, is appended to the arena
// next.
func (d *dict) setLoc(id int32, n int) {
	if int(id) >= len(d.loc) {
		if int(id) < cap(d.loc) {
			d.loc = d.loc[:int(id)+1] // reserved: zeroed by make
		} else {
			d.loc = append(d.loc, make([]uint64, int(id)+1-len(d.loc))...)
		}
	}
	d.loc[id] = uint64(len(d.arena))<<16 | uint64(n)
}

// put adds t with id (neither present yet; 0 < len(t) ≤ maxTermLen,
// which the callers check).
func (d *dict) put(t string, id int32) { putAbsent(d, t, id) }

// putTrusted is put for an image's term (image.go), whose terms come from
// a dictionary and whose payload's SHA-256 matched, so no term is in it
// twice. It skips putNew's probes that compare terms, most of decoding
// an image's dictionary.
func (d *dict) putTrusted(t []byte, id int32) { putAbsent(d, t, id) }

// putAbsent adds t, known absent, with id.
func putAbsent[T string | []byte](d *dict, t T, id int32) {
	if (d.n+1)*4 > len(d.slots)*3 {
		d.grow()
	}
	d.setLoc(id, len(t))
	d.arena = append(d.arena, t...)
	d.insert(id)
	d.n++
}

// insert puts id's slot in the table.
func (d *dict) insert(id int32) {
	mask := uint64(len(d.slots) - 1)
	i := maphash.Bytes(d.seed, d.termBytes(id)) & mask
	for d.slots[i] != 0 {
		i = (i + 1) & mask
	}
	d.slots[i] = id + 1
}

// grow doubles the table (at least 1,024 slots) and reinserts every term.
func (d *dict) grow() {
	size := max(1024, 1<<bits.Len(uint(len(d.slots))))
	d.slots = make([]int32, size)
	for id, l := range d.loc {
		if l != 0 {
			d.insert(int32(id))
		}
	}
}

// drop removes the terms of ids, rebuilding the arena and the table from
// the terms that stay.
func (d *dict) drop(ids []int32) {
	for _, id := range ids {
		if id >= 0 && int(id) < len(d.loc) && d.loc[id] != 0 {
			d.loc[id] = 0
			d.n--
		}
	}
	old := d.arena
	d.arena = make([]byte, 0, len(old))
	for id, l := range d.loc {
		if l != 0 {
			off, n := l>>16, l&maxTermLen
			d.loc[id] = uint64(len(d.arena))<<16 | n
			d.arena = append(d.arena, old[off:off+n]...)
		}
	}
	d.slots = nil
	if d.n > 0 {
		for len(d.slots)*3 < d.n*4 || len(d.slots) == 0 {
			d.slots = make([]int32, max(1024, 2*len(d.slots)))
		}
		for id, l := range d.loc {
			if l != 0 {
				d.insert(int32(id))
			}
		}
	}
}

// each calls fn with every term and its id, in id order.
func (d *dict) each(fn func(t string, id int32)) {
	for id, l := range d.loc {
		if l != 0 {
			fn(d.term(int32(id)), int32(id))
		}
	}
}
