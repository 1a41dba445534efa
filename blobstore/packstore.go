package blobstore

// A store in the pack layout (UsePacks): what reads and writes do there.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// footerRead is how many bytes at a pack's end a reader reads first.
const footerRead = 16 << 10

// anyObject reports whether any object's key starts with prefix.
func (s *Store) anyObject(ctx context.Context, prefix string) (bool, error) {
	if s.localDir != "" {
		d, err := os.Open(s.localPath(prefix))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		defer d.Close()
		names, err := d.Readdirnames(1)
		if err == io.EOF {
			return false, nil
		}
		return len(names) > 0, err
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	_, err := it.Next(ctx)
	if err == io.EOF {
		return false, nil
	}
	return err == nil, err
}

// readPackIndex reads a pack's footer: its trailer, then its index.
func (s *Store) readPackIndex(ctx context.Context, p *packInfo) ([]packEntry, error) {
	if p.size < int64(len(packMagic))+trailerSize {
		return nil, fmt.Errorf("%d bytes: %w", p.size, errPackDamaged)
	}
	// One read of the last footerRead bytes holds the index of a pack of
	// up to about 300 entries (an ingest batch's); a second read otherwise.
	tail := min(p.size, footerRead)
	t, err := s.readRange(ctx, p.key(), p.size-tail, tail)
	if err != nil {
		return nil, err
	}
	off, count, crc, err := parseTrailer(t[len(t)-trailerSize:], p.size)
	if err != nil {
		return nil, err
	}
	var idx []byte
	if start := int64(off) - (p.size - tail); start >= 0 {
		idx = t[start : start+int64(count)*entrySize]
	} else if idx, err = s.readRange(ctx, p.key(), int64(off), int64(count)*entrySize); err != nil {
		return nil, err
	}
	return parseIndex(idx, off, crc)
}

// readRange reads n bytes at off of the object key.
func (s *Store) readRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if s.localDir != "" {
		f, err := os.Open(s.localPath(key))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			if err == io.EOF {
				return nil, fmt.Errorf("%s: short read at %d+%d: %w", key, off, n, errPackDamaged)
			}
			return nil, err
		}
		return buf, nil
	}
	r, err := s.bucket.NewRangeReader(ctx, key, off, n, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) != n {
		return nil, fmt.Errorf("%s: short read at %d+%d: %w", key, off, n, errPackDamaged)
	}
	return buf, nil
}

