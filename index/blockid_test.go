package index

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The formula is part of the format: a stored citation names its block by
// it. These values come from `printf '…' | sha256sum`, not from blockID.
func TestBlockIDFormula(t *testing.T) {
	cases := []struct {
		doc, blob  string
		start, end int64
		body, want string
	}{
		{"0123456789abcdef0123456789abcdef", "sha256:" + strings.Repeat("0", 64), 0, 8, "old body", "4dc200b25077a976"},
		{"fedcba9876543210fedcba9876543210", "sha256:ab", 12, 3456, "héllo wörld", "82dff67c1078897c"},
		// Longer than a pooled input buffer may be.
		{"0123456789abcdef0123456789abcdef", "sha256:ab", 0, 70000, strings.Repeat("x", 70000), "a7a494e8a1d9cf81"},
	}
	// Twice over, long after short and short after long: blockID's input
	// buffers are pooled.
	for _, tc := range append(cases, cases...) {
		if got := blockID(tc.doc, tc.blob, tc.start, tc.end, tc.body); got != tc.want {
			t.Errorf("blockID(%q, %q, %d, %d, %q) = %s, want %s", tc.doc, tc.blob, tc.start, tc.end, tc.body, got, tc.want)
		}
		if err := CheckBlockID(tc.want); err != nil {
			t.Error(err)
		}
	}
	for _, bad := range []string{"", "4dc200b25077a97", "4dc200b25077a9766", "4DC200B25077A976", "4dc200b25077a97g", "294"} {
		if err := CheckBlockID(bad); !errors.Is(err, ErrBadBlockID) || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("CheckBlockID(%q) = %v", bad, err)
		}
	}
}

// Two blocks with one id are never stored: within a document the document
// fails alone; across documents the batch fails, naming both, and the
// index still serves what it served.
func TestBlockIDCollision(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	defer func() { blockIDOf = blockID }()

	// Every block of a document the same id: a repeat within it.
	blockIDOf = func(string, string, int64, int64, string) string { return "00000000000000aa" }
	_, err = ix.Ingest(ctx, Input{Source: "/two.md", Data: []byte("# One\n\nfirst part\n\n# Two\n\nsecond part\n")})
	var ce *CollisionError
	var de *DocumentError
	if !errors.As(err, &de) || !errors.As(err, &ce) || ce.ID != "00000000000000aa" || ce.Source != "/two.md" ||
		!strings.Contains(err.Error(), "block id collision: two blocks of /two.md have id 00000000000000aa") {
		t.Fatalf("repeat within a document: %v", err)
	}

	// An id by body alone: the same body in two documents collides.
	blockIDOf = func(_, _ string, _, _ int64, body string) string { return blockID("", "", 0, 0, body) }
	if _, err := ix.Ingest(ctx, Input{Source: "/a.txt", Data: []byte("the same words")}); err != nil {
		t.Fatal(err)
	}
	_, err = ix.Ingest(ctx, Input{Source: "/b.txt", Data: []byte("the same words")})
	if !errors.As(err, &ce) || ce.Source != "/b.txt" || ce.Other != "/a.txt" ||
		!strings.Contains(err.Error(), "a block of /b.txt has id "+ce.ID+", as a block of /a.txt does; /b.txt not ingested") {
		t.Fatalf("collision with another document: %v", err)
	}
	// Within one batch, too.
	_, _, err = ix.IngestBatch(ctx, []Input{{Source: "/c.txt", Data: []byte("other words")}, {Source: "/d.txt", Data: []byte("other words")}})
	if !errors.As(err, &ce) || ce.Source != "/d.txt" || ce.Other != "/c.txt" {
		t.Fatalf("collision within a batch: %v", err)
	}
	// Re-ingesting the same document with the same ids is no collision.
	if _, err := ix.Ingest(ctx, Input{Source: "/a.txt", Data: []byte("the same words"), Sensitivity: Internal}); err != nil {
		t.Fatalf("re-ingest with the same ids: %v", err)
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() || v.Documents != 1 {
		t.Errorf("after the collisions: %+v", v)
	}
}
