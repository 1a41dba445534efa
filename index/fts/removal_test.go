package fts

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A removal row decodes to what was encoded, and every truncation or
// extension of it is an error wrapping errRemoval, never a panic.
func TestRemovalCodec(t *testing.T) {
	killed := []int64{900, 5, 1 << 40, 77}
	changes := map[int32]df{3: {-1, -1, 0}, 0: {-2, 0, -2}, 1 << 30: {-4, -3, -1}, 70: {5, 0, 0}}
	data := encodeRemoval(killed, changes)
	var gotBlocks []int64
	gotTerms := map[int32]df{}
	err := decodeRemoval(data, func(id int64) error {
		gotBlocks = append(gotBlocks, id)
		return nil
	}, func(id int32, d df) error {
		gotTerms[id] = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{5, 77, 900, 1 << 40}, gotBlocks); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(changes, gotTerms); diff != "" {
		t.Errorf("terms (-want +got):\n%s", diff)
	}
	nop := func(int64) error { return nil }
	nopTerm := func(int32, df) error { return nil }
	for n := range len(data) {
		if err := decodeRemoval(data[:n], nop, nopTerm); !errors.Is(err, errRemoval) {
			t.Errorf("truncated to %d of %d bytes: %v, want errRemoval", n, len(data), err)
		}
	}
	if err := decodeRemoval(append(data[:len(data):len(data)], 0), nop, nopTerm); !errors.Is(err, errRemoval) {
		t.Errorf("a trailing byte: %v, want errRemoval", err)
	}
	// Block ids that do not ascend, and a repeated term id.
	for _, bad := range [][]byte{
		{2, 10, 0, 0},                     // block 10, then 10 again
		{1, 2, 2, 1, 0, 0, 0, 0, 0, 0, 0}, // block 1; terms 1 and 1
		{1, 3},                            // block -2
	} {
		if err := decodeRemoval(bad, nop, nopTerm); !errors.Is(err, errRemoval) {
			t.Errorf("% x: %v, want errRemoval", bad, err)
		}
	}
	empty := encodeRemoval(nil, nil)
	if err := decodeRemoval(empty, nop, nopTerm); err != nil {
		t.Errorf("an empty removal: %v", err)
	}
}
