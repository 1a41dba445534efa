package blobstore

// Reading every record of a store in the pack layout (ScanRecords,
// ScanRecordsSince): moved out of packlist.go (listing and rewriting)
// unchanged.

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
)

// scanTries bounds how many times scanPacked lists again when a pack it
// listed was removed before it read it (another Store's Repack).
const scanTries = 5

// errPackGone is a listed pack that was removed before it was read.
var errPackGone = errors.New("removed since the listing")

// scanPacked is ScanRecords in the pack layout: the packed records (the
// newest entry of each document, unless a tombstone), and the loose
// records of the documents no pack names. A pack removed between the
// listing and its read (another Store's Repack wrote its live entries
// into a new one first) makes it list again, up to scanTries times.
func (s *Store) scanPacked(ctx context.Context, loose []string, prev *RecordScan, keep bool) (*RecordScan, error) {
	for try := 1; ; try++ {
		sc, err := s.scanPackedOnce(ctx, loose, prev, keep)
		if errors.Is(err, errPackGone) {
			if try < scanTries && ctx.Err() == nil {
				continue
			}
			return nil, fmt.Errorf("%w (listed %d times)", err, try)
		}
		return sc, err
	}
}

// scanPackedOnce lists the packs and reads their records once, those of
// prev's entries excepted (ScanRecordsSince); keep: the result holds the
// packed records by key, for a later scan (scanRecords).
func (s *Store) scanPackedOnce(ctx context.Context, loose []string, prev *RecordScan, keep bool) (*RecordScan, error) {
	if err := s.loadPacks(ctx, true); err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	x := s.px
	// The loose records that a pack names are its (newer); at 1M packed
	// records a set of every key named, of hex strings, cost more than
	// the rest of a scan that reads nothing (ScanRecordsSince).
	looseKeys := map[[16]byte]bool{}
	for _, id := range loose {
		var k [16]byte
		if _, err := hex.Decode(k[:], []byte(id)); err == nil {
			looseKeys[k] = false
		}
	}
	// slots are the live entries in the listing's order: each either a
	// record prev read (rec) or one to read (it).
	var slots []scanSlot
	var items []*scanItem
	cursor := 0
	x.mu.RLock()
	// Sized once: grown by append, the slots of 1M records allocated 258
	// MB, five times what they hold.
	slots = make([]scanSlot, 0, x.recs.entries())
	if prev == nil {
		items = make([]*scanItem, 0, cap(slots))
	}
	damaged := append([]DamagedRecord(nil), x.damaged...)
	x.recs.each(x.packs, func(e ent[[16]byte]) {
		if len(looseKeys) > 0 {
			if _, ok := looseKeys[e.key]; ok {
				looseKeys[e.key] = true
			}
		}
		if e.n == 0 || x.tombs[e.key] {
			return
		}
		if prev != nil {
			if r, ok := prev.packed.find(&cursor, e.key); ok && r.n == e.n && r.crc == e.crc {
				slots = append(slots, scanSlot{e: e, rec: r.rec})
				return
			}
		}
		it := &scanItem{id: hex.EncodeToString(e.key[:]), p: x.packs[e.pack], e: e}
		items = append(items, it)
		slots = append(slots, scanSlot{e: e, it: it})
	})
	x.mu.RUnlock()
	// One read per pack, of the span its records take (a batch's records
	// lie together), 8 packs at a time; none for a record prev read.
	byPack := map[*packInfo][]*scanItem{}
	var order []*packInfo
	for _, it := range items {
		if byPack[it.p] == nil {
			order = append(order, it.p)
		}
		byPack[it.p] = append(byPack[it.p], it)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, p := range order {
		g.Go(func() error {
			its := byPack[p]
			// In 64 bits: off+n of a damaged entry must not wrap.
			lo, hi := uint64(its[0].e.off), uint64(its[0].e.off)+uint64(its[0].e.n)
			for _, it := range its {
				lo, hi = min(lo, uint64(it.e.off)), max(hi, uint64(it.e.off)+uint64(it.e.n))
			}
			span, err := s.readRange(gctx, p.key(), int64(lo), int64(hi-lo))
			if errors.Is(err, ErrNotFound) {
				return fmt.Errorf("list records: %s: %w: %w", p.key(), errPackGone, err)
			}
			for _, it := range its {
				var data []byte
				rerr := err
				if rerr == nil {
					data = span[uint64(it.e.off)-lo : uint64(it.e.off)-lo+uint64(it.e.n)]
					if crc32.Checksum(data, castagnoli) != it.e.crc {
						rerr = fmt.Errorf("%s: entry at %d+%d: checksum mismatch: %w", p.key(), it.e.off, it.e.n, ErrCorrupt)
					}
				} else if errors.Is(rerr, errPackDamaged) {
					rerr = fmt.Errorf("%v: %w", rerr, ErrCorrupt)
				}
				if rerr == nil {
					it.rec, rerr = decodeRecordOf(it.id, data)
				}
				if errors.Is(rerr, ErrCorrupt) {
					it.bad = &DamagedRecord{Key: p.key() + "#" + it.id, DocID: it.id, Source: salvageSource(it.id, data),
						Reason: strings.TrimSuffix(rerr.Error(), ": "+ErrCorrupt.Error())}
					continue
				}
				if rerr != nil {
					return fmt.Errorf("list records: read %s: %w", p.key(), rerr)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	recs := make([]*Record, 0, len(slots))
	var packed packedRecords
	if keep {
		packed.keys = make([][16]byte, 0, len(slots))
		packed.vals = make([]packedRecord, 0, len(slots))
	}
	for _, sl := range slots {
		rec := sl.rec
		if sl.it != nil {
			rec = sl.it.rec
			if sl.it.bad != nil {
				damaged = append(damaged, *sl.it.bad)
			}
		}
		if rec != nil {
			recs = append(recs, rec)
			if keep {
				packed.keys = append(packed.keys, sl.e.key)
				packed.vals = append(packed.vals, packedRecord{sl.e.n, sl.e.crc, rec})
			}
		}
	}
	packed.sort()
	var rest []string
	for _, id := range loose {
		var k [16]byte
		if _, err := hex.Decode(k[:], []byte(id)); err != nil || !looseKeys[k] {
			rest = append(rest, id)
		}
	}
	lrecs, lbad, err := s.scanLoose(ctx, rest)
	if err != nil {
		return nil, err
	}
	recs = append(recs, lrecs...)
	damaged = append(damaged, lbad...)
	if byDocID := func(a, b *Record) int { return strings.Compare(a.DocID, b.DocID) }; !slices.IsSortedFunc(recs, byDocID) {
		slices.SortFunc(recs, byDocID) // the listing is in key order, the doc ids' order: only loose records to place
	}
	sort.Slice(damaged, func(i, j int) bool { return damaged[i].Key < damaged[j].Key })
	return &RecordScan{Records: recs, Damaged: damaged, packed: packed}, nil
}

// scanSlot is a live entry of scanPackedOnce's listing: a record a
// previous scan read (rec), or one to read (it).
type scanSlot struct {
	e   ent[[16]byte]
	rec *Record
	it  *scanItem
}

// scanItem is a record scanPackedOnce reads: its doc id, pack and entry,
// and what the read found (a record, or damage).
type scanItem struct {
	id  string
	p   *packInfo
	e   ent[[16]byte]
	rec *Record
	bad *DamagedRecord
}

// packedRecords are the packed records a scan read (RecordScan), by key:
// keys ascending, vals beside them.
type packedRecords struct {
	keys [][16]byte
	vals []packedRecord
}

// sort puts the keys in order (the listing's order already is, shard by
// shard: then only a check).
func (p *packedRecords) sort() {
	if slices.IsSortedFunc(p.keys, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
		return
	}
	idx := make([]int, len(p.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return bytes.Compare(p.keys[a][:], p.keys[b][:]) })
	keys, vals := make([][16]byte, len(idx)), make([]packedRecord, len(idx))
	for i, j := range idx {
		keys[i], vals[i] = p.keys[j], p.vals[j]
	}
	p.keys, p.vals = keys, vals
}

// find returns the record of key k. *cursor is where the last find of
// the caller's ascending walk ended: the next key is usually the next
// one there; else a binary search.
func (p *packedRecords) find(cursor *int, k [16]byte) (packedRecord, bool) {
	if c := *cursor; c < len(p.keys) && p.keys[c] == k {
		*cursor = c + 1
		return p.vals[c], true
	}
	i, ok := slices.BinarySearchFunc(p.keys, k, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	if !ok {
		return packedRecord{}, false
	}
	*cursor = i + 1
	return p.vals[i], true
}
