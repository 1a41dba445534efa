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
//	"ESCMIDX2"
//	u32 packs; per pack: u16 name length, name, u64 seq, i64 size,
//	    i64 mod (Unix ns), i64 data bytes, u32 entries
//	u64 blobs; zero bytes up to a multiple of 8 from the start;
//	    per blob:   key 32, u32 pack, u32 off, u32 n, u32 crc
//	u64 records; per doc:  key 16, u32 pack, u32 off, u32 n (0: tombstone), u32 crc
//	u32 copies; per blob:  key 32, u32 count, count × u32 pack
//	u32 crc32c of all the above
//
// All integers are little-endian. The entries are the winners of each key
// (the newest), sorted by key: what the in-memory tables hold once
// compacted. Their fixed width and alignment are those of the tables'
// entries (ent) on a little-endian machine, where the tables use them in
// place, in the buffer the index was read into: at 1M documents that read
// and its checks take about a third of decoding ESCMIDX1's variable-width
// entries one by one (git's multi-pack-index is read in place too, with
// mmap). It lies under its own key, packs/multi-pack-index-2: an older
// escurel reads and writes ESCMIDX1 under packs/multi-pack-index, so two
// versions on one store (a rolling upgrade, a CLI beside a server) keep a
// cache each instead of refusing and rewriting each other's. A write of
// this one removes the older one (it may name blobs erased since, by
// their hash), as a Repack removes both.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"time"
	"unsafe"

	"gocloud.dev/gcerrors"
)

const (
	midxKey   = "packs/multi-pack-index-2"
	midxKeyV1 = "packs/multi-pack-index" // ESCMIDX1, before: removed
	midxMagic = "ESCMIDX2"
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
	at := int64(len(midxMagic)) // bytes written so far: the entries' alignment
	b.Write(le.AppendUint32(nil, uint32(len(live))))
	at += 4
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
		at += 2 + int64(len(p.name)) + 8*4 + 4
	}
	// An entry: its key, then the pack, offset, length and CRC. Encoded
	// in buf, one allocation for all (a slice of the entry or an array
	// passed to the bufio.Writer escapes).
	buf := make([]byte, 0, 32+4*4)
	entry := func(key []byte, pack, off, n, crc uint32) {
		buf = append(buf[:0], key...)
		buf = le.AppendUint32(buf, pack)
		buf = le.AppendUint32(buf, off)
		buf = le.AppendUint32(buf, n)
		buf = le.AppendUint32(buf, crc)
		b.Write(buf)
	}
	// Each count precedes its entries: a first pass counts them.
	nb, nr := 0, 0
	x.blobs.each(x.packs, func(ent[[32]byte]) { nb++ })
	x.recs.each(x.packs, func(ent[[16]byte]) { nr++ })
	b.Write(le.AppendUint64(nil, uint64(nb)))
	at += 8
	b.Write(make([]byte, midxPad(at)))
	// Blob entries are 48 bytes, so the records' count and entries
	// after them stay aligned.
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

// midxPad is how many zero bytes follow at bytes of the index so that the
// entries start at a multiple of 8.
func midxPad(at int64) int { return int((8 - at%8) % 8) }

// midx is a decoded multi-pack index. Its blobs and recs may lie in the
// buffer the index was read into (midxEntries), which they keep alive; a
// table never writes into a run.
type midx struct {
	packs  []*packInfo
	blobs  []ent[[32]byte]
	recs   []ent[[16]byte]
	copies map[[32]byte][]uint32
}

// readMidxFrom reads the multi-pack index of size bytes that rd streams
// into one buffer and decodes it (decodeMidx). An index over limit bytes
// is damage, not an allocation. Errors: errMidx for a damaged, truncated
// or oversized index; rd's own read errors as they are (not damage: the
// object could not be read).
func readMidxFrom(rd io.Reader, size, limit int64) (*midx, error) {
	if size < int64(len(midxMagic))+4 || size > limit {
		return nil, fmt.Errorf("%d bytes: %w", size, errMidx)
	}
	// The magic before the buffer: another format is not read whole.
	var head [len(midxMagic)]byte
	if _, err := io.ReadFull(rd, head[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("no header: %w", errMidx)
		}
		return nil, err
	}
	if string(head[:]) != midxMagic {
		return nil, fmt.Errorf("no header: %w", errMidx)
	}
	data := make([]byte, size)
	copy(data, head[:])
	if n, err := io.ReadFull(rd, data[len(head):]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%d of %d bytes: %w", len(head)+n, size, errMidx)
		}
		return nil, err
	}
	return decodeMidx(data)
}

// midxLimit bounds the multi-pack index of a store whose packs take
// packBytes over packs files: each entry it holds is in a pack's footer
// too (entrySize, 57 bytes, against 48 or 32 here), and a blob's copies
// (4 bytes a pack) are at most as many; a pack's own fields at most 65,571.
func midxLimit(packBytes int64, packs int) int64 {
	return 2*packBytes + int64(packs)*(1<<16+64) + 1<<20
}

