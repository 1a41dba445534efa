package blobstore

// The multi-pack index: one object holding the in-memory index of the
// packs (packIndex) as a Store last knew it, so that opening a store reads
// one object instead of every pack's footer (git's multi-pack-index; the
// segments file of Lucene). It is a cache: written after a Repack, at
// Close, and after a batch when the packs it does not cover have grown by
// a quarter; read on first use only when every pack it names is still
// listed with the same size (else every footer is read, as without it),
// and the packs listed that it does not name are read from their footers.
// A stale or damaged one costs the footer reads, never a wrong answer.
//
//	"ESCMIDX1"
//	u32 packs; per pack: u16 name length, name, u64 seq, i64 size,
//	    i64 mod (Unix ns), i64 data bytes, u32 entries
//	u64 blobs; per blob:   key 32, uvarint pack, off, n, u32 crc
//	u64 records; per doc:  key 16, uvarint pack, off, n (0: tombstone), u32 crc
//	u32 copies; per blob:  key 32, u32 count, count × u32 pack
//	u32 crc32c of all the above
//
// The entries are the winners of each key (the newest), sorted by key:
// what the in-memory tables hold once compacted.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sort"
	"time"

	"gocloud.dev/gcerrors"
)

const (
	midxKey   = "packs/multi-pack-index"
	midxMagic = "ESCMIDX1"
)

var errMidx = errors.New("multi-pack index damaged")

// encodeMidx is the multi-pack index encodeMidxTo writes, in memory
// (tests, and decodeMidx's checks of hand-made ones). The caller holds
// x.mu (read).
func (x *packIndex) encodeMidx() []byte {
	var b bytes.Buffer
	x.encodeMidxTo(&b) // a bytes.Buffer's writes do not fail
	return b.Bytes()
}

