package blobstore

// Which packs a store in the pack layout holds, as a Store learns them:
// listing packs/, reading the footers of those it does not know (or the
// multi-pack index at first use), and listing again when a pack vanished
// or, for a point read, when packs/ changed.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
)

// loadPacks reads the footers of the packs the index does not know yet
// (all of them on first use) and drops those that are gone; with again
// false, only on first use.
func (s *Store) loadPacks(ctx context.Context, again bool) error {
	x := s.px
	if !again {
		x.mu.RLock()
		loaded := x.loaded
		x.mu.RUnlock()
		if loaded {
			return nil
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.loaded && !again {
		return nil
	}
	// A pack listed and gone before its size or footer was read was
	// removed by a Repack (GC, Purge, an Index's fold of small packs)
	// since the listing. Repack stores the pack that takes over its
	// entries before it removes any, so listing again finds that one,
	// which the first listing may have come too early to see: without it
	// the entries it took over (a tombstone, a newer record) were missed,
	// with no error, and a deleted document read as present (review 14).
	for try := 0; ; try++ {
		vanished, err := s.loadPacksLocked(ctx)
		switch {
		case err != nil:
			return err
		case !vanished:
			return nil
		case try+1 == maxPackListings:
			x.loaded, x.listedAt = false, time.Time{} // not a set to read: the next use lists again
			return fmt.Errorf("list packs: packs were removed during each of %d listings (a repack is running); try again", maxPackListings)
		}
	}
}

// maxPackListings bounds loadPacks' listings while packs vanish under it;
// past it, it fails rather than read an incomplete set of packs.
const maxPackListings = 8

// loadPacksLocked is one listing of loadPacks; vanished reports a pack
// listed and gone before it was read. x.mu is held.
func (s *Store) loadPacksLocked(ctx context.Context) (vanished bool, _ error) {
	x := s.px
	var found []listed
	present := map[string]bool{}
	// What the listing is as of: the directory's time before it is read
	// (a pack added after changes it) and when (refreshPacks).
	var dirMod time.Time
	if s.localDir != "" {
		fi, err := os.Stat(s.localPath("packs"))
		if err != nil {
			return false, fmt.Errorf("list packs: %w", err)
		}
		dirMod = fi.ModTime()
	}
	listedAt := time.Now()
	// On file://, names only: the packs known already need no stat.
	err := s.list(ctx, "packs/", s.localDir == "", func(name string, size int64, mod time.Time) {
		if seq, ok := parsePackName(name); ok {
			present[name] = true
			if _, known := x.byName[name]; !known && !x.hidden[name] {
				found = append(found, listed{name, seq, size, mod})
			}
		}
	})
	if err != nil {
		return false, fmt.Errorf("list packs: %w", err)
	}
	if s.localDir != "" {
		kept := found[:0]
		for _, f := range found {
			fi, err := os.Stat(s.localPath("packs/" + f.name))
			if errors.Is(err, os.ErrNotExist) {
				delete(present, f.name) // removed since the listing
				vanished = true
				continue
			}
			if err != nil {
				return false, fmt.Errorf("list packs: %w", err)
			}
			f.size, f.mod = fi.Size(), fi.ModTime()
			kept = append(kept, f)
		}
		found = kept
	}
	if !x.loaded && len(x.packs) == 0 && len(found) > 0 {
		// First use: the multi-pack index, when it still describes the
		// listing, spares the footers of the packs it names.
		if err := s.useMidx(ctx, found); err != nil {
			return false, err
		}
		kept := found[:0]
		for _, f := range found {
			if _, known := x.byName[f.name]; !known {
				kept = append(kept, f)
			}
		}
		found = kept
	}
	var gone []string
	for name := range x.byName {
		if !present[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		x.removeLocked(gone)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	x.damaged = slices.DeleteFunc(x.damaged, func(d DamagedRecord) bool {
		return !present[strings.TrimPrefix(d.Key, "packs/")]
	})
	// The footers are read 16 at a time (small reads at the ends of
	// files: their latency, not the bandwidth, is the cost), then added in
	// sequence order.
	x.footersRead += len(found)
	infos := make([]*packInfo, len(found))
	entries := make([][]packEntry, len(found))
	errs := make([]error, len(found))
	var g errgroup.Group
	g.SetLimit(16)
	for i, f := range found {
		infos[i] = &packInfo{name: f.name, seq: f.seq, size: f.size, mod: f.mod}
		g.Go(func() error {
			entries[i], errs[i] = s.readPackIndex(ctx, infos[i])
			return nil
		})
	}
	g.Wait()
	for i, p := range infos {
		err := errs[i]
		if errors.Is(err, errPackDamaged) {
			if !slices.ContainsFunc(x.damaged, func(d DamagedRecord) bool { return d.Key == p.key() }) {
				x.damaged = append(x.damaged, DamagedRecord{Key: p.key(), Reason: err.Error()})
			}
			// Its sequence number is taken all the same: a pack written
			// now (a tombstone) must win over it once it reads again.
			x.maxSeq = max(x.maxSeq, p.seq)
			continue
		}
		if errors.Is(err, ErrNotFound) {
			vanished = true
			continue // removed since the listing
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", p.key(), err)
		}
		// A pack damaged at an earlier read (a short read) that reads now.
		x.damaged = slices.DeleteFunc(x.damaged, func(d DamagedRecord) bool { return d.Key == p.key() })
		x.addLocked(p, entries[i])
	}
	x.loaded = true
	x.dirMod, x.listedAt = dirMod, listedAt
	return vanished, nil
}

// racyWindow is how long after a directory's modification time a listing
// must start for that time to vouch for it: a pack added in the same
// tick of the file system's clock (coarse: a few ms) leaves the time
// unchanged (git's "racy git" problem, solved the same way).
const racyWindow = 50 * time.Millisecond

// coarseRacyWindow replaces racyWindow when the directory's time has no
// sub-second part: a file system that keeps times in whole seconds or
// two (FAT, exFAT, SMB or NFS of such, some FUSE) may leave the time
// unchanged for a pack added up to two seconds later. (On a file system
// with finer times, a time that falls on a whole second only costs one
// more listing.)
const coarseRacyWindow = 2*time.Second + racyWindow

// vouches reports whether a listing that started at at vouches for the
// packs/ directory whose modification time is mod: no pack added since
// can have left that time unchanged.
func vouches(mod, at time.Time) bool {
	window := racyWindow
	if mod.Nanosecond() == 0 {
		window = coarseRacyWindow
	}
	return at.Sub(mod) > window
}

// objectRefresh is how old a listing of an object store's packs may be
// before a point read that found its entry lists them again.
const objectRefresh = time.Second

// refreshPacks brings the index up to the packs other Stores wrote since
// the last listing, for a point read (GetRecord, Get; missed: the read
// found no entry). On file:// it lists packs/ again only when the
// directory changed since (one stat otherwise), loading only the new
// footers; on object stores (no such stamp) after a miss, or when the
// last listing is older than objectRefresh.
func (s *Store) refreshPacks(ctx context.Context, missed bool) error {
	x := s.px
	x.mu.RLock()
	loaded, mod, at := x.loaded, x.dirMod, x.listedAt
	x.mu.RUnlock()
	if !loaded {
		return s.loadPacks(ctx, false)
	}
	if s.localDir != "" {
		fi, err := os.Stat(s.localPath("packs"))
		if err != nil {
			return fmt.Errorf("list packs: %w", err)
		}
		if fi.ModTime().Equal(mod) && vouches(mod, at) {
			return nil
		}
	} else if !missed && time.Since(at) < objectRefresh {
		return nil
	}
	return s.loadPacks(ctx, true)
}

// listed is a pack as a listing found it.
type listed struct {
	name string
	seq  uint64
	size int64
	mod  time.Time
}

// useMidx installs the multi-pack index, if there is one that every pack
// it names is among found with its size. A missing or damaged one is no
// error: the footers are read instead. The caller holds x.mu.
func (s *Store) useMidx(ctx context.Context, found []listed) error {
	rd, err := s.bucket.NewReader(ctx, midxKey, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", midxKey, err)
	}
	var packBytes int64
	for _, f := range found {
		packBytes += f.size
	}
	m, err := readMidxFrom(rd, rd.Size(), midxLimit(packBytes, len(found)))
	rd.Close()
	if errors.Is(err, errMidx) {
		// Rewritten at the next writeMidx, whatever was added (a store of
		// a few packs would otherwise keep a damaged one, and read it at
		// every open).
		s.px.midxRemoved = -1
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", midxKey, err)
	}
	present := make(map[string]int64, len(found))
	for _, f := range found {
		present[f.name] = f.size
	}
	if !s.px.installMidx(m, present) {
		s.px.midxRemoved = -1 // stale: rewritten at the next writeMidx too
	}
	return nil
}
