package blobstore

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The sharded pack index against a model: packs of random blobs and
// records (keys drawn from a small pool, so that packs overlap, many
// sharing a first byte), some packs rewritten at the same sequence number
// or repacked. After every step each key's lookup is the model's winner
// (highest sequence number, then the later pack), and each lists every
// live key once, in strictly increasing order, across the shards.
func TestPackIndexShardsMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 12))
	pool := make([][32]byte, 3000)
	for i := range pool {
		for j := range pool[i] {
			pool[i][j] = byte(rng.UintN(256))
		}
		if i%3 == 0 {
			pool[i][0] = 7 // a crowded shard
		}
	}
	packEntries := map[string][]packEntry{} // each pack's entries, for the model
	x := newPackIndex()
	var seq uint64
	check := func(step int) {
		t.Helper()
		// The model: every pack's entries, the winner per key.
		blobs := map[[32]byte]ent[[32]byte]{}
		recs := map[[16]byte]ent[[16]byte]{}
		for pi, p := range x.packs {
			if p.gone {
				continue
			}
			for _, e := range packEntries[p.name] {
				switch e.kind {
				case kindBlob:
					w, ok := blobs[e.key]
					if !ok || newer(x.packs, uint32(pi), w.pack) {
						blobs[e.key] = ent[[32]byte]{key: e.key, pack: uint32(pi), off: uint32(e.off), n: uint32(e.n)}
					}
				default:
					k := e.docKey()
					n := uint32(e.n)
					if e.kind == kindTombstone {
						n = 0
					}
					w, ok := recs[k]
					if !ok || newer(x.packs, uint32(pi), w.pack) {
						recs[k] = ent[[16]byte]{key: k, pack: uint32(pi), off: uint32(e.off), n: n}
					}
				}
			}
		}
		for _, k := range pool {
			got, _, ok := x.blob(k)
			want, wok := blobs[k]
			if ok != wok || (ok && (got.pack != want.pack || got.off != want.off || got.n != want.n)) {
				t.Fatalf("step %d: blob %x: got %+v %v, want %+v %v", step, k[:4], got, ok, want, wok)
			}
			var dk [16]byte
			copy(dk[:], k[:16])
			gr, _, ok := x.record(dk)
			wr, wok := recs[dk]
			if ok != wok || (ok && (gr.pack != wr.pack || gr.off != wr.off || gr.n != wr.n)) {
				t.Fatalf("step %d: record %x: got %+v %v, want %+v %v", step, dk[:4], gr, ok, wr, wok)
			}
		}
		// blobPacks (Repack's erasure): every live pack holding the blob.
		holders := map[[32]byte]map[uint32]bool{}
		for pi, p := range x.packs {
			if p.gone {
				continue
			}
			for _, e := range packEntries[p.name] {
				if e.kind == kindBlob {
					if holders[e.key] == nil {
						holders[e.key] = map[uint32]bool{}
					}
					holders[e.key][uint32(pi)] = true
				}
			}
		}
		for _, k := range pool {
			got := map[uint32]bool{}
			x.blobPacks(&k, func(p uint32) { got[p] = true })
			if len(got) != len(holders[k]) {
				t.Fatalf("step %d: blobPacks(%x) = %v, want %v", step, k[:4], got, holders[k])
			}
			for p := range got {
				if !holders[k][p] {
					t.Fatalf("step %d: blobPacks(%x) = %v, want %v", step, k[:4], got, holders[k])
				}
			}
		}
		var prev []byte
		nb := 0
		x.blobs.each(x.packs, func(e ent[[32]byte]) {
			if prev != nil && bytes.Compare(prev, e.key[:]) >= 0 {
				t.Fatalf("step %d: each: %x after %x", step, e.key[:4], prev[:4])
			}
			prev = append(prev[:0], e.key[:]...)
			if w := blobs[e.key]; w.pack != e.pack {
				t.Fatalf("step %d: each: blob %x in pack %d, want %d", step, e.key[:4], e.pack, w.pack)
			}
			nb++
		})
		if nb != len(blobs) {
			t.Fatalf("step %d: each listed %d blobs, want %d", step, nb, len(blobs))
		}
		prev, nr := nil, 0
		x.recs.each(x.packs, func(e ent[[16]byte]) {
			if prev != nil && bytes.Compare(prev, e.key[:]) >= 0 {
				t.Fatalf("step %d: each: %x after %x", step, e.key[:4], prev[:4])
			}
			prev = append(prev[:0], e.key[:]...)
			nr++
		})
		if nr != len(recs) {
			t.Fatalf("step %d: each listed %d records, want %d", step, nr, len(recs))
		}
	}
	for step := range 120 {
		switch {
		case step%17 == 16:
			// A repack: a live pack's winning entries rewritten into a
			// pack of its sequence number, then the pack removed.
			var old *packInfo
			var oi uint32
			for _, i := range x.byName {
				old, oi = x.packs[i], i
				break
			}
			var es []packEntry
			for _, e := range packEntries[old.name] {
				if e.kind == kindBlob {
					if w, _, ok := x.blob(e.key); ok && w.pack == oi {
						es = append(es, e)
					}
				} else if w, _, ok := x.record(e.docKey()); ok && w.pack == oi {
					es = append(es, e)
				}
			}
			name := packName(old.seq, randSuffix())
			packEntries[name] = es
			x.addLocked(&packInfo{name: name, seq: old.seq}, es)
			x.removeLocked([]string{old.name})
		default:
			s := seq + 1
			if step%11 == 10 {
				s = seq // a rewrite: the same sequence number, added later
			} else {
				seq++
			}
			var es []packEntry
			for range 1 + rng.IntN(200) {
				k := pool[rng.IntN(len(pool))]
				e := packEntry{key: k, off: uint64(8 + rng.IntN(1<<20)), n: uint64(1 + rng.IntN(1000))}
				switch rng.IntN(3) {
				case 0:
					e.kind = kindBlob
				case 1:
					e.kind = kindRecord
				default:
					e.kind = kindTombstone
				}
				// One entry of a kind and key a pack (packBuilder keeps the last).
				dup := false
				for _, o := range es {
					if o.key == e.key && (o.kind == kindBlob) == (e.kind == kindBlob) {
						dup = true
					}
				}
				if !dup {
					es = append(es, e)
				}
			}
			name := packName(s, randSuffix())
			packEntries[name] = es
			x.addLocked(&packInfo{name: name, seq: s}, es)
		}
		check(step)
	}
	x.blobs.compact(x.packs)
	x.recs.compact(x.packs)
	check(-1)
	if n := x.recs.runCount(); n > tableShards {
		t.Errorf("after compact: %d runs of records, want one a shard at most", n)
	}
}
