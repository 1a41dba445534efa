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
	for k, d := range h.docs {
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
		if _, ok := h.docs[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%x: row %+v, not in the table", k, w))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs[:min(len(diffs), 10)], "\n"), nil
}

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

// What the delete's fields cost the in-memory table at 1M documents,
// measured: the map's bytes with and without them (strings shared, as
// they are counted apart). The entry grows by 16 bytes; the map has up to
// about 2 slots a document (tables of a power of two slots, 7/8 full at
// most). Fails when the entry grows more, or the map by more than 36
// bytes a document.
func TestHitDocMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two maps of 1M entries")
	}
	const n = 1_000_000
	key := func(i int) (k [16]byte) {
		binary.LittleEndian.PutUint64(k[:], uint64(i)*0x9E3779B97F4A7C15)
		return k
	}
	with := heapOf(func(n int) any {
		m := make(map[[16]byte]hitDoc, n)
		for i := range n {
			m[key(i)] = hitDoc{source: "s", title: "t", sensitivity: Public, first: int64(i), count: 1}
		}
		return m
	}, n)
	without := heapOf(func(n int) any {
		m := make(map[[16]byte]hitDocBefore, n)
		for i := range n {
			m[key(i)] = hitDocBefore{source: "s", title: "t", sensitivity: Public}
		}
		return m
	}, n)
	per := float64(with-without) / n
	t.Logf("1M documents: %.1f MB with the delete's fields, %.1f MB without: %.1f bytes a document (entry %d bytes, was %d)",
		float64(with)/1e6, float64(without)/1e6, per, unsafe.Sizeof(hitDoc{}), unsafe.Sizeof(hitDocBefore{}))
	if grew := unsafe.Sizeof(hitDoc{}) - unsafe.Sizeof(hitDocBefore{}); grew > 16 || per > 36 {
		t.Errorf("the delete's fields cost %d bytes an entry, %.1f bytes a document, want ≤ 16 and ≤ 36", grew, per)
	}
}
