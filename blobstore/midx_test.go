package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unsafe"

	"github.com/escurel/escurel/internal/s3test"
)

// footers returns how many pack footers s has read.
func footers(s *Store) int {
	s.px.mu.RLock()
	defer s.px.mu.RUnlock()
	return s.px.footersRead
}

// checkAll fails unless s reads every record of want (doc id → title;
// "" deleted) and its blob.
func checkAll(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	for doc, title := range want {
		rec, err := s.GetRecord(ctx, doc)
		if title == "" {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted %s: %+v, %v", doc, rec, err)
			}
			continue
		}
		if err != nil || rec.Title != title {
			t.Fatalf("record %s: %+v, %v; want title %s", doc, rec, err, title)
		}
		if _, err := s.Get(ctx, rec.BlobID); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Records(ctx)
	n := 0
	for _, title := range want {
		if title != "" {
			n++
		}
	}
	if err != nil || len(recs) != n {
		t.Fatalf("Records: %d, %v; want %d", len(recs), err, n)
	}
}

// The multi-pack index: an open after a Close reads it and no footer; one
// that does not cover the newest packs (a writer that died) is used for
// what it covers, the newer packs' footers read and their entries
// winning; one naming a pack that is gone, or damaged, is ignored (every
// footer read), and a pack damaged under it still fails closed.
func TestMultiPackIndex(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	for name, u := range map[string]string{
		"file": (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "blobs")}).String(),
		"s3":   srv.Bucket(t, "midx", "p/"),
	} {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{}
			put := func(s *Store, round int, srcs ...string) {
				t.Helper()
				b := s.NewBatch()
				for _, src := range srcs {
					title := fmt.Sprintf("round %d", round)
					id, err := b.Put(ctx, []byte(src+" "+title))
					if err != nil {
						t.Fatal(err)
					}
					if err := b.PutRecord(ctx, testRecord(src, id, title)); err != nil {
						t.Fatal(err)
					}
					want[DocID(src)] = title
				}
				if err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			a, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			for i := range closeMidxAdded {
				put(a, 0, fmt.Sprintf("/a/%d", i), fmt.Sprintf("/b/%d", i))
			}
			a.Close() // writes the multi-pack index: closeMidxAdded packs added
			if name == "file" {
				fi, err := os.Stat(filepath.Join(strings.TrimPrefix(u, "file://"), filepath.FromSlash(midxKey)))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("the multi-pack index: %v, %v; want a private file", fi, err)
				}
			}
			b := reopen(t, a)
			checkAll(t, b, want)
			if n := footers(b); n != 0 {
				t.Fatalf("an open after Close read %d footers, want 0", n)
			}
			// b writes newer versions, a removal and new documents, and
			// dies without Close: its index stays the old one.
			put(b, 1, "/a/1", "/c/1")
			put(b, 2, "/a/2")
			if err := b.DeleteRecord(ctx, DocID("/b/3")); err != nil {
				t.Fatal(err)
			}
			want[DocID("/b/3")] = ""
			stale, err := b.bucket.ReadAll(ctx, midxKey)
			if err != nil {
				t.Fatal(err)
			}
			c := reopen(t, a)
			checkAll(t, c, want)
			if n := footers(c); n != 3 {
				t.Fatalf("an open over a stale index read %d footers, want the 3 it does not cover", n)
			}
			// A Repack removes packs (and writes the index); the old
			// index put back names packs that are gone: ignored.
			if _, err := c.Repack(ctx, RepackOptions{MinDead: 0}); err != nil {
				t.Fatal(err)
			}
			if err := c.write(ctx, midxKey, stale, ""); err != nil {
				t.Fatal(err)
			}
			d := reopen(t, a)
			checkAll(t, d, want)
			all := 0
			d.list(ctx, "packs/", false, func(n string, _ int64, _ time.Time) {
				if _, ok := parsePackName(n); ok {
					all++
				}
			})
			if n := footers(d); n != all {
				t.Fatalf("an open over an index naming gone packs read %d footers, want all %d", n, all)
			}
			// A damaged index: ignored.
			bad := append([]byte(nil), stale...)
			bad[len(bad)/2] ^= 1
			if err := d.write(ctx, midxKey, bad, ""); err != nil {
				t.Fatal(err)
			}
			e := reopen(t, a)
			checkAll(t, e, want)
			if n := footers(e); n != all {
				t.Fatalf("an open over a damaged index read %d footers, want all %d", n, all)
			}
			if name != "file" {
				return
			}
			// A fresh index, then a pack truncated under it: its size
			// differs, so its footer is read, and records fail closed.
			e.Close()
			f := reopen(t, a)
			f.GetRecord(ctx, DocID("/a/0"))
			if n := footers(f); n != 0 {
				t.Fatalf("an open after Close read %d footers", n)
			}
			dir := strings.TrimPrefix(u, "file://")
			packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
			data, _ := os.ReadFile(packs[0])
			os.WriteFile(packs[0], data[:len(data)-5], 0o600)
			g := reopen(t, a)
			if _, err := g.GetRecord(ctx, DocID("/c/1")); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a record read with a pack damaged under the index: %v, want ErrCorrupt", err)
			}
		})
	}
}

