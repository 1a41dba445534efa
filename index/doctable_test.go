package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"unsafe"
)

// docTableRow is a document's fields that the in-memory table (hitDocs)
// holds, with its language by name, as its row stores them.
type docTableRow struct {
	source, title, sens, meta, given, lang string
	first                                  int64
	count                                  int32
}

// docTableDiff compares the live state's in-memory table with its
// documents rows: every field of every document, both ways. It returns
// the differences (at most ten), "" when none, and an error when the
// table is not loaded.
func docTableDiff(ctx context.Context, ix *Index) (string, error) {
	s, err := ix.acquire()
	if err != nil {
		return "", err
	}
	defer s.unref()
	rows, err := s.db.QueryContext(ctx, `SELECT doc_id, source, title, sensitivity, meta, meta_given, language, first_block, block_count FROM documents`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	want := map[[16]byte]docTableRow{}
	for rows.Next() {
		var id string
		var r docTableRow
		if err := rows.Scan(&id, &r.source, &r.title, &r.sens, &r.meta, &r.given, &r.lang, &r.first, &r.count); err != nil {
			return "", err
		}
		k, ok := hitDocKey(id)
		if !ok {
			return "", fmt.Errorf("doc id %q", id)
		}
		want[k] = r
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	h := &s.hitDocs
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.loaded {
		return "", fmt.Errorf("the table is not loaded")
	}
	var diffs []string
	for k, i := range h.at {
		d := h.entries[i].doc()
		meta, given := d.metaColumns()
		lang := "<noLang>"
		if d.lang != noLang {
			lang = h.langs[d.lang]
		}
		got := docTableRow{d.source, d.title, d.sensitivity, meta, given, lang, d.first, d.count}
		if w, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%x: in the table %+v, no row", k, got))
		} else if got != w {
			diffs = append(diffs, fmt.Sprintf("%x: table %+v, row %+v", k, got, w))
		}
	}
	for k, w := range want {
		if _, ok := h.at[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%x: row %+v, not in the table", k, w))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs[:min(len(diffs), 10)], "\n"), nil
}

// HitDocsLoadAfter is hitDocsLoadAfter, for the tests outside the
// package: the searches after which a state holds its table of documents.
const HitDocsLoadAfter = hitDocsLoadAfter

// CheckDocTable (for index_test) returns an error when the live state's
// in-memory table of documents (hitDocs: what hits and deletes read of a
// document's row) is not loaded or differs from the documents rows.
func CheckDocTable(ctx context.Context, ix *Index) error {
	diff, err := docTableDiff(ctx, ix)
	if err != nil {
		return err
	}
	if diff != "" {
		return fmt.Errorf("in-memory documents table differs from the rows:\n%s", diff)
	}
	return nil
}

// hitDocBefore is hitDoc without the fields deletes read (first, count,
// lang): what the table cost before.
type hitDocBefore struct {
	source, title string
	sensitivity   string
	meta, given   string
}

// heapOf returns the bytes a map of n entries built by fill holds (the
// live heap's growth), with the strings shared.
func heapOf(fill func(n int) any, n int) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	keep := fill(n)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(keep)
	return m1.HeapAlloc - m0.HeapAlloc
}

// What the in-memory table of documents holds at 1M documents, measured
// (the live heap's growth): the table as the code fills it (apply), its
// strings made for each document as a row's scan makes them, against the
// map of hitDoc values it replaced, filled the same way. A document has
// a 40-byte source and a 24-byte title, public, no metadata. Fails when
// the table takes more than 170 bytes a document or more than 0.55 of the
// map's.
func TestHitDocMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two tables of 1M entries")
	}
	const n = 1_000_000
	key := func(i int) (k [16]byte) {
		binary.LittleEndian.PutUint64(k[:], uint64(i)*0x9E3779B97F4A7C15)
		return k
	}
	doc := func(i int) hitDoc {
		d := newHitDoc(fmt.Sprintf("/home/me/docs/section-%02d/page-%06d.md", i%100, i), fmt.Sprintf("Page %06d of the handbook", i)[:24], Public, "{}", "{}")
		d.first, d.count = int64(i), 1
		return d
	}
	packed := heapOf(func(n int) any {
		h := &hitDocs{loaded: true, at: make(map[[16]byte]uint32, n), entries: make([]hitEntry, 0, n)}
		for i := range n {
			h.put(key(i), doc(i))
		}
		return h
	}, n)
	values := heapOf(func(n int) any {
		m := make(map[[16]byte]hitDoc, n)
		for i := range n {
			m[key(i)] = doc(i)
		}
		return m
	}, n)
	per, was := float64(packed)/n, float64(values)/n
	t.Logf("1M documents: %.1f MB packed (%.1f bytes a document, entry %d bytes), %.1f MB as a map of hitDoc values (%.1f bytes, entry %d): %.2f×",
		float64(packed)/1e6, per, unsafe.Sizeof(hitEntry{}), float64(values)/1e6, was, unsafe.Sizeof(hitDoc{}), per/was)
	if per > 170 || per > 0.55*was {
		t.Errorf("the table takes %.1f bytes a document, want ≤ 170 and ≤ 0.55 of the map's %.1f", per, was)
	}
}

// An entry gives back the document it packed, whatever its strings and
// sensitivity (one of the levels is a code; any other is kept as
// stored), and a removed document's entry is reused.
func TestHitEntryRoundTrip(t *testing.T) {
	docs := []hitDoc{
		{source: "/a.md", title: "A", sensitivity: Public, first: 7, count: 3, lang: 2},
		{source: "s3://b/ü.md", title: "", sensitivity: Restricted, meta: `{"k":"v"}`, given: `{"k":"v"}`, first: -1, count: -1, lang: noLang},
		{source: "", title: "t", sensitivity: "TOP-SECRET", meta: "", given: `{"x":1}`},
		{source: "x", title: "y", sensitivity: "", meta: `{"m":2}`},
		{source: "i", title: "j", sensitivity: Internal},
	}
	for _, d := range docs {
		e, ok := pack(d)
		if !ok {
			t.Fatalf("pack(%+v) failed", d)
		}
		if got := e.doc(); got != d {
			t.Errorf("entry of %+v gives back %+v", d, got)
		}
	}
	h := &hitDocs{loaded: true, at: map[[16]byte]uint32{}}
	k := func(b byte) [16]byte { return [16]byte{b} }
	for i, d := range docs[:3] {
		h.put(k(byte(i)), d)
	}
	h.remove(k(1))
	h.put(k(9), docs[3])
	h.put(k(0), docs[4]) // a replace keeps its entry
	if len(h.entries) != 3 || len(h.free) != 0 {
		t.Errorf("%d entries, %d free after a removal and two puts, want 3 and 0", len(h.entries), len(h.free))
	}
	for b, want := range map[byte]hitDoc{0: docs[4], 2: docs[2], 9: docs[3]} {
		if got, ok := h.get(k(b)); !ok || got != want {
			t.Errorf("key %d: %+v, %v; want %+v", b, got, ok, want)
		}
	}
	if _, ok := h.get(k(1)); ok {
		t.Error("a removed document is still held")
	}
}
