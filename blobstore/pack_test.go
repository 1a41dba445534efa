package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func packedFileStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs")
	u := (&url.URL{Scheme: "file", Path: dir}).String()
	if err := UsePacks(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !s.Packed() {
		t.Fatal("a store put in the pack layout opens loose")
	}
	return s, dir
}

func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	s2, err := Open(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

func testRecord(src, blobID, title string) *Record {
	return &Record{DocID: DocID(src), Source: src, Title: title, Sensitivity: "public", BlobID: blobID, IngestedAt: time.Unix(1, 0).UTC()}
}

// putSmall stores n documents prefix/0 … prefix/n-1 one at a time (each
// blob and each record a small pack of its own, as single writes leave
// them), the record titled title, and returns their sources.
func putSmall(t *testing.T, s *Store, prefix string, n int, title string) []string {
	t.Helper()
	ctx := context.Background()
	srcs := make([]string, n)
	for i := range n {
		src := fmt.Sprintf("%s/%d", prefix, i)
		id, err := s.Put(ctx, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutRecord(ctx, testRecord(src, id, title)); err != nil {
			t.Fatal(err)
		}
		srcs[i] = src
	}
	return srcs
}

// files lists the regular files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// A batch in the pack layout is one file: its blobs and records in one
// pack, none loose; a reopened store reads them back from the footers.
func TestPackBatchIsOneFile(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	blobs, recs := s.NewBatch(), s.NewBatch()
	var want []*Record
	for i := 0; i < 400; i++ { // the records' index past footerRead: read apart
		data := []byte(fmt.Sprintf("passage %d %0500d", i, i))
		id, err := blobs.Put(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		rec := testRecord(fmt.Sprintf("/p/%d", i), id, "")
		if err := recs.StageRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	if err := FlushBatches(ctx, blobs, recs); err != nil {
		t.Fatal(err)
	}
	if err := blobs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got := files(t, dir)
	packs := 0
	for _, f := range got {
		switch {
		case strings.HasPrefix(f, "packs/") && strings.HasSuffix(f, ".pack"):
			packs++
		case f == layoutKey, f == seqFileKey:
		default:
			t.Errorf("file %s besides the packs", f)
		}
	}
	if packs != 2 {
		t.Errorf("%d packs, want 2 (the blobs', the records'): %v", packs, got)
	}
	for _, st := range []*Store{s, reopen(t, s)} {
		recs, err := st.Records(ctx)
		if err != nil || len(recs) != len(want) {
			t.Fatalf("Records = %d, %v; want %d", len(recs), err, len(want))
		}
		ids, err := st.BlobIDs(ctx)
		if err != nil || len(ids) != len(want) {
			t.Fatalf("BlobIDs = %d, %v", len(ids), err)
		}
		for _, r := range want {
			if _, err := st.Get(ctx, r.BlobID); err != nil {
				t.Fatal(err)
			}
			if got, err := st.GetRecord(ctx, r.DocID); err != nil || *got != *r {
				t.Fatalf("GetRecord = %+v, %v", got, err)
			}
		}
	}
}

// looseMovedToPacks writes a file:// store in the loose layout, a blob
// ("old SRC") and a record titled "loose" for each source, puts it in the
// pack layout (UsePacks) and opens it (closed with the test); it returns
// the store, its directory and the records.
func looseMovedToPacks(t *testing.T, srcs ...string) (*Store, string, []*Record) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "blobs")
	u := (&url.URL{Scheme: "file", Path: dir}).String()
	loose, err := OpenWith(ctx, u, &OpenOptions{Loose: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*Record
	for _, src := range srcs {
		id, err := loose.Put(ctx, []byte("old "+src))
		if err != nil {
			t.Fatal(err)
		}
		r := testRecord(src, id, "loose")
		if err := loose.PutRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	loose.Close()
	if err := UsePacks(ctx, u); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir, recs
}

// A store written loose, then put in the pack layout: its loose objects
// are read as they are; a packed record or tombstone wins over a loose
// record of the same document (and removes it); deleting a document whose
// record is loose removes the file.
func TestPacksOverLooseRecords(t *testing.T) {
	ctx := context.Background()
	s, dir, old := looseMovedToPacks(t, "/a", "/b", "/c")
	if recs, err := s.Records(ctx); err != nil || len(recs) != 3 {
		t.Fatalf("loose records read through the packs: %d, %v", len(recs), err)
	}
	if _, err := s.Get(ctx, old[0].BlobID); err != nil {
		t.Fatalf("loose blob: %v", err)
	}
	// /a: a new version, packed.
	a := *old[0]
	a.Title = "packed"
	if err := s.PutRecord(ctx, &a); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRecord(ctx, a.DocID); err != nil || got.Title != "packed" {
		t.Fatalf("GetRecord(/a) = %+v, %v; want the packed version", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "documents", a.DocID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hidden loose record of /a stays: %v", err)
	}
	// /a deleted: a tombstone (it has a packed record). /b deleted: its
	// loose file removed.
	for _, r := range old[:2] {
		if err := s.RemoveRecord(ctx, r.DocID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GetRecord(ctx, a.DocID); !errors.Is(err, ErrNotFound) {
		t.Errorf("a removal pending is not read as one: %v", err)
	}
	if err := s.SyncRemovals(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "documents", old[1].DocID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted loose record of /b stays: %v", err)
	}
	// A loose record of /a coming back (a crash undid the unlink) stays
	// hidden by the tombstone.
	_, data, _ := encodeRecord(old[0])
	if err := os.WriteFile(filepath.Join(dir, "documents", a.DocID+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, reopen(t, s)} {
		recs, err := st.Records(ctx)
		if err != nil || len(recs) != 1 || recs[0].Source != "/c" {
			t.Fatalf("Records = %v, %v; want /c alone", recs, err)
		}
		for _, r := range old[:2] {
			if _, err := st.GetRecord(ctx, r.DocID); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetRecord(%s) after delete: %v", r.Source, err)
			}
		}
	}
	// Repack removes the hidden loose record.
	res, err := s.Repack(ctx, RepackOptions{MinDead: 2})
	if err != nil || res.LooseDropped != 1 {
		t.Fatalf("Repack = %+v, %v; want the hidden loose record removed", res, err)
	}
}

// Damage in a pack is found and fails closed: a record whose bytes changed
// is a DamagedRecord (never read), a blob whose bytes changed is
// ErrCorrupt, and a pack whose footer is unreadable is listed and stops
// every record read.
func TestPackDamage(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	id, err := s.Put(ctx, []byte("the blob's bytes"))
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord("/secret", id, "")
	rec.Sensitivity = "restricted"
	if err := s.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	other := testRecord("/other", id, "")
	if err := s.PutRecord(ctx, other); err != nil {
		t.Fatal(err)
	}
	find := func(needle string) string {
		for _, f := range files(t, dir) {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			if bytes.Contains(b, []byte(needle)) {
				return filepath.Join(dir, f)
			}
		}
		t.Fatalf("no file holds %q", needle)
		return ""
	}
	flip := func(path, from, to string) {
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(path, bytes.Replace(b, []byte(from), []byte(to), 1), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// restricted → public, same length but for one letter: the CRC sees it.
	flip(find(`"restricted"`), `"restricted"`, `"restrictex"`)
	flip(find("the blob's bytes"), "the blob's bytes", "the blob's bytez")
	for _, st := range []*Store{s, reopen(t, s)} {
		if _, err := st.GetRecord(ctx, rec.DocID); !errors.Is(err, ErrCorrupt) {
			t.Errorf("GetRecord of a damaged record: %v, want ErrCorrupt", err)
		}
		recs, damaged, err := st.ScanRecords(ctx)
		if err != nil || len(recs) != 1 || len(damaged) != 1 || damaged[0].DocID != rec.DocID || damaged[0].Source != "/secret" {
			t.Errorf("ScanRecords = %v, %+v, %v; want /other and /secret damaged", recs, damaged, err)
		}
		if _, err := st.Records(ctx); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Records with a damaged record: %v", err)
		}
		if _, err := st.Get(ctx, id); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Get of a damaged blob: %v, want ErrCorrupt", err)
		}
	}
	// A pack cut short: its footer is gone.
	path := find(`"/other"`)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-5], 0o600)
	st := reopen(t, s)
	_, damaged, err := st.ScanRecords(ctx)
	if err != nil || !strings.HasPrefix(damaged[len(damaged)-1].Key, "packs/") || damaged[len(damaged)-1].DocID != "" {
		t.Errorf("ScanRecords with a cut pack: %+v, %v", damaged, err)
	}
	if _, err := st.GetRecord(ctx, other.DocID); !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetRecord with a damaged pack: %v, want ErrCorrupt (fail closed)", err)
	}
}

// Repack erases: after a record's new version, a deletion and a blob
// dropped, no file holds the old bytes; the live ones read back, also
// after reopening.
func TestRepackErases(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	b, r := s.NewBatch(), s.NewBatch()
	keepID, _ := b.Put(ctx, []byte("kept text"))
	goneID, _ := b.Put(ctx, []byte("SECRET-BLOB text"))
	r.PutRecord(ctx, testRecord("/keep", keepID, "OLD-TITLE"))
	r.PutRecord(ctx, testRecord("/gone", goneID, "SECRET-TITLE"))
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRecord(ctx, testRecord("/keep", keepID, "new title")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRecord(ctx, DocID("/gone")); err != nil {
		t.Fatal(err)
	}
	holds := func(needle string) []string {
		var out []string
		for _, f := range files(t, dir) {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			if bytes.Contains(b, []byte(needle)) {
				out = append(out, f)
			}
		}
		return out
	}
	for _, n := range []string{"OLD-TITLE", "SECRET-TITLE", "SECRET-BLOB"} {
		if len(holds(n)) == 0 {
			t.Fatalf("%s is in no file before the repack: the test cannot fail", n)
		}
	}
	res, err := s.Repack(ctx, RepackOptions{DropBlobs: []string{goneID}})
	if err != nil || res.BlobsDropped != 1 || res.Rewritten == 0 {
		t.Fatalf("Repack = %+v, %v", res, err)
	}
	for _, n := range []string{"OLD-TITLE", "SECRET-TITLE", "SECRET-BLOB"} {
		if f := holds(n); len(f) > 0 {
			t.Errorf("%s is still in %v", n, f)
		}
	}
	for _, st := range []*Store{s, reopen(t, s)} {
		got, err := st.GetRecord(ctx, DocID("/keep"))
		if err != nil || got.Title != "new title" {
			t.Fatalf("GetRecord(/keep) = %+v, %v", got, err)
		}
		if _, err := st.Get(ctx, keepID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Get(ctx, goneID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(dropped blob) = %v", err)
		}
		if _, err := st.GetRecord(ctx, DocID("/gone")); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRecord(/gone) = %v", err)
		}
	}
	// Nothing dead left: a second repack rewrites nothing.
	if res, err := s.Repack(ctx, RepackOptions{}); err != nil || res.Rewritten != 0 {
		t.Errorf("second Repack = %+v, %v", res, err)
	}
}

// TestPackIndexMemory measures the in-memory index at 1,000,000 blobs and
// 1,000,000 records, in 64-entry packs (an ingest's batches): the heap it
// holds and the time a lookup takes.
func TestPackIndexMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 2,000,000-entry index")
	}
	const n, per = 1_000_000, 64
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	x := newPackIndex()
	var seq uint64
	var probe [16]byte
	for i := 0; i < n; i += per {
		entries := make([]packEntry, 0, 2*per)
		for j := i; j < i+per && j < n; j++ {
			var e packEntry
			e.kind = kindBlob
			// Keys as the store's are, hashes (a blob's id is its
			// SHA-256, a record's key the doc id's bytes, itself a
			// hash): spread over every shard.
			e.key = sha256.Sum256(binary.LittleEndian.AppendUint32([]byte("blob"), uint32(j)))
			e.off, e.n = uint64(8+j%per*1000), 1000
			entries = append(entries, e)
			e.kind = kindRecord
			e.key = sha256.Sum256(binary.LittleEndian.AppendUint32([]byte("record"), uint32(j)))
			entries = append(entries, e)
			if j == n/2 {
				probe = e.docKey()
			}
		}
		seq++
		x.addLocked(&packInfo{name: packName(seq, "0123456789abcdef"), seq: seq}, entries)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	start := time.Now()
	const lookups = 100_000
	for i := 0; i < lookups; i++ {
		if _, _, ok := x.record(probe); !ok {
			t.Fatal("lookup missed")
		}
	}
	per1 := time.Since(start) / lookups
	heap := float64(m1.HeapAlloc-m0.HeapAlloc) / (1 << 20)
	t.Logf("pack index: %d blobs + %d records in %d packs: %.1f MiB heap, %d runs of records, lookup %v", n, n, seq, heap, x.recs.runCount(), per1)
	if heap > 120 {
		t.Errorf("the index takes %.1f MiB at 2M entries, want ≤ 120", heap)
	}
}

// Batches synced from several goroutines while others read: every record
// and blob reads back, and sequence numbers never repeat. Run with -race.
func TestPacksConcurrent(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	const writers, batches, per = 4, 10, 8
	errs := make(chan error, writers+2)
	done := make(chan struct{})
	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < batches; i++ {
				b, r := s.NewBatch(), s.NewBatch()
				for j := 0; j < per; j++ {
					src := fmt.Sprintf("/w%d/%d/%d", w, i, j)
					id, err := b.Put(ctx, []byte("bytes of "+src))
					if err == nil {
						err = r.StageRecord(ctx, testRecord(src, id, ""))
					}
					if err != nil {
						errs <- err
						return
					}
				}
				if err := FlushBatches(ctx, b, r); err != nil {
					errs <- err
					return
				}
				if err := b.Sync(ctx); err != nil {
					errs <- err
					return
				}
				if err := r.Sync(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if _, err := s.Records(ctx); err != nil {
				errs <- err
				return
			}
			s.GetRecord(ctx, DocID("/w0/0/0"))
		}
	}()
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	recs, err := reopen(t, s).Records(ctx)
	if err != nil || len(recs) != writers*batches*per {
		t.Fatalf("Records = %d, %v", len(recs), err)
	}
	seqs := map[uint64]bool{}
	for _, f := range files(t, filepath.Join(dir, "packs")) {
		if "packs/"+f == midxKey || "packs/"+f == seqFileKey {
			continue
		}
		seq, ok := parsePackName(f)
		if !ok || seqs[seq] {
			t.Errorf("pack %s: a sequence number given twice or a bad name", f)
		}
		seqs[seq] = true
	}
	if len(seqs) != 2*writers*batches {
		t.Errorf("%d packs, want %d", len(seqs), 2*writers*batches)
	}
}

func TestIDPatterns(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	for id, want := range map[string]bool{
		"sha256:" + hex64:                  true,
		"sha256:" + strings.ToUpper(hex64): false,
		"sha256:" + hex64[:63]:             false,
		"sha256:" + hex64 + "0":            false,
		"sha256:" + hex64[:63] + "g":       false,
		"sha512:" + hex64:                  false,
		hex64:                              false,
		"sha256:" + hex64[:63] + "/":       false,
		"sha256:" + hex64[:62] + "\u00e9":  false,
	} {
		if _, err := BlobKey(id); (err == nil) != want {
			t.Errorf("BlobKey(%q): %v, want ok=%v", id, err, want)
		}
	}
	for id, want := range map[string]bool{hex64[:32]: true, hex64[:31]: false, hex64[:33]: false, strings.ToUpper(hex64[:32]): false, "../" + hex64[:29]: false} {
		if _, err := RecordKey(id); (err == nil) != want {
			t.Errorf("RecordKey(%q): %v, want ok=%v", id, err, want)
		}
	}
}

// Removals that cannot be made durable (the tombstones' pack cannot be
// written) are not removals: the records read back as stored, and a
// later RemoveRecord and SyncRemovals remove them.
func TestSyncRemovalsFailure(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	rec := testRecord("/kept", BlobID([]byte("x")), "")
	if err := s.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRecord(ctx, rec.DocID); err != nil {
		t.Fatal(err)
	}
	packs := filepath.Join(dir, "packs")
	if err := os.Rename(packs, packs+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packs, nil, 0o600); err != nil { // a file where the directory was
		t.Fatal(err)
	}
	if err := s.SyncRemovals(); err == nil {
		t.Fatal("SyncRemovals without a packs directory succeeded")
	}
	os.Remove(packs)
	if err := os.Rename(packs+".away", packs); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRecord(ctx, rec.DocID); err != nil || got.Source != "/kept" {
		t.Fatalf("GetRecord after a failed removal: %v, %v; want the record", got, err)
	}
	if err := s.RemoveRecord(ctx, rec.DocID); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncRemovals(); err != nil {
		t.Fatal(err)
	}
	if _, err := reopen(t, s).GetRecord(ctx, rec.DocID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRecord after the removal: %v", err)
	}
}

// A reader whose index names a pack that a Repack (here another Store on
// the same directory) has rewritten reads the entry from the new pack.
func TestReadAfterRewrite(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	b := s.NewBatch()
	id, _ := b.Put(ctx, []byte("stays"))
	gone, _ := b.Put(ctx, []byte("goes"))
	b.PutRecord(ctx, testRecord("/r", id, ""))
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRecord(ctx, DocID("/r")); err != nil { // the index is loaded
		t.Fatal(err)
	}
	other := reopen(t, s)
	if res, err := other.Repack(ctx, RepackOptions{DropBlobs: []string{gone}}); err != nil || res.Rewritten != 1 {
		t.Fatalf("Repack = %+v, %v", res, err)
	}
	if _, err := s.Get(ctx, id); err != nil {
		t.Errorf("Get after another's rewrite: %v", err)
	}
	if _, err := s.GetRecord(ctx, DocID("/r")); err != nil {
		t.Errorf("GetRecord after another's rewrite: %v", err)
	}
	if recs, err := s.Records(ctx); err != nil || len(recs) != 1 {
		t.Errorf("Records after another's rewrite: %v, %v", recs, err)
	}
}