// BenchmarkOpenPacks measures a store's first lookup after Open (the
// pack index loaded) at bench-fts's 100,000 passages: 230 packs of 435
// blobs of 1.6 KB and their records, with the multi-pack index and
// without it (every footer read). -benchtime 5x; ESCUREL_BENCH_DOCS
// sets another count.
func BenchmarkOpenPacks(b *testing.B) {
	ctx := context.Background()
	docs := 100_000
	if v := os.Getenv("ESCUREL_BENCH_DOCS"); v != "" {
		fmt.Sscan(v, &docs)
	}
	u := (&url.URL{Scheme: "file", Path: filepath.Join(b.TempDir(), "blobs")}).String()
	s, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("passage text ", 120)
	for i := 0; i < docs; {
		batch := s.NewBatch()
		for j := 0; j < 435 && i < docs; j, i = j+1, i+1 {
			src := fmt.Sprintf("/bench/%d", i)
			id, err := batch.Put(ctx, []byte(src+body))
			if err == nil {
				err = batch.PutRecord(ctx, testRecord(src, id, "t"))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	midx, err := os.ReadFile(filepath.Join(strings.TrimPrefix(u, "file://"), "packs", "multi-pack-index"))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"footers", "midx"} {
		b.Run(mode, func(b *testing.B) {
			path := filepath.Join(strings.TrimPrefix(u, "file://"), "packs", "multi-pack-index")
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if mode == "footers" {
					os.Remove(path)
				} else {
					os.WriteFile(path, midx, 0o600)
				}
				b.StartTimer()
				s, err := Open(ctx, u)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.GetRecord(ctx, DocID("/bench/7")); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if want := map[string]int{"footers": (docs + 434) / 435, "midx": 0}[mode]; footers(s) != want {
					b.Fatalf("%d footers read, want %d", footers(s), want)
				}
				s.bucket.Close() // not Close: no index written
				b.StartTimer()
			}
			b.ReportMetric(float64(len(midx))/1e6, "midx-MB")
		})
	}
}

// PackStats counts the dead bytes: a record version replaced, a record
// removed; a Repack at share 0 leaves none.
func TestPackStatsDeadBytes(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	id, err := s.Put(ctx, []byte("bytes"))
	if err != nil {
		t.Fatal(err)
	}
	v1 := testRecord("/a", id, "one")
	_, d1, _ := encodeRecordAs(v1, true)
	if err := s.PutRecord(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if st, err := s.PackStats(ctx); err != nil || st.DeadBytes != 0 || st.Packs != 2 {
		t.Fatalf("PackStats = %+v, %v; want 2 packs, no dead byte", st, err)
	}
	v2 := testRecord("/a", id, "two")
	_, d2, _ := encodeRecordAs(v2, true)
	if err := s.PutRecord(ctx, v2); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.PackStats(ctx); st.DeadBytes != int64(len(d1)) {
		t.Fatalf("after a new version: %+v, want %d dead bytes", st, len(d1))
	}
	if err := s.DeleteRecord(ctx, v2.DocID); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.PackStats(ctx); st.DeadBytes != int64(len(d1)+len(d2)) {
		t.Fatalf("after a removal: %+v, want %d dead bytes", st, len(d1)+len(d2))
	}
	if _, err := s.Repack(ctx, RepackOptions{MinDead: 0}); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.PackStats(ctx); st.DeadBytes != 0 {
		t.Fatalf("after Repack: %+v, want no dead byte", st)
	}
}

// Repack with FoldBelow folds the small packs (single writes, removals'
// tombstones) into one: the same reads, fewer packs; a crash that left
// the small packs beside the folded one reads the same too.
func TestRepackFolds(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	want := map[string]string{}
	b := s.NewBatch()
	for i := range 300 {
		src := fmt.Sprintf("/big/%d", i)
		id, err := b.Put(ctx, []byte(strings.Repeat(src, 40)))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PutRecord(ctx, testRecord(src, id, "big")); err != nil {
			t.Fatal(err)
		}
		want[DocID(src)] = "big"
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, src := range putSmall(t, s, "/small", 10, "v1") {
		want[DocID(src)] = "v1"
	}
	// A newer version and removals: records that older small packs hold
	// are dead, and the tombstones must stay winning.
	id, _ := s.Put(ctx, []byte("/small/3"))
	s.PutRecord(ctx, testRecord("/small/3", id, "v2"))
	want[DocID("/small/3")] = "v2"
	for _, src := range []string{"/small/5", "/big/7"} {
		if err := s.DeleteRecord(ctx, DocID(src)); err != nil {
			t.Fatal(err)
		}
		want[DocID(src)] = ""
	}
	packs := func() []string {
		var out []string
		for _, f := range files(t, filepath.Join(dir, "packs")) {
			if strings.HasSuffix(f, ".pack") {
				out = append(out, f)
			}
		}
		return out
	}
	before := packs()
	saved := map[string][]byte{}
	for _, f := range before {
		saved[f], _ = os.ReadFile(filepath.Join(dir, "packs", f))
	}
	checkAll(t, s, want)
	res, err := s.Repack(ctx, RepackOptions{MinDead: 2, FoldBelow: 4096})
	if err != nil {
		t.Fatal(err)
	}
	after := packs()
	if len(before) != 24 || res.Folded != 23 || len(after) != 2 {
		t.Fatalf("Repack = %+v; packs %d → %d, want 24 → 2", res, len(before), len(after))
	}
	checkAll(t, s, want)
	checkAll(t, reopen(t, s), want)
	// The small packs back, as a crash before their removal leaves them.
	for f, data := range saved {
		os.WriteFile(filepath.Join(dir, "packs", f), data, 0o600)
	}
	os.Remove(filepath.Join(dir, "packs", "multi-pack-index"))
	checkAll(t, reopen(t, s), want)
}

// decodeMidx never panics on a damaged index, even one whose checksum
// was made to match: it errs, or yields entries in range.
func TestDecodeMidxDamaged(t *testing.T) {
	ctx := context.Background()
	s, _ := packedFileStore(t)
	putPacks(t, s, 5, 3)
	s.DeleteRecord(ctx, DocID("/1/1"))
	s.px.mu.RLock()
	good := s.px.encodeMidx()
	s.px.mu.RUnlock()
	if _, err := decodeMidx(good); err != nil {
		t.Fatal(err)
	}
	seal := func(body []byte) []byte {
		return binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
	}
	body := good[:len(good)-4]
	for l := 0; l < len(body); l++ {
		if _, err := decodeMidx(seal(body[:l])); err == nil {
			t.Fatalf("an index cut at %d of %d bytes decodes", l, len(body))
		}
	}
	// Every byte changed, the checksum made to match: decodeMidx refuses
	// it, or a Store that opens with it reads every live record without
	// a panic (a changed key or CRC may read as damage or as not found;
	// never as another document's record).
	used := 0
	for i := len(midxMagic); i < len(body); i++ {
		for _, v := range []byte{0, 0xff, body[i] ^ 0x80} {
			b := append([]byte(nil), body...)
			b[i] = v
			if _, err := decodeMidx(seal(b)); err != nil || v != body[i]^0x80 || i%4 != 0 {
				continue // (a sample is opened: each open costs a few ms)
			}
			used++
			if err := s.write(ctx, midxKey, seal(b), ""); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("byte %d set to %#x: panic: %v", i, v, p)
					}
				}()
				r := reopen(t, s)
				recs, _, _ := r.ScanRecords(ctx)
				for _, rec := range recs {
					if rec.DocID != DocID(rec.Source) {
						t.Errorf("byte %d set to %#x: record of %s under %s", i, v, rec.Source, rec.DocID)
					}
				}
				for i := range 5 {
					for j := range 3 {
						r.GetRecord(ctx, DocID(fmt.Sprintf("/%d/%d", i, j)))
					}
				}
			}()
		}
	}
	t.Logf("%d changed indexes decoded and were used", used)
}

