package blobstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// When Repack cannot write the multi-pack index anew, it removes the old
// one (which names the blobs just erased: their SHA-256 confirms a guessed
// document), and fails when that cannot be done either (reviewer 5,
// finding 2). The failed writes are real: a directory stands where the
// index is written (empty: it can be removed; not empty: it cannot).
func TestRepackMidxWriteFailure(t *testing.T) {
	for _, removable := range []bool{true, false} {
		t.Run(fmt.Sprintf("removable=%v", removable), func(t *testing.T) {
			ctx := context.Background()
			s, _ := packedFileStore(t)
			b := s.NewBatch()
			var ids []string
			for j := range 2 {
				id, err := b.Put(ctx, []byte(fmt.Sprintf("secret %d", j)))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.writeMidx(ctx, 1); err != nil {
				t.Fatal(err)
			}
			old, err := os.ReadFile(s.localPath(midxKey))
			if err != nil {
				t.Fatal(err)
			}
			k, _ := blobKeyBytes(ids[0])
			if !strings.Contains(string(old), string(k[:])) {
				t.Fatal("the index does not name the blob: the test proves nothing")
			}
			// The index is loaded; now its rewrite fails.
			mi := s.localPath(midxKey)
			if err := os.Remove(mi); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(mi, 0o700); err != nil {
				t.Fatal(err)
			}
			if !removable {
				if err := os.WriteFile(mi+"/x", nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err = s.Repack(ctx, RepackOptions{DropBlobs: ids[:1], MinDead: 0})
			if removable {
				if err != nil {
					t.Fatalf("Repack: %v", err)
				}
				if _, err := os.Stat(mi); !os.IsNotExist(err) {
					t.Errorf("the multi-pack index that was not rewritten stays: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), midxKey) {
				t.Errorf("Repack = %v, want an error naming %s", err, midxKey)
			}
		})
	}
}
