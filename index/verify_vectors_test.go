package index

import (
	"context"
	"slices"
	"testing"
)

// A vector BLOB of the wrong length (damaged, or written for another
// dimension) fails Verify: the block is listed among the blocks without a
// vector and the vector is not counted.
func TestVerifyWrongLengthVector(t *testing.T) {
	ix := openFixed(t)
	ctx := context.Background()
	for _, src := range []string{"/a.md", "/b.md"} {
		if _, err := ix.Ingest(ctx, Input{Source: src, Data: []byte("# " + src + "\n\nSome words about " + src + ".\n")}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !before.OK() || before.Vectors == 0 {
		t.Fatalf("before the damage: OK %v, %d vectors: %+v", before.OK(), before.Vectors, before)
	}
	s := ix.cur.Load()
	var id int64
	var public string
	if err := s.db.QueryRowContext(ctx, `SELECT block_id, public_id FROM blocks ORDER BY doc_id, ord LIMIT 1`).Scan(&id, &public); err != nil {
		t.Fatal(err)
	}
	// One float short: 4 bytes fewer than the set's dimension.
	var vec []byte
	if err := s.db.QueryRowContext(ctx, `SELECT vector FROM `+s.vec.table+` WHERE block_id = ?`, id).Scan(&vec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE `+s.vec.table+` SET vector = ? WHERE block_id = ?`, vec[:len(vec)-4], id); err != nil {
		t.Fatal(err)
	}
	after, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.OK() {
		t.Errorf("a vector of the wrong length passes Verify: %+v", after)
	}
	if !slices.Contains(after.BlocksWithoutVectors, public) || after.Vectors != before.Vectors-1 {
		t.Errorf("blocks without vectors %q (want %s), %d vectors (want %d)", after.BlocksWithoutVectors, public, after.Vectors, before.Vectors-1)
	}
	if after.Digest == before.Digest {
		t.Errorf("the digest did not change")
	}
}