// decodeMidx decodes and checks a multi-pack index: magic, checksum, then
// every field; its entries may be data's own bytes (midxEntries).
// Errors: errMidx.
func decodeMidx(data []byte) (*midx, error) {
	if len(data) < len(midxMagic)+4 || string(data[:len(midxMagic)]) != midxMagic {
		return nil, fmt.Errorf("no header: %w", errMidx)
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(body):]) {
		return nil, fmt.Errorf("checksum mismatch: %w", errMidx)
	}
	r := &midxCursor{b: body, at: len(midxMagic)}
	m := &midx{copies: map[[32]byte][]uint32{}}
	np := int(r.u32())
	// dataEnd[i]: where pack i's footer index starts (its entries' data
	// lie between the magic and it), as parseIndex checks a footer.
	var dataEnd []uint64
	names := map[string]bool{}
	for i := 0; i < np && !r.bad; i++ {
		name := string(r.next(int(r.u16())))
		p := &packInfo{name: name, seq: r.u64(), size: int64(r.u64()), mod: time.Unix(0, int64(r.u64())), data: int64(r.u64()), entries: int(r.u32())}
		if r.bad {
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
	r.next(midxPad(int64(r.at)))
	if !r.bad && nb > uint64(len(body)-r.at)/48 {
		return nil, fmt.Errorf("%d blobs: %w", nb, errMidx)
	}
	m.blobs = midxEntries[[32]byte](r.next(int(nb)*48), int(nb))
	nr := r.u64()
	if !r.bad && nr > uint64(len(body)-r.at)/32 {
		return nil, fmt.Errorf("%d records: %w", nr, errMidx)
	}
	m.recs = midxEntries[[16]byte](r.next(int(nr)*32), int(nr))
	nc := int(r.u32())
	for i := 0; i < nc && !r.bad; i++ {
		var k [32]byte
		copy(k[:], r.next(32))
		n := int(r.u32())
		for j := 0; j < n && !r.bad; j++ {
			m.copies[k] = append(m.copies[k], r.u32())
		}
	}
	if r.bad || r.at != len(body) {
		return nil, fmt.Errorf("bad length: %w", errMidx)
	}
	// Every pack number in range, every entry inside its pack's data
	// (as parseIndex checks a footer's: a read allocates n bytes and
	// slices at off), the entries sorted by key (a merge relies on it).
	n := uint32(len(m.packs))
	inside := func(pack, off, size uint32) bool {
		return pack < n && (size == 0 || (uint64(off) >= uint64(len(packMagic)) && uint64(off)+uint64(size) <= dataEnd[pack]))
	}
	for i := range m.blobs {
		e := &m.blobs[i]
		if !inside(e.pack, e.off, e.n) || (i > 0 && cmp32(&m.blobs[i-1].key, &e.key) >= 0) {
			return nil, fmt.Errorf("blob entry %d (pack %d at %d+%d): %w", i, e.pack, e.off, e.n, errMidx)
		}
	}
	for i := range m.recs {
		e := &m.recs[i]
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

// midxCursor reads little-endian fields from b from at on; past its end
// it sets bad and returns nil or zeros.
type midxCursor struct {
	b   []byte
	at  int
	bad bool
}

// next returns the next n bytes of b (not a copy), nil past its end.
func (r *midxCursor) next(n int) []byte {
	if r.bad || n < 0 || n > len(r.b)-r.at {
		r.bad = true
		return nil
	}
	r.at += n
	return r.b[r.at-n : r.at : r.at]
}

func (r *midxCursor) u16() uint16 {
	if b := r.next(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *midxCursor) u32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *midxCursor) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// entInPlace reports whether this machine lays out ent as the index
// stores its entries: little-endian, the key first, then pack, off, n
// and crc as consecutive uint32s, nothing between or after (what gc does
// on every little-endian port; checked, not assumed).
var entInPlace = func() bool {
	one := uint16(1)
	var b ent[[32]byte]
	var r ent[[16]byte]
	return *(*byte)(unsafe.Pointer(&one)) == 1 &&
		unsafe.Sizeof(b) == 48 && unsafe.Offsetof(b.pack) == 32 && unsafe.Offsetof(b.off) == 36 &&
		unsafe.Offsetof(b.n) == 40 && unsafe.Offsetof(b.crc) == 44 &&
		unsafe.Sizeof(r) == 32 && unsafe.Offsetof(r.pack) == 16 && unsafe.Offsetof(r.off) == 20 &&
		unsafe.Offsetof(r.n) == 24 && unsafe.Offsetof(r.crc) == 28
}()

// midxEntries returns the n entries stored in b (n × the size of
// ent[K]): b itself, as a slice of entries, where the layout allows it
// (entInPlace) and b is aligned for them; else a decoded copy. nil when b
// is nil (the index was short: its cursor says so).
func midxEntries[K packKey](b []byte, n int) []ent[K] {
	if b == nil || n == 0 {
		return nil
	}
	if entInPlace && uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(ent[K]{}) == 0 {
		return unsafe.Slice((*ent[K])(unsafe.Pointer(&b[0])), n)
	}
	out := make([]ent[K], n)
	kl := len(b)/n - 16
	w := kl + 16
	le := binary.LittleEndian
	for i := range out {
		e := b[i*w : (i+1)*w]
		switch k := any(&out[i].key).(type) {
		case *[16]byte:
			copy(k[:], e)
		case *[32]byte:
			copy(k[:], e)
		}
		out[i].pack, out[i].off = le.Uint32(e[kl:]), le.Uint32(e[kl+4:])
		out[i].n, out[i].crc = le.Uint32(e[kl+8:]), le.Uint32(e[kl+12:])
	}
	return out
}

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
	// An older version's index, replaced by this one (a cache: a failure
	// leaves it for the next write, or a Repack, to remove).
	if err := s.bucket.Delete(ctx, midxKeyV1); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		slog.Debug("blobstore: removing the older multi-pack index failed", "key", midxKeyV1, "err", err)
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
	for _, key := range []string{midxKey, midxKeyV1} {
		if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("remove %s: %w", key, err)
		}
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
