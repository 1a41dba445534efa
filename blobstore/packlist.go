package blobstore

// Listing and rewriting a store in the pack layout.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
)

// packedBlobs lists the packed blobs (the newest copy of each), by id.
func (s *Store) packedBlobs(ctx context.Context) ([]BlobInfo, error) {
	if err := s.loadPacks(ctx, true); err != nil {
		return nil, err
	}
	x := s.px
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []BlobInfo
	x.blobs.each(x.packs, func(e ent[[32]byte]) {
		out = append(out, BlobInfo{ID: "sha256:" + hex.EncodeToString(e.key[:]), Size: int64(e.n), ModTime: x.packs[e.pack].mod})
	})
	return out, nil
}

// mergeBlobInfos merges two lists sorted by id; a packed blob wins over a
// loose one of the same id.
func mergeBlobInfos(packed, loose []BlobInfo) []BlobInfo {
	out := make([]BlobInfo, 0, len(packed)+len(loose))
	i, j := 0, 0
	for i < len(packed) || j < len(loose) {
		switch {
		case j == len(loose) || (i < len(packed) && packed[i].ID < loose[j].ID):
			out = append(out, packed[i])
			i++
		case i == len(packed) || loose[j].ID < packed[i].ID:
			out = append(out, loose[j])
			j++
		default:
			out = append(out, packed[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// RepackOptions say which packs Repack rewrites.
type RepackOptions struct {
	// DropBlobs are blob ids to erase: their loose files are removed and
	// every pack holding one is rewritten without it. The caller checks
	// that no record names them.
	DropBlobs []string
	// MinDead rewrites, besides, each pack whose dead bytes (records
	// hidden by a newer record or tombstone, second copies of a blob) are
	// at least this share of its data: 0 rewrites every pack with a dead
	// entry (erasing every older version of a record); above 1, none.
	MinDead float64
	// FoldBelow folds the packs smaller than this many bytes (and not
	// rewritten for the reasons above), two or more at a time, into
	// packs of up to 32 MiB: the small packs of single writes and of
	// removals' tombstones, each a footer to read and an object to list.
	// 0 folds none.
	FoldBelow int64
}

// RepackResult is what Repack did.
type RepackResult struct {
	Rewritten    int   `json:"rewritten"`     // packs rewritten (or removed, when nothing in them lived)
	Folded       int   `json:"folded"`        // small packs folded together (FoldBelow), counted in Rewritten too
	BytesBefore  int64 `json:"bytes_before"`  // their size
	BytesAfter   int64 `json:"bytes_after"`   // the size of the packs that replaced them
	BlobsDropped int   `json:"blobs_dropped"` // DropBlobs found and removed, packed or loose
	LooseDropped int   `json:"loose_dropped"` // loose records removed that a pack hides
	// Damaged are small packs left out of a fold (FoldBelow) because an
	// entry to copy failed its checksum: left as they are, for escurel
	// verify to report, while the others fold.
	Damaged []string `json:"damaged,omitempty"`
}

// packDamage is rewritePacks' error for an entry of pack p whose CRC does
// not match.
type packDamage struct {
	p   *packInfo
	err error
}

func (e *packDamage) Error() string { return e.err.Error() }
func (e *packDamage) Unwrap() error { return e.err }

// Repack erases blobs and dead entries from the packs: each pack chosen
// (RepackOptions) is written anew, with its sequence number, holding only
// its live entries, durably, before the old one is removed (a crash leaves
// both, the new one equal to the old one for every live entry). It also
// removes the loose records that a pack hides. On a store in the loose
// layout it removes the DropBlobs and nothing else. The caller holds off
// other writers of the store (index: writeMu).
func (s *Store) Repack(ctx context.Context, opts RepackOptions) (*RepackResult, error) {
	res := &RepackResult{}
	if s.px == nil {
		for _, id := range opts.DropBlobs {
			if err := s.DeleteBlob(ctx, id); err != nil {
				return res, err
			}
			res.BlobsDropped++
		}
		return res, nil
	}
	if err := s.loadPacks(ctx, true); err != nil {
		return res, fmt.Errorf("repack: %w", err)
	}
	drop := map[[32]byte]bool{}
	erased := map[[32]byte]bool{} // the DropBlobs found and removed, each once
	defer func() { res.BlobsDropped = len(erased) }()
	for _, id := range opts.DropBlobs {
		k, ok := blobKeyBytes(id)
		if !ok {
			return res, fmt.Errorf("repack: blob id %q: want sha256:<64 hex digits>", id)
		}
		drop[k] = true
	}
	// Loose blobs first: every one asked for, whatever looseBlobs says
	// (it only tells whether loose blobs existed at Open; a blob of
	// packLooseMin bytes or more is written loose since).
	for _, id := range opts.DropBlobs {
		key, _ := BlobKey(id)
		ok, err := s.bucket.Exists(ctx, key)
		if err != nil {
			return res, fmt.Errorf("repack: %w", err)
		}
		if ok {
			if err := s.deleteLooseBlob(ctx, id, key); err != nil {
				return res, fmt.Errorf("repack: %w", err)
			}
			k, _ := blobKeyBytes(id)
			erased[k] = true
		}
	}
	// Which packs: live bytes per pack from the winners.
	x := s.px
	x.mu.RLock()
	type stat struct {
		live, liveN int64
		drop        bool
	}
	stats := make([]stat, len(x.packs))
	// Every pack holding a copy of a blob to drop, not only the winner's.
	for k := range drop {
		x.blobPacks(&k, func(p uint32) { stats[p].drop = true })
	}
	x.blobs.each(x.packs, func(e ent[[32]byte]) {
		if drop[e.key] {
			return
		}
		stats[e.pack].live += int64(e.n)
		stats[e.pack].liveN++
	})
	x.recs.each(x.packs, func(e ent[[16]byte]) {
		stats[e.pack].live += int64(e.n)
		stats[e.pack].liveN++
	})
	var chosen, small []*packInfo
	must := map[*packInfo]bool{} // small packs chosen for themselves
	for i, p := range x.packs {
		if p.gone {
			continue
		}
		st := stats[i]
		dead := p.data - st.live
		rewrite := st.drop || (opts.MinDead <= 1 && (st.liveN < int64(p.entries)) && float64(dead) >= opts.MinDead*float64(max(p.data, 1)))
		switch {
		case p.size < opts.FoldBelow:
			small = append(small, p)
			must[p] = rewrite
		case rewrite:
			chosen = append(chosen, p)
		}
	}
	x.mu.RUnlock()
	// The small packs in groups of up to convertPackBytes, in sequence
	// order; a group of one is rewritten alone when chosen for itself,
	// else left as it is.
	sort.Slice(small, func(i, j int) bool { return small[i].seq < small[j].seq })
	var groups [][]*packInfo
	var size int64
	for _, p := range small {
		if n := len(groups); n == 0 || size+p.size > convertPackBytes {
			groups = append(groups, nil)
			size = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], p)
		size += p.size
	}
	var removed []string
	defer func() {
		if len(removed) > 0 {
			x.mu.Lock()
			x.removeLocked(nil) // drop the forgotten packs' entries from memory
			x.mu.Unlock()
		}
	}()
	for _, p := range chosen {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		before, after, err := s.rewritePacks(ctx, []*packInfo{p}, drop, erased)
		if err != nil {
			return res, fmt.Errorf("repack %s: %w", p.key(), err)
		}
		res.Rewritten++
		res.BytesBefore += before
		res.BytesAfter += after
		removed = append(removed, p.name)
	}
	for _, g := range groups {
		if len(g) < 2 && !must[g[0]] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		before, after, err := s.rewritePacks(ctx, g, drop, erased)
		// A damaged small pack is left out of its fold, unless it must be
		// rewritten for itself (a blob to drop, dead bytes): nothing was
		// written or removed yet, so the group is folded again without it.
		var dmg *packDamage
		for errors.As(err, &dmg) && !must[dmg.p] && slices.Contains(g, dmg.p) {
			res.Damaged = append(res.Damaged, dmg.p.key())
			g = slices.DeleteFunc(g, func(p *packInfo) bool { return p == dmg.p })
			if len(g) < 2 && (len(g) == 0 || !must[g[0]]) {
				g, err = nil, nil
				break
			}
			before, after, err = s.rewritePacks(ctx, g, drop, erased)
		}
		if err != nil {
			return res, fmt.Errorf("repack: fold %d packs from %s: %w", len(g), g[0].key(), err)
		}
		if len(g) == 0 {
			continue
		}
		res.Rewritten += len(g)
		if len(g) > 1 {
			res.Folded += len(g)
		}
		res.BytesBefore += before
		res.BytesAfter += after
		for _, p := range g {
			removed = append(removed, p.name)
		}
	}
	if len(removed) > 0 && s.localDir != "" {
		if err := syncDir(filepath.Join(s.localDir, "packs")); err != nil {
			return res, fmt.Errorf("repack: %w", err)
		}
	}
	n, err := s.dropHiddenLoose(ctx)
	res.LooseDropped = n
	if err != nil {
		return res, fmt.Errorf("repack: %w", err)
	}
	if res.Rewritten > 0 {
		// Another Store's open would find the old one naming packs
		// that are gone, and read every footer. The old one also names
		// the entries erased (a dropped blob's SHA-256, which confirms
		// a guessed document): when it cannot be replaced it is
		// removed, and when it cannot be removed either Repack fails.
		if err := s.writeMidx(ctx, 1); err != nil {
			if derr := s.removeMidx(ctx); derr != nil {
				return res, fmt.Errorf("repack: %v; the old %s, which names the entries removed, is left: %w", err, midxKey, derr)
			}
		}
	}
	return res, nil
}

// rewritePacks writes the live entries of ps (less the blobs in drop)
// into one new pack of the highest sequence number among them, durably,
// then removes ps; the blobs of drop they held are added to erased once
// they are removed. Every entry copied is a winner, so no pack between
// the sequence numbers holds a newer one of its key: the new pack changes
// no read, and a crash that leaves it beside ps neither (the same bytes
// win). An entry to copy whose CRC does not match stops it with
// ErrCorrupt before anything is written or removed.
func (s *Store) rewritePacks(ctx context.Context, ps []*packInfo, drop, erased map[[32]byte]bool) (before, after int64, err error) {
	x := s.px
	b := newPackBuilder()
	var dropped [][32]byte
	var seq uint64
	for _, p := range ps {
		seq = max(seq, p.seq)
		data, err := s.readRange(ctx, p.key(), 0, p.size)
		if err != nil {
			return 0, 0, err
		}
		off, count, crc, err := parseTrailer(data[len(data)-trailerSize:], p.size)
		if err != nil {
			return 0, 0, err
		}
		entries, err := parseIndex(data[off:off+uint64(count)*entrySize], off, crc)
		if err != nil {
			return 0, 0, err
		}
		x.mu.RLock()
		self := x.byName[p.name]
		for _, e := range entries {
			var live bool
			switch e.kind {
			case kindBlob:
				w, ok := x.blobs.lookup(&e.key, x.packs)
				live = ok && w.pack == self && uint64(w.off) == e.off && !drop[e.key]
				if drop[e.key] {
					dropped = append(dropped, e.key)
				}
			default:
				k := e.docKey()
				w, ok := x.recs.lookup(&k, x.packs)
				live = ok && w.pack == self && uint64(w.off) == e.off
			}
			if live {
				// Checked before it is copied: a fresh CRC must not seal
				// damage that came after the caller's Records check.
				if crc32.Checksum(data[e.off:e.off+e.n], castagnoli) != e.crc {
					x.mu.RUnlock()
					return 0, 0, &packDamage{p, fmt.Errorf("%s: entry at %d+%d: checksum mismatch: %w", p.key(), e.off, e.n, ErrCorrupt)}
				}
				if err := b.add(e.kind, e.key, data[e.off:e.off+e.n]); err != nil {
					x.mu.RUnlock()
					return 0, 0, err
				}
			}
		}
		x.mu.RUnlock()
		before += p.size
	}
	if len(b.entries) > 0 {
		// Indexed without addPack: a rewrite's records are no newer
		// writes, and must not cancel pending removals (RemoveRecord
		// before SyncRemovals).
		q, err := s.storePack(ctx, b, seq)
		if err != nil {
			return 0, 0, err
		}
		x.mu.Lock()
		x.addLocked(q, b.entries)
		x.mu.Unlock()
		after = q.size
	}
	for _, p := range ps {
		x.mu.Lock()
		x.forgetLocked([]string{p.name}) // Repack compacts the index once, at the end
		x.hidden[p.name] = true          // a listing before the delete must not index it again
		x.mu.Unlock()
		err := s.bucket.Delete(ctx, p.key())
		x.unhide(p.name)
		if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return 0, 0, err
		}
	}
	for _, k := range dropped {
		erased[k] = true
	}
	return before, after, nil
}

// dropHiddenLoose removes the loose records that a pack hides (a packed
// record or tombstone of the same document), durably.
func (s *Store) dropHiddenLoose(ctx context.Context) (int, error) {
	if !s.looseRecs {
		return 0, nil
	}
	var ids []string
	err := s.list(ctx, "documents/", false, func(name string, _ int64, _ time.Time) {
		if id, ok := strings.CutSuffix(name, ".json"); ok && docIDPattern.MatchString(id) {
			ids = append(ids, id)
		}
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		k, _ := docKeyBytes(id)
		if _, _, ok := s.px.record(k); !ok {
			continue
		}
		if err := s.removeLoose(ctx, id); err != nil {
			return n, err
		}
		n++
	}
	if n > 0 && s.localDir != "" {
		if err := syncDir(filepath.Join(s.localDir, "documents")); err != nil {
			return n, err
		}
	}
	return n, nil
}

// PackStats describes a store's packs.
type PackStats struct {
	Packs int   `json:"packs"` // packs
	Bytes int64 `json:"bytes"` // their size
	// DeadBytes is the data of entries that no longer count: record
	// versions a newer record or a removal hides, second copies of a
	// blob. Repack reclaims them (GC from a pack past half dead, Purge
	// all).
	DeadBytes int64 `json:"dead_bytes"`
}

// PackStats lists the packs (as listings do, with the footers of new
// ones) and counts their dead bytes. It is the zero PackStats in the
// loose layout.
func (s *Store) PackStats(ctx context.Context) (*PackStats, error) {
	st := &PackStats{}
	if s.px == nil {
		return st, nil
	}
	if err := s.loadPacks(ctx, true); err != nil {
		return nil, fmt.Errorf("pack stats: %w", err)
	}
	x := s.px
	x.mu.RLock()
	defer x.mu.RUnlock()
	live := make([]int64, len(x.packs))
	x.blobs.each(x.packs, func(e ent[[32]byte]) { live[e.pack] += int64(e.n) })
	x.recs.each(x.packs, func(e ent[[16]byte]) { live[e.pack] += int64(e.n) })
	for i, p := range x.packs {
		if p.gone {
			continue
		}
		st.Packs++
		st.Bytes += p.size
		st.DeadBytes += p.data - live[i]
	}
	return st, nil
}
