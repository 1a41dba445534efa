// Package packtest reads blob-store packs the way tests that damage them
// need: where an entry's bytes lie in its pack file, from the pack format
// as blobstore/pack.go pins it (not through the blobstore package, so a
// test sees the file as it is on disk).
package packtest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// PackedEntry returns the pack file under the store root holding the
// newest entry of kind ('b' a blob, 'r' a record) and key (a blob id's 32
// bytes, a doc id's 16), and the offset and length of its data in that
// file. It fails t when no pack holds such an entry.
func PackedEntry(t testing.TB, root string, kind byte, key []byte) (path string, off, n int64) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(root, "packs", "*.pack"))
	sort.Strings(names) // sequence order
	const entrySize, trailerSize = 1 + 32 + 8 + 8 + 4, 32
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		tr := data[len(data)-trailerSize:]
		count := int(binary.LittleEndian.Uint32(tr[12:]))
		at := binary.LittleEndian.Uint64(tr[16:])
		for i := range count {
			e := data[int(at)+i*entrySize:]
			if e[0] == kind && bytes.Equal(e[1:1+len(key)], key) {
				path, off, n = name, int64(binary.LittleEndian.Uint64(e[33:])), int64(binary.LittleEndian.Uint64(e[41:]))
			}
		}
	}
	if path == "" {
		t.Fatalf("no packed entry %c %x under %s", kind, key, root)
	}
	return path, off, n
}
