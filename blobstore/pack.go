package blobstore

// The pack format: one immutable object holding a batch's blobs, records
// and record tombstones, with an index in its footer (git's packfiles,
// with the index inside the pack).
//
//	"ESCPACK1"                                    8 bytes
//	entry data, back to back                      (blob bytes, record JSON; a tombstone has none)
//	index: count entries of entrySize bytes:
//	  kind     1 byte: 'b' blob, 'r' record, 't' tombstone
//	  key     32 bytes: a blob's SHA-256; a doc id's 16 bytes, then zeros
//	  offset   8 bytes, little-endian, from the start of the pack
//	  length   8 bytes
//	  crc32c   4 bytes of the data
//	trailer, trailerSize bytes:
//	  "ESCPACK1" | version u32 (1) | count u32 | index offset u64 |
//	  crc32c of the index u32 | 0 u32
//
// A reader loads a pack's index from its last trailerSize+count×entrySize
// bytes, and reads an entry by its offset and length.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

const (
	packMagic   = "ESCPACK1"
	packVersion = 1
	entrySize   = 1 + 32 + 8 + 8 + 4
	trailerSize = 8 + 4 + 4 + 8 + 4 + 4
	// packMaxBytes bounds a pack (offsets are kept as uint32 in memory).
	packMaxBytes int64 = 1 << 31
	// packLooseMin is the size from which a blob is stored as a loose
	// file (blobs/sha256/<hex>) rather than in a pack: a file of that
	// size wastes little of its last block, and rewriting a pack that
	// held it (Purge, GC) would copy it.
	packLooseMin = 4 << 20
)

