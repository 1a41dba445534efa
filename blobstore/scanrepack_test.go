package blobstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A reader Store's ScanRecords (a rebuild's plan on another index
// of the bucket) while the writer's GC/Purge rewrites packs: the listing
// names a pack, the Repack removes it, and the read fails with "rewritten
// meanwhile?" instead of listing again (reviewer 5, finding 4): it lists
// again now.
func TestScanRecordsDuringRepack(t *testing.T) {
	ctx := context.Background()
	w, _ := packedFileStore(t)
	r := reopen(t, w)
	put := func(src, title string) {
		b := w.NewBatch()
		id, _ := b.Put(ctx, []byte(src+title))
		b.PutRecord(ctx, testRecord(src, id, title))
		if err := b.Sync(ctx); err != nil {
			t.Error(err)
		}
	}
	for i := range 20 {
		put(fmt.Sprintf("/d/%d", i), "v0")
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			put(fmt.Sprintf("/d/%d", i%20), fmt.Sprintf("v%d", i))
			if _, err := w.Repack(ctx, RepackOptions{MinDead: 0}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	fails := 0
	deadline := time.Now().Add(3 * time.Second)
	var first error
	n := 0
	for time.Now().Before(deadline) {
		n++
		if _, _, err := r.ScanRecords(ctx); err != nil {
			fails++
			if first == nil {
				first = err
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d scans", n)
	if fails > 0 {
		t.Errorf("%d of %d ScanRecords failed while the writer repacked: %v", fails, n, first)
	}
}

// ScanRecordsSince reads only the records written since the scan it is
// given: an unchanged record is the earlier scan's (the same *Record,
// not read again), also after a repack moved it to another pack; a
// replaced one is read anew, a deleted one is gone, a new one is there;
// and the result is what a full scan returns.
func TestScanRecordsSince(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	put := func(src, title string) {
		t.Helper()
		b := s.NewBatch()
		id, _ := b.Put(ctx, []byte(src+title))
		b.PutRecord(ctx, testRecord(src, id, title))
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, src := range []string{"/a", "/b", "/c"} {
		put(src, "v1")
	}
	first, err := s.ScanRecordsSince(ctx, nil)
	if err != nil || len(first.Records) != 3 {
		t.Fatalf("first scan: %v, %d records", err, len(first.Records))
	}
	if len(first.packed.keys) != 3 {
		t.Fatalf("first scan kept %d packed records for the next, want 3", len(first.packed.keys))
	}
	// ScanRecords' scan keeps none: its caller cannot pass them on.
	if sc, err := s.scanRecords(ctx, nil, false); err != nil || len(sc.Records) != 3 || len(sc.packed.keys)+len(sc.packed.vals) != 0 {
		t.Fatalf("a scan without keep: %v, %d records, %d packed kept", err, len(sc.Records), len(sc.packed.keys))
	}
	byID := func(sc *RecordScan) map[string]*Record {
		m := map[string]*Record{}
		for _, r := range sc.Records {
			m[r.DocID] = r
		}
		return m
	}
	was := byID(first)
	put("/b", "v2")
	if err := s.DeleteRecord(ctx, DocID("/c")); err != nil {
		t.Fatal(err)
	}
	put("/d", "v1")
	if _, err := s.Repack(ctx, RepackOptions{MinDead: 0}); err != nil { // /a's record moves to a new pack
		t.Fatal(err)
	}
	next, err := s.ScanRecordsSince(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	now := byID(next)
	if now[DocID("/a")] != was[DocID("/a")] {
		t.Errorf("/a, unchanged, was read again: %+v", now[DocID("/a")])
	}
	if r := now[DocID("/b")]; r == nil || r == was[DocID("/b")] || r.Title != "v2" {
		t.Errorf("/b, replaced: %+v; want the new record", r)
	}
	if now[DocID("/c")] != nil || now[DocID("/d")] == nil || len(next.Records) != 3 {
		t.Errorf("records after deleting /c and adding /d: %d, /c %v, /d %v", len(next.Records), now[DocID("/c")], now[DocID("/d")])
	}
	full, damaged, err := s.ScanRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, next.Records); diff != "" || len(damaged)+len(next.Damaged) != 0 {
		t.Errorf("ScanRecordsSince and ScanRecords differ (-full +since):\n%s", diff)
	}
}

// ScanRecordsSince on a store of loose records moved to the pack layout:
// loose records are read every time, a packed version of one takes its
// place, and the result is a full scan's.
func TestScanRecordsSinceLoose(t *testing.T) {
	ctx := context.Background()
	s, _, _ := looseMovedToPacks(t, "/a", "/b", "/c")
	first, err := s.ScanRecordsSince(ctx, nil)
	if err != nil || len(first.Records) != 3 {
		t.Fatalf("first scan: %v, %d records", err, len(first.Records))
	}
	a := *first.Records[slices.IndexFunc(first.Records, func(r *Record) bool { return r.Source == "/a" })]
	a.Title = "packed"
	if err := s.PutRecord(ctx, &a); err != nil {
		t.Fatal(err)
	}
	next, err := s.ScanRecordsSince(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := s.ScanRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, next.Records); diff != "" || len(next.Records) != 3 {
		t.Fatalf("ScanRecordsSince and ScanRecords differ (-full +since):\n%s", diff)
	}
	for _, r := range next.Records {
		if want := map[bool]string{true: "packed", false: "loose"}[r.Source == "/a"]; r.Title != want {
			t.Errorf("%s: title %q, want %q", r.Source, r.Title, want)
		}
	}
}

// packedRecords.sort puts entries read out of key order (a listing not in
// key order) in order, each record with its key, and find then walks
// them; entries already in order are left as they are.
func TestPackedRecordsSort(t *testing.T) {
	var p packedRecords
	for _, b := range []byte{9, 3, 7, 1, 5} {
		p.keys = append(p.keys, [16]byte{b})
		p.vals = append(p.vals, packedRecord{n: uint32(b), crc: uint32(b) * 10, rec: &Record{DocID: fmt.Sprint(b)}})
	}
	p.sort()
	cursor := 0
	for i, b := range []byte{1, 3, 5, 7, 9} {
		if p.keys[i] != [16]byte{b} {
			t.Fatalf("key %d is %v, want %v", i, p.keys[i][0], b)
		}
		r, ok := p.find(&cursor, [16]byte{b})
		if !ok || r.n != uint32(b) || r.crc != uint32(b)*10 || r.rec.DocID != fmt.Sprint(b) || cursor != i+1 {
			t.Fatalf("find %d: %+v, %v, cursor %d", b, r, ok, cursor)
		}
	}
	if _, ok := p.find(&cursor, [16]byte{4}); ok {
		t.Error("find of a key not there: found")
	}
	first := &p.keys[0]
	p.sort()
	if &p.keys[0] != first {
		t.Error("sorted entries copied again")
	}
}