// readEntry reads an entry's data and checks its CRC-32C: a mismatch is
// ErrCorrupt, with the bytes read (to salvage a source from, never to use).
func (s *Store) readEntry(ctx context.Context, p *packInfo, off, n, crc uint32) ([]byte, error) {
	data, err := s.readRange(ctx, p.key(), int64(off), int64(n))
	if errors.Is(err, errPackDamaged) {
		return nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	if err != nil {
		return nil, err
	}
	if crc32.Checksum(data, castagnoli) != crc {
		return data, fmt.Errorf("%s: entry at %d+%d: checksum mismatch: %w", p.key(), off, n, ErrCorrupt)
	}
	return data, nil
}

func randSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writePack stores a finished pack durably under a new name (seq 0: the
// next sequence number) and adds it to the index; tombs are the pending
// removals it makes durable.
func (s *Store) writePack(ctx context.Context, b *packBuilder, seq uint64) (*packInfo, error) {
	p, err := s.storePack(ctx, b, seq)
	if err != nil {
		return nil, err
	}
	s.addPack(p, b.entries)
	return p, nil
}

// storePack stores a finished pack durably under a new name (seq 0: the
// next sequence number), without adding it to the index; on success the
// name is hidden from listings until the caller adds it (addLocked), which
// every caller does at once; on an error it is not hidden.
func (s *Store) storePack(ctx context.Context, b *packBuilder, seq uint64) (*packInfo, error) {
	if s.localDir != "" {
		return s.storePackFile(ctx, b.bytes(), seq)
	}
	if seq == 0 {
		var err error
		if seq, err = s.nextSeq(ctx); err != nil {
			return nil, err
		}
	}
	data := b.bytes()
	p := &packInfo{name: packName(seq, randSuffix()), seq: seq, size: int64(len(data)), mod: time.Now()}
	s.px.hide(p.name) // until the caller indexes it (addLocked)
	if err := s.write(ctx, p.key(), data, "application/octet-stream"); err != nil {
		s.px.unhide(p.name)
		return nil, err
	}
	return p, nil
}

// storePackFile is storePack on a file:// store, written as a batch's
// pack is (Batch.Flush, syncPack) rather than by the bucket's writer: the
// pack's bytes to a temporary file packs/<hex>.pack.tmp (tempStarted: GC
// leaves it alone while it is under way), made durable; then its sequence
// number taken (seq 0: nextSeq, at the last moment, as a batch's Sync
// does), the file renamed to its name and packs/ fsynced. The bucket's
// writer also made packs/ (MkdirAll), chmodded its temporary file, and
// after the rename removed its name again (a failing unlink and rmdir):
// a tenth of a delete's blob store CPU at 1M passages, where every delete
// writes one pack of tombstones (issue 16). A context cancelled before
// its sequence number is taken publishes nothing, as the writer's Close
// did.
func (s *Store) storePackFile(ctx context.Context, data []byte, seq uint64) (*packInfo, error) {
	dir := s.localPath("packs")
	tmp := filepath.Join(dir, randSuffix()+".pack.tmp")
	tempStarted(tmp)
	if err := writeNewFile(tmp, data); err != nil {
		tempDone(tmp)
		return nil, err
	}
	err := ctx.Err()
	if err == nil && seq == 0 {
		seq, err = s.nextSeq(ctx)
	}
	if err != nil {
		removeTemp(tmp)
		return nil, err
	}
	p := &packInfo{name: packName(seq, randSuffix()), seq: seq, size: int64(len(data)), mod: time.Now()}
	if err := s.publishPackFile(tmp, p); err != nil {
		return nil, err
	}
	return p, nil
}

// packPublished, when not nil (tests), is called by publishPackFile once
// a pack has its name, before it is indexed.
var packPublished func(name string)

// publishPackFile gives the durable temporary file tmp under packs/ its
// pack's name p (a rename), then fsyncs packs/: a batch's pack (syncPack)
// and a pack written alone (storePackFile) alike. p is hidden from this
// Store's listings until the caller indexes it (addLocked), which it
// does at once: a Repack meanwhile (an Index's fold, under its writer
// lock while a batch stores without it) must not fold it away before it
// is indexed. On an error p is not hidden, and tmp is removed if it was
// not renamed; a pack renamed whose fsync of packs/ failed is in packs/
// (maybe not durably), and the next listing indexes it, as every other
// Store's does.
func (s *Store) publishPackFile(tmp string, p *packInfo) error {
	s.px.hide(p.name)
	if err := os.Rename(tmp, s.localPath(p.key())); err != nil {
		s.px.unhide(p.name)
		removeTemp(tmp)
		return err
	}
	tempDone(tmp)
	if packPublished != nil {
		packPublished(p.name)
	}
	if err := syncDir(s.localPath("packs")); err != nil {
		s.px.unhide(p.name)
		return err
	}
	return nil
}

// addPack adds a written pack to the index, and drops the pending removals
// its tombstones make durable or its records supersede. (Removals and
// writes of one document are ordered by the caller: index's writeMu.)
func (s *Store) addPack(p *packInfo, entries []packEntry) {
	x := s.px
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addLocked(p, entries)
	for _, e := range entries {
		if e.kind != kindBlob {
			delete(x.tombs, e.docKey()) // made durable, or superseded by a newer record
		}
	}
}

// packedBlob returns a packed blob's bytes, and whether the packs hold it.
func (s *Store) packedBlob(ctx context.Context, id string) ([]byte, bool, error) {
	k, ok := blobKeyBytes(id)
	if !ok {
		return nil, false, nil
	}
	if err := s.loadPacks(ctx, false); err != nil {
		return nil, false, err
	}
	return readPacked(ctx, s, func() (ent[[32]byte], *packInfo, bool) { return s.px.blob(k) }, false)
}

// packedRecord returns a doc's packed record bytes; found false when the
// packs do not name the doc; data nil when they hold its tombstone.
func (s *Store) packedRecord(ctx context.Context, docID string) ([]byte, bool, error) {
	k, ok := docKeyBytes(docID)
	if !ok {
		return nil, false, nil
	}
	if err := s.loadPacks(ctx, false); err != nil {
		return nil, false, err
	}
	if err := s.damagedPacks(); err != nil {
		return nil, false, err
	}
	return readPacked(ctx, s, func() (ent[[16]byte], *packInfo, bool) { return s.px.record(k) }, true)
}

// readPacked reads the entry that find names, and whether find names one.
// When its pack is gone (rewritten by a Repack since the index was read)
// it reloads the packs and looks again, once. With tombstones, an entry of
// no bytes is a tombstone: found, and no data.
func readPacked[K any](ctx context.Context, s *Store, find func() (ent[K], *packInfo, bool), tombstones bool) ([]byte, bool, error) {
	for try := 0; ; try++ {
		e, p, ok := find()
		if !ok || tombstones && e.n == 0 {
			return nil, ok, nil
		}
		data, err := s.readEntry(ctx, p, e.off, e.n, e.crc)
		if errors.Is(err, ErrNotFound) && try == 0 {
			if err := s.loadPacks(ctx, true); err != nil {
				return nil, false, err
			}
			continue
		}
		return data, true, err
	}
}

// damagedPacks fails closed when a pack's index cannot be read: its
// records, or tombstones, could be newer than what the other packs say.
func (s *Store) damagedPacks() error {
	s.px.mu.RLock()
	defer s.px.mu.RUnlock()
	if len(s.px.damaged) == 0 {
		return nil
	}
	d := s.px.damaged[0]
	return fmt.Errorf("%s: %s (records are not read while a pack is damaged; escurel verify lists it): %w", d.Key, d.Reason, ErrCorrupt)
}

// hasBlob reports whether the store holds exactly data under its id:
// packed, or loose.
func (s *Store) hasBlob(ctx context.Context, id string, data []byte) (bool, error) {
	got, ok, err := s.packedBlob(ctx, id)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return false, err
	}
	if ok && err == nil && bytes.Equal(got, data) {
		return true, nil
	}
	if !s.looseBlobs {
		return false, nil
	}
	key, _ := BlobKey(id)
	if s.localDir != "" {
		return intact(s.localPath(key), data), nil
	}
	got, err = s.read(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, data), nil
}

// storedRecord returns the bytes of docID's current record (packed, else
// loose), nil when there is none.
func (s *Store) storedRecord(ctx context.Context, docID string) ([]byte, error) {
	data, ok, err := s.packedRecord(ctx, docID)
	if ok || err != nil {
		return data, err
	}
	if !s.looseRecs {
		return nil, nil
	}
	key, _ := RecordKey(docID)
	data, err = s.read(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return data, err
}

// putPacked is Put in the pack layout.
func (s *Store) putPacked(ctx context.Context, data []byte) (string, error) {
	id := BlobID(data)
	if len(data) >= packLooseMin {
		return s.putLoose(ctx, data)
	}
	ok, err := s.hasBlob(ctx, id, data)
	if err != nil {
		return "", fmt.Errorf("put blob %s: %w", id, err)
	}
	if ok {
		return id, nil
	}
	b := newPackBuilder()
	k, _ := blobKeyBytes(id)
	if err := b.add(kindBlob, k, data); err != nil {
		return "", fmt.Errorf("put blob %s: %w", id, err)
	}
	if _, err := s.writePack(ctx, b, 0); err != nil {
		return "", fmt.Errorf("put blob %s: %w", id, err)
	}
	return id, nil
}

// putRecordPacked is PutRecord in the pack layout.
func (s *Store) putRecordPacked(ctx context.Context, docID string, data []byte) error {
	b := newPackBuilder()
	k, _ := docKeyBytes(docID)
	if err := b.add(kindRecord, wide(k), data); err != nil {
		return fmt.Errorf("put record %s: %w", docID, err)
	}
	if _, err := s.writePack(ctx, b, 0); err != nil {
		return fmt.Errorf("put record %s: %w", docID, err)
	}
	s.dropLooseRecords(ctx, []string{docID})
	return nil
}

// dropLooseRecords removes the loose records of docs that a pack now
// names (hidden by it): best effort, not made durable (a loose record
// that comes back after a crash stays hidden).
func (s *Store) dropLooseRecords(ctx context.Context, docIDs []string) {
	if !s.looseRecs {
		return
	}
	for _, id := range docIDs {
		key, _ := RecordKey(id)
		if s.localDir != "" {
			os.Remove(s.localPath(key))
		} else {
			s.bucket.Delete(ctx, key)
		}
	}
}

// removeRecordPacked is RemoveRecord in the pack layout: the loose record
// removed, and a tombstone pending (written by SyncRemovals), whether or
// not a readable pack holds a record of the document.
func (s *Store) removeRecordPacked(ctx context.Context, docID string) error {
	k, _ := docKeyBytes(docID)
	if err := s.loadPacks(ctx, false); err != nil {
		return fmt.Errorf("delete record %s: %w", docID, err)
	}
	if s.looseRecs {
		key, _ := RecordKey(docID)
		if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("delete record %s: %w", docID, err)
		}
	}
	// Always a tombstone (fail closed): a pack this process cannot read
	// (damaged, restored later) may hold a record of the document that
	// the in-memory index does not know; it must stay hidden. A tombstone
	// that hides nothing costs one entry and is harmless.
	x := s.px
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tombs[k] = true
	return nil
}

// syncRemovalsPacked writes the pending removals as one pack of
// tombstones.
func (s *Store) syncRemovalsPacked(ctx context.Context) error {
	x := s.px
	x.mu.RLock()
	var keys [][16]byte
	for k := range x.tombs {
		keys = append(keys, k)
	}
	x.mu.RUnlock()
	if len(keys) > 0 {
		slices.SortFunc(keys, func(a, b [16]byte) int { return cmp16(&a, &b) })
		b := newPackBuilder()
		for _, k := range keys {
			if err := b.add(kindTombstone, wide(k), nil); err != nil {
				return fmt.Errorf("delete record: %w", err)
			}
		}
		if _, err := s.writePack(ctx, b, 0); err != nil {
			// Not removed after all: the records read as stored again
			// (RemoveRecord again to retry).
			x.mu.Lock()
			for _, k := range keys {
				delete(x.tombs, k)
			}
			x.mu.Unlock()
			return fmt.Errorf("delete record: %w", err)
		}
	}
	if s.looseRecs && s.localDir != "" {
		if err := syncDir(filepath.Join(s.localDir, "documents")); err != nil {
			return fmt.Errorf("delete record: %w", err)
		}
	}
	return nil
}
