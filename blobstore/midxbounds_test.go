package blobstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// A multi-pack index whose checksum matches but whose entries lie outside
// their pack (a writer's bug, an older or newer writer, a hand-made file)
// is refused like a damaged one: the Store reads the footers instead, and
// neither panics nor allocates what the entry says (reviewer 5, finding 1).
func TestMidxEntryOutsidePackFallsBackToFooters(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	b := s.NewBatch()
	for j := range 2 {
		src := fmt.Sprintf("/mb/%d", j)
		id, _ := b.Put(ctx, []byte(src))
		b.PutRecord(ctx, testRecord(src, id, "t"))
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// bad encodes the index with f applied to the record entries (the
	// index's own entries are left as they are).
	bad := func(f func(run []*ent[[16]byte])) []byte {
		x := s.px
		x.mu.Lock()
		defer x.mu.Unlock()
		x.recs.compact(x.packs)
		var run []*ent[[16]byte] // the records in key order, across the shards
		for _, runs := range x.recs.shards {
			for _, r := range runs {
				for i := range r {
					run = append(run, &r[i])
				}
			}
		}
		if len(run) != 2 {
			t.Fatalf("%d records", len(run))
		}
		saved := []ent[[16]byte]{*run[0], *run[1]}
		f(run)
		data := x.encodeMidx()
		*run[0], *run[1] = saved[0], saved[1]
		return data
	}
	cases := map[string][]byte{
		"end wraps 32 bits":   bad(func(r []*ent[[16]byte]) { r[1].off, r[1].n = 0xFFFFFFF0, 0x20 }),
		"4 GiB long":          bad(func(r []*ent[[16]byte]) { r[1].n = 0xFFFFFF00 }),
		"past the data":       bad(func(r []*ent[[16]byte]) { r[1].n += uint32(s.px.packs[0].size) }),
		"inside the magic":    bad(func(r []*ent[[16]byte]) { r[0].off = 2 }),
		"in the footer index": bad(func(r []*ent[[16]byte]) { r[1].off = uint32(s.px.packs[0].size) - trailerSize - 8 }),
	}
	for name, data := range cases {
		if _, err := decodeMidx(data); !errors.Is(err, errMidx) {
			t.Errorf("%s: decodeMidx: %v, want errMidx", name, err)
			continue
		}
		// What a Store does with it: the footers, both records intact.
		if err := s.write(ctx, midxKey, data, ""); err != nil {
			t.Fatal(err)
		}
		r := reopen(t, s)
		recs, damaged, err := r.ScanRecords(ctx)
		if err != nil || len(recs) != 2 || len(damaged) != 0 {
			t.Errorf("%s: ScanRecords: %d records, %d damaged, %v; want 2, 0, nil", name, len(recs), len(damaged), err)
		}
		if _, err := reopen(t, s).GetRecord(ctx, DocID("/mb/1")); err != nil {
			t.Errorf("%s: GetRecord: %v", name, err)
		}
	}
}

// The header's pack fields: a pack named twice, a negative or too large
// size, data or entries beyond the size: each refused (with a valid CRC).
func TestDecodeMidxBadPackFields(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	for i := range 2 {
		b := s.NewBatch()
		src := fmt.Sprintf("/p/%d", i)
		id, _ := b.Put(ctx, []byte(src))
		b.PutRecord(ctx, testRecord(src, id, "t"))
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	x := s.px
	x.mu.RLock()
	good := x.encodeMidx()
	p0, p1 := x.packs[0].name, x.packs[1].name
	x.mu.RUnlock()
	if _, err := decodeMidx(good); err != nil {
		t.Fatal(err)
	}
	seal := func(body []byte) []byte {
		return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	}
	// Pack 0's fields follow its name: seq, size, mod, data (u64), entries (u32).
	fields := len(midxMagic) + 4 + 2 + len(p0)
	set := func(at int, v uint64, width int) []byte {
		body := append([]byte(nil), good[:len(good)-4]...)
		if width == 8 {
			binary.LittleEndian.PutUint64(body[fields+at:], v)
		} else {
			binary.LittleEndian.PutUint32(body[fields+at:], uint32(v))
		}
		return seal(body)
	}
	size := uint64(x.packs[0].size)
	cases := map[string][]byte{
		"negative size":    set(8, 1<<63, 8),
		"size over 2 GiB":  set(8, 1<<40, 8),
		"size below index": set(8, trailerSize, 8),
		"negative data":    set(24, 1<<63, 8),
		"data over size":   set(24, size, 8),
		"entries too many": set(32, 1<<31, 4),
		"pack named twice": seal(bytes.Replace(append([]byte(nil), good[:len(good)-4]...), []byte(p1), []byte(p0), 1)),
	}
	for name, data := range cases {
		if _, err := decodeMidx(data); !errors.Is(err, errMidx) {
			t.Errorf("%s: decodeMidx: %v, want errMidx", name, err)
		}
	}
}