const (
	kindBlob      = 'b'
	kindRecord    = 'r'
	kindTombstone = 't'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packEntry is one entry of a pack's index.
type packEntry struct {
	kind byte
	key  [32]byte
	off  uint64
	n    uint64
	crc  uint32
}

// docKey is a record's or tombstone's doc id as its 16 bytes.
func (e *packEntry) docKey() [16]byte {
	var k [16]byte
	copy(k[:], e.key[:16])
	return k
}

// packBuilder accumulates a pack's entries; a later entry of the same kind
// and key replaces the earlier, whose bytes leave the pack (garbage no
// index entry names would escape Repack's dead-bytes accounting, and so
// Purge).
type packBuilder struct {
	buf     bytes.Buffer
	entries []packEntry
	slot    map[packSlot]int
}

type packSlot struct {
	kind byte
	key  [32]byte
}

func newPackBuilder() *packBuilder {
	p := &packBuilder{slot: map[packSlot]int{}}
	p.buf.WriteString(packMagic)
	return p
}

// add appends an entry. It fails when the pack would pass packMaxBytes.
func (p *packBuilder) add(kind byte, key [32]byte, data []byte) error {
	s := packSlot{kind, key}
	i, replace := p.slot[s]
	// In int64: on a 32-bit target an int sum near 2 GiB would wrap.
	size := int64(p.buf.Len()) + int64(len(data)) + int64(len(p.entries)+1)*entrySize + trailerSize
	if replace {
		size -= int64(p.entries[i].n) + entrySize
	}
	if size > packMaxBytes {
		return fmt.Errorf("pack would pass %d bytes: sync the batch first", packMaxBytes)
	}
	if replace {
		p.without(i)
	}
	e := packEntry{kind: kind, key: key, off: uint64(p.buf.Len()), n: uint64(len(data)), crc: crc32.Checksum(data, castagnoli)}
	p.buf.Write(data)
	if replace {
		p.entries[i] = e
		return nil
	}
	p.slot[s] = len(p.entries)
	p.entries = append(p.entries, e)
	return nil
}

// without rewrites the data without entry i's bytes (the other entries'
// offsets follow); entry i is left to be replaced. A rare path: a key
// staged twice in one batch.
func (p *packBuilder) without(i int) {
	old := p.buf.Bytes()
	var nb bytes.Buffer
	nb.Grow(len(old) - int(p.entries[i].n))
	nb.WriteString(packMagic)
	for j := range p.entries {
		if j == i {
			continue
		}
		e := &p.entries[j]
		d := old[e.off : e.off+e.n]
		e.off = uint64(nb.Len())
		nb.Write(d)
	}
	p.buf = nb
}

// has reports whether the pack holds an entry of kind and key.
func (p *packBuilder) has(kind byte, key [32]byte) bool {
	_, ok := p.slot[packSlot{kind, key}]
	return ok
}

// bytes returns the finished pack: data, index and trailer.
func (p *packBuilder) bytes() []byte {
	out := bytes.NewBuffer(make([]byte, 0, p.buf.Len()+len(p.entries)*entrySize+trailerSize))
	out.Write(p.buf.Bytes())
	indexOff := uint64(out.Len())
	idx := encodeIndex(p.entries)
	out.Write(idx)
	var t [trailerSize]byte
	copy(t[:8], packMagic)
	binary.LittleEndian.PutUint32(t[8:], packVersion)
	binary.LittleEndian.PutUint32(t[12:], uint32(len(p.entries)))
	binary.LittleEndian.PutUint64(t[16:], indexOff)
	binary.LittleEndian.PutUint32(t[24:], crc32.Checksum(idx, castagnoli))
	out.Write(t[:])
	return out.Bytes()
}

func encodeIndex(entries []packEntry) []byte {
	idx := make([]byte, len(entries)*entrySize)
	for i, e := range entries {
		b := idx[i*entrySize:]
		b[0] = e.kind
		copy(b[1:33], e.key[:])
		binary.LittleEndian.PutUint64(b[33:], e.off)
		binary.LittleEndian.PutUint64(b[41:], e.n)
		binary.LittleEndian.PutUint32(b[49:], e.crc)
	}
	return idx
}

// errPackDamaged marks a pack whose index cannot be read.
var errPackDamaged = errors.New("damaged pack")

// parseTrailer reads a pack's trailer (its last trailerSize bytes) and
// returns where its index starts and how many entries it has.
func parseTrailer(t []byte, size int64) (indexOff uint64, count int, crc uint32, err error) {
	if len(t) != trailerSize || string(t[:8]) != packMagic {
		return 0, 0, 0, fmt.Errorf("no pack trailer: %w", errPackDamaged)
	}
	if v := binary.LittleEndian.Uint32(t[8:]); v != packVersion {
		return 0, 0, 0, fmt.Errorf("pack version %d, want %d: %w", v, packVersion, errPackDamaged)
	}
	count = int(binary.LittleEndian.Uint32(t[12:]))
	indexOff = binary.LittleEndian.Uint64(t[16:])
	if indexOff < uint64(len(packMagic)) || indexOff+uint64(count)*entrySize+trailerSize != uint64(size) {
		return 0, 0, 0, fmt.Errorf("index of %d entries at %d does not fit a pack of %d bytes: %w", count, indexOff, size, errPackDamaged)
	}
	return indexOff, count, binary.LittleEndian.Uint32(t[24:]), nil
}

// parseIndex decodes a pack's index, checking its CRC and that every entry
// lies in the data part.
func parseIndex(idx []byte, indexOff uint64, crc uint32) ([]packEntry, error) {
	if crc32.Checksum(idx, castagnoli) != crc {
		return nil, fmt.Errorf("index checksum mismatch: %w", errPackDamaged)
	}
	entries := make([]packEntry, len(idx)/entrySize)
	for i := range entries {
		b := idx[i*entrySize:]
		e := &entries[i]
		e.kind = b[0]
		copy(e.key[:], b[1:33])
		e.off = binary.LittleEndian.Uint64(b[33:])
		e.n = binary.LittleEndian.Uint64(b[41:])
		e.crc = binary.LittleEndian.Uint32(b[49:])
		switch e.kind {
		case kindBlob, kindRecord, kindTombstone:
		default:
			return nil, fmt.Errorf("entry %d: kind %q: %w", i, e.kind, errPackDamaged)
		}
		if e.off < uint64(len(packMagic)) || e.off+e.n > indexOff || e.off+e.n < e.off {
			return nil, fmt.Errorf("entry %d at %d+%d outside the data: %w", i, e.off, e.n, errPackDamaged)
		}
	}
	return entries, nil
}

// packName is a pack's file name: its sequence number (16 hex digits, so
// names sort by it) and a random suffix.
func packName(seq uint64, suffix string) string {
	return fmt.Sprintf("%016x-%s.pack", seq, suffix)
}

// parsePackName returns the sequence number of a pack's file name, or
// false when name is not one.
func parsePackName(name string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, ".pack")
	if !ok || len(stem) < 18 || stem[16] != '-' {
		return 0, false
	}
	if _, err := hex.DecodeString(stem[17:]); err != nil || len(stem) != 17+16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(stem[:16], 16, 64)
	return seq, err == nil
}

// blobKeyBytes returns the 32 bytes of a blob id ("sha256:<hex>").
func blobKeyBytes(id string) ([32]byte, bool) {
	var k [32]byte
	if !blobIDPattern.MatchString(id) {
		return k, false
	}
	hex.Decode(k[:], []byte(id[len("sha256:"):]))
	return k, true
}

// docKeyBytes returns the 16 bytes of a doc id.
func docKeyBytes(id string) ([16]byte, bool) {
	var k [16]byte
	if !docIDPattern.MatchString(id) {
		return k, false
	}
	hex.Decode(k[:], []byte(id))
	return k, true
}

func wide(k [16]byte) [32]byte {
	var w [32]byte
	copy(w[:], k[:])
	return w
}