// encodeMidxTo writes the index's packs and winning entries to w, as it
// goes (through a 64 KiB buffer: at 1M documents the index is 70 MB,
// which an encoding held in memory, in buffers that grow by doubling,
// took about three times over), and returns w's first error. The caller
// holds x.mu (read), or x is a view (packIndex.view) no one changes.
func (x *packIndex) encodeMidxTo(w io.Writer) error {
	crc := crc32.New(castagnoli)
	b := bufio.NewWriterSize(io.MultiWriter(w, crc), 64<<10)
	b.WriteString(midxMagic)
	le := binary.LittleEndian
	remap := make([]uint32, len(x.packs))
	var live []*packInfo
	for i, p := range x.packs {
		if !p.gone {
			remap[i] = uint32(len(live))
			live = append(live, p)
		}
	}
	b.Write(le.AppendUint32(nil, uint32(len(live))))
	for _, p := range live {
		b.Write(le.AppendUint16(nil, uint16(len(p.name))))
		b.WriteString(p.name)
		var f [8 * 4]byte
		le.PutUint64(f[0:], p.seq)
		le.PutUint64(f[8:], uint64(p.size))
		le.PutUint64(f[16:], uint64(p.mod.UnixNano()))
		le.PutUint64(f[24:], uint64(p.data))
		b.Write(f[:])
		b.Write(le.AppendUint32(nil, uint32(p.entries)))
	}
	// An entry: its key, then the pack, offset and length as uvarints (a
	// tenth of the index's bytes: it duplicates the footers, on the same
	// disk), then the CRC. Encoded in buf, one allocation for all (a
	// slice of the entry or an array passed to the bufio.Writer escapes).
	buf := make([]byte, 0, 32+3*binary.MaxVarintLen32+4)
	entry := func(key []byte, pack, off, n, crc uint32) {
		buf = append(buf[:0], key...)
		buf = binary.AppendUvarint(buf, uint64(pack))
		buf = binary.AppendUvarint(buf, uint64(off))
		buf = binary.AppendUvarint(buf, uint64(n))
		buf = le.AppendUint32(buf, crc)
		b.Write(buf)
	}
	// Each count precedes its entries: a first pass counts them.
	nb, nr := 0, 0
	x.blobs.each(x.packs, func(ent[[32]byte]) { nb++ })
	x.recs.each(x.packs, func(ent[[16]byte]) { nr++ })
	b.Write(le.AppendUint64(nil, uint64(nb)))
	x.blobs.each(x.packs, func(e ent[[32]byte]) { entry(e.key[:], remap[e.pack], e.off, e.n, e.crc) })
	b.Write(le.AppendUint64(nil, uint64(nr)))
	x.recs.each(x.packs, func(e ent[[16]byte]) { entry(e.key[:], remap[e.pack], e.off, e.n, e.crc) })
	keys := make([][32]byte, 0, len(x.copies))
	for k, ps := range x.copies {
		for _, p := range ps {
			if !x.packs[p].gone {
				keys = append(keys, k)
				break
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return cmp32(&keys[i], &keys[j]) < 0 })
	b.Write(le.AppendUint32(nil, uint32(len(keys))))
	for _, k := range keys {
		var ps []uint32
		for _, p := range x.copies[k] {
			if !x.packs[p].gone {
				ps = append(ps, remap[p])
			}
		}
		b.Write(k[:])
		b.Write(le.AppendUint32(nil, uint32(len(ps))))
		for _, p := range ps {
			b.Write(le.AppendUint32(nil, p))
		}
	}
	if err := b.Flush(); err != nil {
		return err
	}
	_, err := w.Write(le.AppendUint32(nil, crc.Sum32()))
	return err
}

// midx is a decoded multi-pack index.
type midx struct {
	packs  []*packInfo
	blobs  []ent[[32]byte]
	recs   []ent[[16]byte]
	copies map[[32]byte][]uint32
}

// decodeMidx decodes and checks a multi-pack index held in memory.
func decodeMidx(data []byte) (*midx, error) {
	return readMidxFrom(bytes.NewReader(data), int64(len(data)))
}

// midxReadBuffer is the buffer readMidxFrom reads through: larger than
// any one field (a pack name is at most 65,535 bytes).
const midxReadBuffer = 256 << 10

// readMidxFrom decodes and checks the multi-pack index of size bytes that
// rd streams, checksum last: it never holds the whole object (70 MB at 1M
// documents, whose first touch cost more than its decoding), only what it
// decodes. Errors: errMidx for a damaged or truncated index; rd's own
// read errors as they are (not damage: the object could not be read).
func readMidxFrom(rd io.Reader, size int64) (*midx, error) {
	if size < int64(len(midxMagic))+4 {
		return nil, fmt.Errorf("no header: %w", errMidx)
	}
	sum := crc32.New(castagnoli)
	r := &midxReader{
		r:    bufio.NewReaderSize(io.TeeReader(io.LimitReader(rd, size-4), sum), midxReadBuffer),
		left: size - 4,
	}
	if string(r.next(len(midxMagic))) != midxMagic {
		if r.ioErr != nil {
			return nil, r.ioErr
		}
		return nil, fmt.Errorf("no header: %w", errMidx)
	}
	m, err := r.decode()
	if r.ioErr != nil {
		return nil, r.ioErr
	}
	if err != nil {
		return nil, err
	}
	var trailer [4]byte
	if _, err := io.ReadFull(rd, trailer[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("no checksum: %w", errMidx)
		}
		return nil, err
	}
	if sum.Sum32() != binary.LittleEndian.Uint32(trailer[:]) {
		return nil, fmt.Errorf("checksum mismatch: %w", errMidx)
	}
	return m, nil
}

// decode reads the index after its magic and checks its entries; the
// checksum is the caller's.
func (r *midxReader) decode() (*midx, error) {
	m := &midx{copies: map[[32]byte][]uint32{}}
	np := int(r.u32())
	// dataEnd[i]: where pack i's footer index starts (its entries' data
	// lie between the magic and it), as parseIndex checks a footer.
	var dataEnd []uint64
	names := map[string]bool{}
	for i := 0; i < np && r.err == nil; i++ {
		name := string(r.next(int(r.u16())))
		p := &packInfo{name: name, seq: r.u64(), size: int64(r.u64()), mod: time.Unix(0, int64(r.u64())), data: int64(r.u64()), entries: int(r.u32())}
		if r.err != nil {
			break
		}
		if seq, ok := parsePackName(name); !ok || seq != p.seq || names[name] {
			return nil, fmt.Errorf("pack %q: bad or repeated name: %w", name, errMidx)
		}
		names[name] = true
		// 64-bit sums of values below 2^32 and 2^63: no overflow.
		head := uint64(len(packMagic)) + uint64(trailerSize) + uint64(p.entries)*entrySize
		if p.size < 0 || p.size > packMaxBytes || p.data < 0 || p.entries < 0 || uint64(p.size) < head || uint64(p.data) > uint64(p.size)-head {
			return nil, fmt.Errorf("pack %q: size %d, data %d, entries %d: %w", name, p.size, p.data, p.entries, errMidx)
		}
		dataEnd = append(dataEnd, uint64(p.size)-uint64(trailerSize)-uint64(p.entries)*entrySize)
		m.packs = append(m.packs, p)
	}
	nb := r.u64()
	if r.err == nil && nb > uint64(r.left)/(32+3+4) {
		return nil, fmt.Errorf("%d blobs: %w", nb, errMidx)
	}
	m.blobs = make([]ent[[32]byte], 0, nb)
	r.entries(nb, 32, func(key []byte, pack, off, n, crc uint32) {
		e := ent[[32]byte]{pack: pack, off: off, n: n, crc: crc}
		copy(e.key[:], key)
		m.blobs = append(m.blobs, e)
	})
	nr := r.u64()
	if r.err == nil && nr > uint64(r.left)/(16+3+4) {
		return nil, fmt.Errorf("%d records: %w", nr, errMidx)
	}
	m.recs = make([]ent[[16]byte], 0, nr)
	r.entries(nr, 16, func(key []byte, pack, off, n, crc uint32) {
		e := ent[[16]byte]{pack: pack, off: off, n: n, crc: crc}
		copy(e.key[:], key)
		m.recs = append(m.recs, e)
	})
	nc := int(r.u32())
	for i := 0; i < nc && r.err == nil; i++ {
		var k [32]byte
		copy(k[:], r.next(32))
		n := int(r.u32())
		for j := 0; j < n && r.err == nil; j++ {
			m.copies[k] = append(m.copies[k], r.u32())
		}
	}
	if r.err != nil || r.left != 0 {
		return nil, fmt.Errorf("bad length: %w", errMidx)
	}
	// Every pack number in range, every entry inside its pack's data
	// (as parseIndex checks a footer's: a read allocates n bytes and
	// slices at off), the entries sorted by key (a merge relies on it).
	n := uint32(len(m.packs))
	inside := func(pack, off, size uint32) bool {
		return pack < n && (size == 0 || (uint64(off) >= uint64(len(packMagic)) && uint64(off)+uint64(size) <= dataEnd[pack]))
	}
	for i, e := range m.blobs {
		if !inside(e.pack, e.off, e.n) || (i > 0 && cmp32(&m.blobs[i-1].key, &e.key) >= 0) {
			return nil, fmt.Errorf("blob entry %d (pack %d at %d+%d): %w", i, e.pack, e.off, e.n, errMidx)
		}
	}
	for i, e := range m.recs {
		if !inside(e.pack, e.off, e.n) || (i > 0 && cmp16(&m.recs[i-1].key, &e.key) >= 0) {
			return nil, fmt.Errorf("record entry %d (pack %d at %d+%d): %w", i, e.pack, e.off, e.n, errMidx)
		}
	}
	for _, ps := range m.copies {
		for _, p := range ps {
			if p >= n {
				return nil, fmt.Errorf("copy in pack %d: %w", p, errMidx)
			}
		}
	}
	return m, nil
}

// midxReader reads little-endian fields from a buffered stream of left
// bytes; past the end, or once a read failed, it sets err (errMidx) and
// returns zeros. A read error other than the end of the stream is kept in
// ioErr too: the object could not be read, which is not damage.
type midxReader struct {
	r     *bufio.Reader
	left  int64
	err   error
	ioErr error
}

// next returns the next n bytes (n ≤ midxReadBuffer), valid until the
// next call.
func (r *midxReader) next(n int) []byte {
	if r.err != nil || int64(n) > r.left || n > midxReadBuffer {
		r.err = errMidx
		return make([]byte, n)
	}
	b, err := r.r.Peek(n)
	if err != nil {
		r.fail(err)
		return make([]byte, n)
	}
	r.r.Discard(n)
	r.left -= int64(n)
	return b
}

// fail records a read error.
func (r *midxReader) fail(err error) {
	r.err = errMidx
	if err != io.EOF && err != io.ErrUnexpectedEOF && err != bufio.ErrBufferFull {
		r.ioErr = err
	}
}

func (r *midxReader) u16() uint16 { return binary.LittleEndian.Uint16(r.next(2)) }

func (r *midxReader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }

// entries reads n entries of a table (a key of keyLen bytes; uvarints
// pack, off and n, each of at most 5 bytes and 32 bits; a u32 CRC) and
// calls put with each, key valid until put returns. It decodes them from
// windows of the read buffer, each taken and released once (Peek,
// Discard), rather than field by field: at 2M entries that was half of
// the decoding's CPU (BenchmarkReadMidx). An entry must end within the
// index: otherwise, or on a field that is not as above, it sets err
// (errMidx); a read that fails or ends short of the index sets it too
// (fail: the read's error kept in ioErr).
func (r *midxReader) entries(n uint64, keyLen int, put func(key []byte, pack, off, n, crc uint32)) {
	longest := keyLen + 3*binary.MaxVarintLen32 + 4
	for n > 0 && r.err == nil {
		b, err := r.r.Peek(int(min(r.left, midxReadBuffer)))
		// Peek returns fewer bytes than asked only with an error: the
		// stream ended (or failed) before the index did.
		whole := int64(len(b)) == r.left // b holds the rest of the index
		used := 0
		for n > 0 && (whole || len(b)-used >= longest) {
			e := b[used:]
			if len(e) < keyLen {
				r.err = errMidx
				return
			}
			at := keyLen
			var f [3]uint32
			for j := range f {
				v, k := binary.Uvarint(e[at:min(len(e), at+binary.MaxVarintLen32)])
				if k <= 0 || v > 1<<32-1 {
					r.err = errMidx
					return
				}
				f[j], at = uint32(v), at+k
			}
			if len(e) < at+4 {
				r.err = errMidx
				return
			}
			put(e[:keyLen], f[0], f[1], f[2], binary.LittleEndian.Uint32(e[at:]))
			used += at + 4
			n--
		}
		if err != nil {
			// The window is short of what was asked: the stream ended
			// short of the index's size, or failed. bufio.Reader hands
			// a read error back once: kept now, not left for a later
			// Peek (which would read on past it).
			r.fail(err)
			return
		}
		r.r.Discard(used)
		r.left -= int64(used)
	}
}

func (r *midxReader) u64() uint64 { return binary.LittleEndian.Uint64(r.next(8)) }

// installMidx makes m the index's content when every pack it names is
// listed now (present: name → size) with its size; it reports whether it
// did. The index is empty (first use); the caller holds x.mu.
func (x *packIndex) installMidx(m *midx, present map[string]int64) bool {
	for _, p := range m.packs {
		if size, ok := present[p.name]; !ok || size != p.size {
			return false
		}
	}
	for i, p := range m.packs {
		x.packs = append(x.packs, p)
		x.byName[p.name] = uint32(i)
		x.maxSeq = max(x.maxSeq, p.seq)
	}
	x.blobs.install(m.blobs)
	x.recs.install(m.recs)
	x.copies = m.copies
	x.midxPacks, x.midxAdded, x.midxRemoved = len(m.packs), x.added, x.removed
	return true
}

// writeMidx stores the index as the multi-pack index when this Store's
// view differs from the stored one's: force, or packs removed since (the
// stored one then names packs that are gone, and is not used), or at
// least minAdded packs added (each a footer the next open reads beside
// it). A failure leaves the old one, which the next open checks against
// the listing as it would any stale one.
func (s *Store) writeMidx(ctx context.Context, minAdded int) error {
	x := s.px
	x.mu.RLock()
	added, removed := x.added, x.removed
	if !x.loaded || (removed == x.midxRemoved && added-x.midxAdded < max(minAdded, 1)) {
		x.mu.RUnlock()
		return nil
	}
	n := x.livePacks()
	// Encoded as it is written, from a view taken under the read lock
	// (runs shared, lists copied): an object store's Write blocks while
	// its upload waits on the network, and a lock held there would stall
	// a batch's addPack and, behind it, every lookup.
	v := x.view()
	x.mu.RUnlock()
	err := s.writeWith(ctx, midxKey, "application/octet-stream", v.encodeMidxTo)
	if err != nil {
		return fmt.Errorf("write %s: %w", midxKey, err)
	}
	x.mu.Lock()
	// What it describes: packs that came or went while it was written
	// stay uncovered.
	x.midxPacks, x.midxAdded, x.midxRemoved = n, added, removed
	x.mu.Unlock()
	return nil
}

// removeMidx removes the stored multi-pack index, durably; none is no
// error. The next writeMidx writes it again (what it covered is reset).
func (s *Store) removeMidx(ctx context.Context) error {
	if err := s.bucket.Delete(ctx, midxKey); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("remove %s: %w", midxKey, err)
	}
	if s.localDir != "" {
		if err := syncDir(filepath.Join(s.localDir, "packs")); err != nil {
			return fmt.Errorf("remove %s: %w", midxKey, err)
		}
	}
	x := s.px
	x.mu.Lock()
	x.midxPacks, x.midxAdded, x.midxRemoved = 0, -1, -1
	x.mu.Unlock()
	return nil
}

// closeMidxTimeout bounds Close's write of the multi-pack index.
const closeMidxTimeout = 30 * time.Second

// closeMidxAdded is how many packs a Store must have added (written, or
// read from their footers) beyond the stored multi-pack index for Close
// to write it again: a one-document CLI ingest on a large store does not
// rewrite it (80 MB at 1M documents); the next open reads a few footers.
const closeMidxAdded = 16

// midxDue writes the multi-pack index after a batch once the packs it
// does not cover are a quarter of those it does (and at least 64): the
// bytes written stay proportional to the store's, and an open reads at
// most that many footers beside it.
func (s *Store) midxDue(ctx context.Context) {
	x := s.px
	x.mu.RLock()
	covered := x.midxPacks
	x.mu.RUnlock()
	s.writeMidx(ctx, max(64, covered/4)) // a cache: a failure costs footer reads at the next open
}

// livePacks counts the packs not gone. The caller holds x.mu.
func (x *packIndex) livePacks() int {
	return len(x.byName)
}