// failingReader gives the first n bytes of data, then err.
type failingReader struct {
	data []byte
	n    int
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := copy(p, r.data[:min(len(r.data), r.n)])
	r.data, r.n = r.data[k:], r.n-k
	return k, nil
}

// failOnceReader gives the bytes of data up to at, then fails once with
// err, then gives the rest.
type failOnceReader struct {
	data   []byte
	at     int
	err    error
	failed bool
}

func (r *failOnceReader) Read(p []byte) (int, error) {
	if !r.failed && r.at == 0 {
		r.failed = true
		return 0, r.err
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if !r.failed {
		n = min(n, r.at)
	}
	k := copy(p, r.data[:min(len(r.data), n)])
	r.data = r.data[k:]
	if !r.failed {
		r.at -= k
	}
	return k, nil
}

// readMidxFrom reads the index whole, through any reader: a stream cut
// short, longer than its size says, or over the limit is damage
// (errMidx, the footers are read instead); a read that fails midway is
// the object's error, returned as it is, not damage.
func TestReadMidxStream(t *testing.T) {
	s, _ := packedFileStore(t)
	putPacks(t, s, 30, 300)
	s.px.mu.RLock()
	good := s.px.encodeMidx()
	s.px.mu.RUnlock()
	size, limit := int64(len(good)), int64(len(good))
	m, err := readMidxFrom(bytes.NewReader(good), size, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.blobs) != 9000 || len(m.recs) != 9000 {
		t.Fatalf("%d blobs and %d records, want 9000 of each", len(m.blobs), len(m.recs))
	}
	// A stream that gives one byte a read, or half of what is asked,
	// decodes the same.
	for _, rd := range []io.Reader{iotest.OneByteReader(bytes.NewReader(good)), iotest.HalfReader(bytes.NewReader(good))} {
		m2, err := readMidxFrom(rd, size, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.blobs, m2.blobs) || !slices.Equal(m.recs, m2.recs) {
			t.Fatalf("the index decodes differently through %T", rd)
		}
	}
	for _, n := range []int64{size + 1, size - 1} {
		if _, err := readMidxFrom(bytes.NewReader(good), n, n); !errors.Is(err, errMidx) {
			t.Errorf("%d bytes read as %d: %v, want errMidx", size, n, err)
		}
	}
	if _, err := readMidxFrom(bytes.NewReader(good), size, size-1); !errors.Is(err, errMidx) {
		t.Errorf("an index over the limit: %v, want errMidx", err)
	}
	broken := errors.New("connection reset")
	for _, at := range []int{0, 5, 70_000, len(good) - 2} {
		_, err := readMidxFrom(&failingReader{data: good, n: at, err: broken}, size, limit)
		if !errors.Is(err, broken) || errors.Is(err, errMidx) {
			t.Errorf("read failing after %d bytes: %v, want the read's error", at, err)
		}
		// A reader that returns its error once, then the rest of the
		// bytes (io.Reader allows it): the error still wins (review 13).
		_, err = readMidxFrom(&failOnceReader{data: good, at: at, err: broken}, size, limit)
		if !errors.Is(err, broken) || errors.Is(err, errMidx) {
			t.Errorf("read failing once after %d bytes: %v, want the read's error", at, err)
		}
	}
}

// TestMidxEntriesInPlace: on this machine (little-endian, gc's layout)
// the decoded entries are the read buffer's own bytes, not a copy; from
// a buffer not aligned for them, they are decoded into a copy, equal.
func TestMidxEntriesInPlace(t *testing.T) {
	if !entInPlace {
		t.Skip("this machine's layout of ent is not the index's: entries are always copied")
	}
	s, _ := packedFileStore(t)
	putPacks(t, s, 3, 50)
	s.px.mu.RLock()
	good := s.px.encodeMidx()
	s.px.mu.RUnlock()
	data := append(make([]byte, 0, len(good)+8), good...)
	m, err := decodeMidx(data)
	if err != nil {
		t.Fatal(err)
	}
	inside := func(p unsafe.Pointer, b []byte) bool {
		return uintptr(p) >= uintptr(unsafe.Pointer(&b[0])) && uintptr(p) < uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b))
	}
	if len(m.blobs) != 150 || len(m.recs) != 150 || !inside(unsafe.Pointer(&m.blobs[0]), data) || !inside(unsafe.Pointer(&m.recs[0]), data) {
		t.Fatalf("%d blobs, %d records, in the buffer: %v, %v", len(m.blobs), len(m.recs),
			inside(unsafe.Pointer(&m.blobs[0]), data), inside(unsafe.Pointer(&m.recs[0]), data))
	}
	odd := make([]byte, len(good)+1)[1:]
	copy(odd, good)
	c, err := decodeMidx(odd)
	if err != nil {
		t.Fatal(err)
	}
	if inside(unsafe.Pointer(&c.blobs[0]), odd) || inside(unsafe.Pointer(&c.recs[0]), odd) {
		t.Fatal("entries used in place from a buffer not aligned for them")
	}
	if !slices.Equal(m.blobs, c.blobs) || !slices.Equal(m.recs, c.recs) {
		t.Fatal("the copied entries differ from those in place")
	}
}

