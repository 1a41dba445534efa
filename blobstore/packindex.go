package blobstore

// The in-memory index of a store's packs: built from their footers on first
// use, kept by the store's own writes. Each kind's keys are split into 256
// shards by their first byte (keys are hashes: the shards are even), and
// each shard is an LSM of sorted runs, one per pack added and merged two
// by two (a run merges into the one before while that one is not twice its
// size), so it costs O(log n) binary searches a lookup and O(n log n)
// copies in all, and no map of strings: 48 bytes an entry for a blob, 32
// for a record (TestPackIndexMemory measures it). The shards bound what a
// merge holds at once: the runs it merges and their merged copy are a
// shard's, a 256th of the index, where one table's last merges held the
// whole index twice over (155 MB of a 1M-passage build's 260 MB live
// heap).

import (
	"bytes"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ent is one entry of the index: a key, the pack holding it (an index into
// packIndex.packs), where its data lies in that pack, and its CRC-32C.
// For a record, n == 0 is a tombstone (a record's JSON is never empty).
type ent[K any] struct {
	key          K
	pack, off, n uint32
	crc          uint32
}

// newer reports whether pack a's entries win over pack b's: a higher
// sequence number, or the same one and added later (a rewrite of b, which
// holds the same live entries).
func newer(packs []*packInfo, a, b uint32) bool {
	return packs[a].seq > packs[b].seq || (packs[a].seq == packs[b].seq && a > b)
}

// byKey sorts entries by key, comparing them in place (no copy escapes).
type byKey[K any] struct {
	e   []ent[K]
	cmp func(a, b *K) int
}

func (s byKey[K]) Len() int           { return len(s.e) }
func (s byKey[K]) Less(i, j int) bool { return s.cmp(&s.e[i].key, &s.e[j].key) < 0 }
func (s byKey[K]) Swap(i, j int)      { s.e[i], s.e[j] = s.e[j], s.e[i] }

// tableShards is the number of shards of a table: one per value of a
// key's first byte.
const tableShards = 256

// packKey is the key of a table: a blob id or a record's doc key.
type packKey interface{ [16]byte | [32]byte }

// table is one kind's entries: for each shard (a key's first byte), its
// sorted runs, oldest first. lost, when set, is called with each entry
// that add or compact drops for a newer one of the same key (its pack not
// gone), under the index's write lock (each's merges, under the read
// lock, do not call it).
type table[K packKey] struct {
	shards [tableShards][][]ent[K]
	cmp    func(a, b *K) int
	lost   func(e *ent[K])
}

func cmp16(a, b *[16]byte) int { return bytes.Compare(a[:], b[:]) }
func cmp32(a, b *[32]byte) int { return bytes.Compare(a[:], b[:]) }

// runs returns the runs of k's shard.
func (t *table[K]) runs(k *K) [][]ent[K] { return t.shards[(*k)[0]] }

// lookup returns the entry of k in the pack with the highest sequence
// number, skipping packs that are gone.
func (t *table[K]) lookup(k *K, packs []*packInfo) (ent[K], bool) {
	var best ent[K]
	found := false
	for _, run := range t.runs(k) {
		i := sort.Search(len(run), func(i int) bool { return t.cmp(&run[i].key, k) >= 0 })
		for ; i < len(run) && t.cmp(&run[i].key, k) == 0; i++ {
			p := packs[run[i].pack]
			if p.gone {
				continue
			}
			if !found || newer(packs, run[i].pack, best.pack) {
				best, found = run[i], true
			}
		}
	}
	return best, found
}

// add inserts a pack's entries (any order): sorted, each shard's part
// becomes a new run of that shard (a sub-slice of entries: its array
// lives until every shard has merged its part away), and a shard's runs
// merge while the one before the last is not twice the last's size.
func (t *table[K]) add(entries []ent[K], packs []*packInfo) {
	sort.Sort(byKey[K]{entries, t.cmp})
	for i := 0; i < len(entries); {
		s := entries[i].key[0]
		j := i + 1
		for j < len(entries) && entries[j].key[0] == s {
			j++
		}
		runs := append(t.shards[s], entries[i:j:j])
		for n := len(runs); n >= 2 && len(runs[n-2]) <= 2*len(runs[n-1]); n = len(runs) {
			runs[n-2] = t.merge(runs[n-2], runs[n-1], packs, t.lost)
			runs[n-1] = nil
			runs = runs[:n-1]
		}
		t.shards[s] = runs
		i = j
	}
}

// install makes run (sorted by key, one entry a key) the table's only
// content: each shard's part of it (a sub-slice) its only run. The table
// is empty.
func (t *table[K]) install(run []ent[K]) {
	for i := 0; i < len(run); {
		s := run[i].key[0]
		j := i + 1
		for j < len(run) && run[j].key[0] == s {
			j++
		}
		t.shards[s] = [][]ent[K]{run[i:j:j]}
		i = j
	}
}

// merge merges two sorted runs into one, keeping for each key only the
// entry of the highest sequence number (the others are dead: hidden by a
// newer record or tombstone, or a second copy of a blob) and dropping the
// entries of packs that are gone.
func (t *table[K]) merge(a, b []ent[K], packs []*packInfo, lost func(e *ent[K])) []ent[K] {
	return slices.Clip(t.mergeInto(make([]ent[K], 0, len(a)+len(b)), a, b, packs, lost))
}

// mergeInto is merge appending to out (neither a nor b may share its
// array), which it returns.
func (t *table[K]) mergeInto(out, a, b []ent[K], packs []*packInfo, lost func(e *ent[K])) []ent[K] {
	// push takes a pointer into a or b: a key passed by value to t.cmp
	// would escape, an allocation a comparison.
	push := func(e *ent[K]) {
		if packs[e.pack].gone {
			return
		}
		if n := len(out); n > 0 && t.cmp(&out[n-1].key, &e.key) == 0 {
			if newer(packs, e.pack, out[n-1].pack) {
				if lost != nil {
					lost(&out[n-1])
				}
				out[n-1] = *e
			} else if lost != nil {
				lost(e)
			}
			return
		}
		out = append(out, *e)
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if t.cmp(&a[i].key, &b[j].key) <= 0 {
			push(&a[i])
			i++
		} else {
			push(&b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		push(&a[i])
	}
	for ; j < len(b); j++ {
		push(&b[j])
	}
	return out
}

// compact merges each shard's runs into one, without the entries of
// packs that are gone.
func (t *table[K]) compact(packs []*packInfo) {
	for s := range t.shards {
		var all []ent[K]
		for _, r := range t.shards[s] {
			all = t.merge(all, r, packs, t.lost)
		}
		t.shards[s] = nil
		if len(all) > 0 {
			t.shards[s] = [][]ent[K]{all}
		}
	}
}

// all calls fn with every entry of k in the runs (the losing copies not
// merged away yet too), packs that are gone skipped.
func (t *table[K]) all(k *K, packs []*packInfo, fn func(e ent[K])) {
	for _, run := range t.runs(k) {
		i := sort.Search(len(run), func(i int) bool { return t.cmp(&run[i].key, k) >= 0 })
		for ; i < len(run) && t.cmp(&run[i].key, k) == 0; i++ {
			if !packs[run[i].pack].gone {
				fn(run[i])
			}
		}
	}
}

// entries returns how many entries the runs hold: at least how many
// calls each makes (the losing copies not merged away yet, and the
// entries of packs that are gone, count too).
func (t *table[K]) entries() int {
	n := 0
	for _, runs := range t.shards {
		for _, r := range runs {
			n += len(r)
		}
	}
	return n
}

// each calls fn with the winning entry of every key (the highest sequence
// number, packs that are gone skipped), in key order. A shard of more
// than one run is merged run by run into two scratch buffers used in
// turn, which every shard reuses: it allocates about two shards' worth
// (a merge into a new copy a run allocated 144 MB to encode a multi-pack
// index of 200k blobs and 200k records, TestEncodeMidxStreams).
func (t *table[K]) each(packs []*packInfo, fn func(e ent[K])) {
	var buf [2][]ent[K]
	for _, runs := range t.shards {
		var all []ent[K]
		if len(runs) == 1 {
			all = runs[0]
		} else {
			for i, r := range runs {
				buf[i%2] = t.mergeInto(buf[i%2][:0], all, r, packs, nil)
				all = buf[i%2]
			}
		}
		for _, e := range all {
			if !packs[e.pack].gone {
				fn(e)
			}
		}
	}
}

// view returns a copy of the table that stays as it is while the table
// changes: each shard's list of runs copied, the runs shared (a run is
// never changed once made: add and compact make new ones).
func (t *table[K]) view() table[K] {
	v := table[K]{cmp: t.cmp}
	for s, runs := range t.shards {
		v.shards[s] = slices.Clone(runs)
	}
	return v
}

// runCount counts the runs of every shard.
func (t *table[K]) runCount() int {
	n := 0
	for _, runs := range t.shards {
		n += len(runs)
	}
	return n
}

// packInfo is one pack of the store.
type packInfo struct {
	name string // the file name below packs/
	seq  uint64
	size int64
	mod  time.Time
	gone bool // removed (rewritten or erased): its entries no longer count
	// data is the bytes of its entries' data, entries how many it has.
	data    int64
	entries int
}

func (p *packInfo) key() string { return "packs/" + p.name }

// packIndex is the index of every pack of a store.
type packIndex struct {
	mu      sync.RWMutex
	loaded  bool
	packs   []*packInfo
	byName  map[string]uint32
	blobs   table[[32]byte]
	recs    table[[16]byte]
	maxSeq  uint64
	damaged []DamagedRecord // packs whose index cannot be read
	// dirMod is packs/'s modification time (file://) before the last
	// listing, listedAt when that listing started (refreshPacks).
	dirMod, listedAt time.Time
	// added and removed count the packs added and marked gone, ever;
	// midxAdded and midxRemoved, what they were when the multi-pack index
	// read or written last described the packs (midxPacks of them).
	added, removed         int
	midxAdded, midxRemoved int
	midxPacks              int
	// footersRead counts the footers read (tests, measurements).
	footersRead int
	// seqListings counts nextSeq's listings of packs/ (tests); noSeqFile
	// is set once packs/SEQ could not be locked (no flock here): nextSeq
	// lists from then on.
	seqListings atomic.Int64
	noSeqFile   atomic.Bool
	// tombs are the record removals not yet in a pack (RemoveRecord
	// before SyncRemovals): lookups read them as tombstones.
	tombs map[[16]byte]bool
	// copies are the packs that hold a second (losing) copy of a blob,
	// whose entry a merge dropped: a blob packed by two batches at once.
	// Rare; kept until the pack is gone, so that Repack erases every copy.
	copies map[[32]byte][]uint32
	// hidden are packs this Store is publishing (on disk or uploaded, not
	// indexed yet) or removing (forgotten, not deleted yet): a listing
	// meanwhile must not index them, or a pack removed would come back
	// in memory as a ghost, and a pack being published could be folded
	// away by a Repack before its writer indexes it (review 14).
	hidden map[string]bool
}

// hide keeps name out of the listings (hidden) until unhide or, for a
// pack being published, its addLocked.
func (x *packIndex) hide(name string) {
	x.mu.Lock()
	x.hidden[name] = true
	x.mu.Unlock()
}

func (x *packIndex) unhide(name string) {
	x.mu.Lock()
	delete(x.hidden, name)
	x.mu.Unlock()
}

func newPackIndex() *packIndex {
	x := &packIndex{
		byName: map[string]uint32{},
		blobs:  table[[32]byte]{cmp: cmp32},
		recs:   table[[16]byte]{cmp: cmp16},
		tombs:  map[[16]byte]bool{},
		copies: map[[32]byte][]uint32{},
		hidden: map[string]bool{},
	}
	x.blobs.lost = func(e *ent[[32]byte]) {
		if !slices.Contains(x.copies[e.key], e.pack) {
			x.copies[e.key] = append(x.copies[e.key], e.pack)
		}
	}
	return x
}

// view returns what encodeMidxTo reads of the index (packs, tables,
// copies), as it is now, to be read without mu: the packs and copies
// copied (gone flags and copies change in place), the tables by their
// views. Runs merged away meanwhile stay in memory until the view goes.
// The caller holds mu.
func (x *packIndex) view() *packIndex {
	v := &packIndex{
		packs:  make([]*packInfo, len(x.packs)),
		blobs:  x.blobs.view(),
		recs:   x.recs.view(),
		copies: make(map[[32]byte][]uint32, len(x.copies)),
	}
	for i, p := range x.packs {
		c := *p
		v.packs[i] = &c
	}
	for k, ps := range x.copies {
		v.copies[k] = slices.Clone(ps)
	}
	return v
}

// blobPacks calls fn with the index (in packs) of every pack that holds
// a copy of blob k, winning or not. The caller holds mu.
func (x *packIndex) blobPacks(k *[32]byte, fn func(pack uint32)) {
	x.blobs.all(k, x.packs, func(e ent[[32]byte]) { fn(e.pack) })
	for _, p := range x.copies[*k] {
		if !x.packs[p].gone {
			fn(p)
		}
	}
}

// addLocked adds a pack and its entries, unless it is there already. The
// caller holds mu.
func (x *packIndex) addLocked(p *packInfo, entries []packEntry) {
	delete(x.hidden, p.name) // published
	if _, ok := x.byName[p.name]; ok {
		return // a listing found it first
	}
	n := uint32(len(x.packs))
	x.added++
	x.packs = append(x.packs, p)
	x.byName[p.name] = n
	if p.seq > x.maxSeq {
		x.maxSeq = p.seq
	}
	var bs []ent[[32]byte]
	var rs []ent[[16]byte]
	p.entries = len(entries)
	for _, e := range entries {
		p.data += int64(e.n)
		switch e.kind {
		case kindBlob:
			bs = append(bs, ent[[32]byte]{key: e.key, pack: n, off: uint32(e.off), n: uint32(e.n), crc: e.crc})
		case kindRecord, kindTombstone:
			m := uint32(e.n)
			if e.kind == kindTombstone {
				m = 0
			}
			rs = append(rs, ent[[16]byte]{key: e.docKey(), pack: n, off: uint32(e.off), n: m, crc: e.crc})
		}
	}
	x.blobs.add(bs, x.packs)
	x.recs.add(rs, x.packs)
}

// removeLocked marks packs gone and drops their entries. The caller holds
// mu.
func (x *packIndex) removeLocked(names []string) {
	x.forgetLocked(names)
	x.blobs.compact(x.packs)
	x.recs.compact(x.packs)
	for k, ps := range x.copies {
		ps = slices.DeleteFunc(ps, func(p uint32) bool { return x.packs[p].gone })
		if len(ps) == 0 {
			delete(x.copies, k)
		} else {
			x.copies[k] = ps
		}
	}
}

// forgetLocked marks packs gone: lookups skip their entries, which stay
// in memory until removeLocked (or a merge) drops them. The caller holds
// mu.
func (x *packIndex) forgetLocked(names []string) {
	for _, name := range names {
		if i, ok := x.byName[name]; ok {
			x.removed++
			x.packs[i].gone = true
			delete(x.byName, name)
		}
	}
}

// blob returns where blob k is packed.
func (x *packIndex) blob(k [32]byte) (ent[[32]byte], *packInfo, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.blobs.lookup(&k, x.packs)
	if !ok {
		return e, nil, false
	}
	return e, x.packs[e.pack], true
}

// record returns the packed entry of doc k (n == 0: a tombstone; a pending
// removal reads as one), and whether the packs name k at all.
func (x *packIndex) record(k [16]byte) (ent[[16]byte], *packInfo, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.tombs[k] {
		return ent[[16]byte]{key: k}, nil, true
	}
	e, ok := x.recs.lookup(&k, x.packs)
	if !ok {
		return e, nil, false
	}
	return e, x.packs[e.pack], true
}
