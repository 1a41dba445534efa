package index

import (
	"context"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
)

// TestDigestIsStable pins the digest's definition: the same documents
// ingested at the same times give this digest in any directory, on any
// run. A change to how the digest is computed (an order, a field, a
// memory layout of the verify) that changes it fails here first: a
// replica of another build compares its own digest with the publisher's,
// and a rebuild's with the index it replaces. Change the constant only
// with a digest that is meant to change, and say so.
func TestDigestIsStable(t *testing.T) {
	const want = "09208d5218ee7496ad8a74942530ab5f3f15a3bf9814b06c6efd5dff14530435"
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var got []string
	for range 2 {
		ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://", Embedder: embed.None})
		if err != nil {
			t.Fatal(err)
		}
		ins := []Input{
			{Source: "/a.md", Data: []byte("# Alpha\n\nThe platypus keeps a ledger.\n\n## Beta\n\nPears and apples, apples and pears.\n"), IngestedAt: at},
			{Source: "/b.txt", MediaType: "text/plain", Title: "Gamma", Data: []byte("Deltas of rivers; the delta of a river.\n"), IngestedAt: at},
			{Source: "/c.html", MediaType: "text/html", Data: []byte("<html><head><title>Epsilon</title></head><body><h1>Zeta</h1><p>Eta theta iota.</p></body></html>"), IngestedAt: at, Sensitivity: "internal"},
		}
		mustIngest(t, ix, ins...)
		v, err := ix.Verify(ctx, nil)
		if err != nil || !v.OK() {
			t.Fatalf("verify: %v, %+v", err, v)
		}
		got = append(got, v.Digest)
		ix.Close()
	}
	if got[0] != got[1] {
		t.Fatalf("two indexes of the same documents: digests %s and %s", got[0], got[1])
	}
	if got[0] != want {
		t.Fatalf("digest %s, pinned %s: the digest's definition changed", got[0], want)
	}
}