// putPacks stores batches packs of perBatch blobs and records each, the
// source of record j of batch i being "/i/j" (its blob the same bytes).
func putPacks(t *testing.T, s *Store, batches, perBatch int) {
	t.Helper()
	ctx := context.Background()
	for i := range batches {
		b := s.NewBatch()
		for j := range perBatch {
			src := fmt.Sprintf("/%d/%d", i, j)
			id, _ := b.Put(ctx, []byte(src))
			b.PutRecord(ctx, testRecord(src, id, "t"))
		}
		if err := b.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The multi-pack index is encoded as it is written: at 200,000 blobs and
// 200,000 records (about 14 MB encoded) writing it allocates under 2 MiB,
// both as a batch leaves the tables (many runs a shard, merged as it
// goes) and compacted, where an encoding in memory allocated 57 MB (its
// sections, then the file) and merges into new copies 144 MB.
func TestEncodeMidxStreams(t *testing.T) {
	const n, per = 200_000, 64
	x := newPackIndex()
	for i, seq := 0, uint64(1); i < n; i, seq = i+per, seq+1 {
		entries := make([]packEntry, 0, 2*per)
		for j := i; j < i+per && j < n; j++ {
			e := packEntry{kind: kindBlob, off: uint64(8 + j%per*100), n: 100}
			e.key = sha256.Sum256([]byte(fmt.Sprint(j)))
			entries = append(entries, e)
			e.kind = kindRecord
			e.key = sha256.Sum256([]byte(fmt.Sprint("r", j)))
			entries = append(entries, e)
		}
		x.addLocked(&packInfo{name: packName(seq, "0123456789abcdef"), seq: seq, size: 1 << 20}, entries)
	}
	encode := func(stage string) []byte {
		t.Helper()
		var size countingWriter
		// TotalAlloc counts the whole process's allocations (the test
		// runner's too): the least of three encodings is this one's.
		alloc := uint64(math.MaxUint64)
		for range 3 {
			size = 0
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			if err := x.encodeMidxTo(&size); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&m1)
			alloc = min(alloc, m1.TotalAlloc-m0.TotalAlloc)
		}
		t.Logf("%s (%d blob runs, %d record runs): %.1f MB written, %.0f KiB allocated", stage, x.blobs.runCount(), x.recs.runCount(), float64(size)/1e6, float64(alloc)/1024)
		if size < 10e6 {
			t.Fatalf("%s: encoded %d bytes, want the whole index", stage, size)
		}
		if alloc > 2<<20 {
			t.Errorf("%s: encoding allocated %d bytes, want < 2 MiB (streamed, merged in scratch buffers)", stage, alloc)
		}
		return x.encodeMidx()
	}
	runs := encode("as the batches left it")
	x.blobs.compact(x.packs) // one run a shard: each merges nothing
	x.recs.compact(x.packs)
	compacted := encode("compacted")
	if !bytes.Equal(runs, compacted) {
		t.Error("the index encodes differently once compacted")
	}
	m, err := decodeMidx(compacted)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.blobs) != n || len(m.recs) != n {
		t.Errorf("decoded %d blobs and %d records, want %d each", len(m.blobs), len(m.recs), n)
	}
}

