//go:build !race

package index

import (
	"testing"
	"unsafe"
)

// A document whose strings cannot fit an entry is left out, with its
// earlier entry (which may hold another sensitivity), and the table then
// answers no lookup or delete: they read the rows. The others are still
// stored and given back. (Not under -race: checkptr refuses the 4 GiB
// string made here, which is never read.)
func TestHitDocsOverflow(t *testing.T) {
	var b byte
	huge := unsafe.String(&b, 1<<32) // never read: pack refuses it by its length
	h := &hitDocs{loaded: true, at: map[[16]byte]uint32{}}
	k := func(x byte) [16]byte { return [16]byte{x} }
	h.put(k(1), hitDoc{source: "a", sensitivity: Restricted})
	h.put(k(2), hitDoc{source: "b", sensitivity: Public})
	h.put(k(1), hitDoc{source: huge, sensitivity: Public})
	if !h.overflow {
		t.Fatal("overflow not set")
	}
	if _, ok := h.get(k(1)); ok {
		t.Fatal("the document's earlier (restricted) entry is still held")
	}
	id := "02000000000000000000000000000000"
	if _, ok := h.lookup([]string{id}); ok {
		t.Error("lookup answered from a table that lacks a document")
	}
	if _, ok := h.docRanges([]any{id}); ok {
		t.Error("docRanges answered from a table that lacks a document")
	}
	h.put(k(3), hitDoc{source: "c", sensitivity: "SECRET"})
	if d, ok := h.get(k(3)); !ok || d.sensitivity != "SECRET" || len(h.entries) != 2 {
		t.Errorf("after the overflow: %+v, %v, %d entries; want SECRET kept in the freed entry", d, ok, len(h.entries))
	}
}