// countingWriter counts the bytes written to it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// BenchmarkReadMidx decodes a multi-pack index of 1,000,000 blobs and
// 1,000,000 records (SHA-256 keys, 2,000 packs; about 70 MB, the size of
// a 1M-passage store's) from memory: the CPU a writer's first lookup
// pays at open (issue 16), without the read from disk.
// ESCUREL_BENCH_DOCS changes the count.
func BenchmarkReadMidx(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("ESCUREL_BENCH_DOCS"); v != "" {
		fmt.Sscan(v, &n)
	}
	const per = 500
	x := newPackIndex()
	for i, seq := 0, uint64(1); i < n; i, seq = i+per, seq+1 {
		entries := make([]packEntry, 0, 2*per)
		for j := i; j < i+per && j < n; j++ {
			e := packEntry{kind: kindBlob, off: uint64(8 + (j%per)*1500), n: 1400, crc: uint32(j)}
			e.key = sha256.Sum256([]byte(fmt.Sprint(j)))
			entries = append(entries, e)
			e.kind, e.off, e.n = kindRecord, e.off+1400, 100
			e.key = sha256.Sum256([]byte(fmt.Sprint("r", j)))
			entries = append(entries, e)
		}
		x.addLocked(&packInfo{name: packName(seq, "0123456789abcdef"), seq: seq, size: 2 << 20}, entries)
	}
	data := x.encodeMidx()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		m, err := readMidxFrom(bytes.NewReader(data), int64(len(data)), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		if len(m.blobs) != n || len(m.recs) != n {
			b.Fatalf("%d blobs and %d records, want %d each", len(m.blobs), len(m.recs), n)
		}
	}
	b.ReportMetric(float64(len(data))/1e6, "midx-MB")
}

// Remote is false for the stores on this machine, true for object stores.
func TestRemote(t *testing.T) {
	ctx := context.Background()
	for u, want := range map[string]bool{
		"mem://": false,
		(&url.URL{Scheme: "file", Path: t.TempDir()}).String(): false,
		s3test.Start(t).Bucket(t, "remote", ""):                true,
	} {
		s, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if s.Remote() != want {
			t.Errorf("%s: Remote %v, want %v", Redact(u), s.Remote(), want)
		}
		s.Close()
	}
}

// TestMidxUpgradeAndRefusal: an older version's index (ESCMIDX1, its own
// key) is neither read nor kept once this version writes its own; a
// damaged or stale index of this version, even on a store of fewer packs
// than a Close needs to write one, is rewritten at the next Close, not
// read again at every open.
func TestMidxUpgradeAndRefusal(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	putPacks(t, s, closeMidxAdded, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	v1 := filepath.Join(dir, filepath.FromSlash(midxKeyV1))
	v2 := filepath.Join(dir, filepath.FromSlash(midxKey))
	if err := os.WriteFile(v1, []byte("ESCMIDX1 an older version's index"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(v2)
	u := (&url.URL{Scheme: "file", Path: dir}).String()
	cycle := func() {
		t.Helper()
		s, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetRecord(ctx, DocID("/1/1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // no index of this version: every footer read, 16 packs added
	if _, err := os.Stat(v1); !os.IsNotExist(err) {
		t.Fatalf("the older index after this version wrote its own: %v", err)
	}
	data, err := os.ReadFile(v2)
	if err != nil || !bytes.HasPrefix(data, []byte(midxMagic)) {
		t.Fatalf("the index after the upgrade: %q…, %v", data[:min(len(data), 8)], err)
	}

	// A store of 2 packs: a Close alone writes no index; a damaged one
	// is rewritten all the same.
	small, sdir := packedFileStore(t)
	putPacks(t, small, 2, 2)
	small.Close()
	sv2 := filepath.Join(sdir, filepath.FromSlash(midxKey))
	if _, err := os.Stat(sv2); !os.IsNotExist(err) {
		t.Fatalf("a store of 2 packs has an index before any refusal: %v", err)
	}
	damaged := append([]byte(midxMagic), make([]byte, 40)...)
	if err := os.WriteFile(sv2, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	su := (&url.URL{Scheme: "file", Path: sdir}).String()
	s2, err := Open(ctx, su)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetRecord(ctx, DocID("/1/1")); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	data, err = os.ReadFile(sv2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeMidx(data); err != nil || bytes.Equal(data, damaged) {
		t.Fatalf("the damaged index after a Close: %v (unchanged: %v)", err, bytes.Equal(data, damaged))
	}
}

// TestMidxRunsReadOnly: the tables use the index's buffer in place, and
// nothing that follows (a pack added, every run compacted, an encoding)
// writes into it.
func TestMidxRunsReadOnly(t *testing.T) {
	s, _ := packedFileStore(t)
	putPacks(t, s, 4, 30)
	s.px.mu.RLock()
	good := s.px.encodeMidx()
	s.px.mu.RUnlock()
	data := append([]byte(nil), good...)
	m, err := decodeMidx(data)
	if err != nil {
		t.Fatal(err)
	}
	x := newPackIndex()
	present := map[string]int64{}
	for _, p := range m.packs {
		present[p.name] = p.size
	}
	x.mu.Lock()
	if !x.installMidx(m, present) {
		t.Fatal("the index was not installed")
	}
	// A pack with newer entries of half the keys, and new ones.
	var entries []packEntry
	for i, e := range m.blobs {
		if i%2 == 0 {
			entries = append(entries, packEntry{kind: kindBlob, key: e.key, off: 8, n: 10, crc: 1})
		}
	}
	for i := range 40 {
		e := packEntry{kind: kindRecord, off: 8, n: 10, crc: 2}
		copy(e.key[:], fmt.Sprintf("new record %d", i))
		entries = append(entries, e)
	}
	x.addLocked(&packInfo{name: packName(1000, "0123456789abcdef"), seq: 1000, size: 1 << 20, data: 1 << 19}, entries)
	x.blobs.compact(x.packs)
	x.recs.compact(x.packs)
	x.encodeMidx()
	x.mu.Unlock()
	if !bytes.Equal(data, good) {
		t.Fatal("the index's buffer changed under the tables")
	}
}
