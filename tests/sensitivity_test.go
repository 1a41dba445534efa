package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// Blocks of documents above the caller's clearance never come back, and the
// filter runs before ranking, so k allowed hits still do.
func TestClearance(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	e.ingest("/pub.md", "Echidna facts for everyone.\n")
	e.ingest("/int.md", "---\nsensitivity: internal\n---\nEchidna echidna internal memo.\n")
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/res.md", Sensitivity: index.Restricted,
		Data: []byte("Echidna echidna echidna restricted dossier.\n")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		clearance string
		want      []string
	}{
		{"", []string{"/pub.md"}},
		{index.Public, []string{"/pub.md"}},
		{index.Internal, []string{"/int.md", "/pub.md"}},
		{index.Restricted, []string{"/res.md", "/int.md", "/pub.md"}},
	} {
		hits, err := e.ix.Search(ctx, "echidna", &index.SearchOptions{K: 10, Clearance: tc.clearance})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.Source)
			if tc.clearance != index.Restricted && strings.Contains(h.Body, "dossier") {
				t.Errorf("restricted body leaked at clearance %q", tc.clearance)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("clearance %q: %v, want %v", tc.clearance, got, tc.want)
		}
		// k = 1: the best allowed hit, not an empty page after filtering.
		one, _ := e.ix.Search(ctx, "echidna", &index.SearchOptions{K: 1, Clearance: tc.clearance})
		if len(one) != 1 || one[0].Source != tc.want[0] {
			t.Errorf("clearance %q, k 1: %+v", tc.clearance, one)
		}
	}
	if _, err := e.ix.Search(ctx, "echidna", &index.SearchOptions{Clearance: "secret"}); err == nil {
		t.Error("unknown clearance accepted")
	}
	res := blobstore.DocID("/res.md")
	if bs, _ := e.ix.DocumentBlocks(ctx, res, ""); len(bs) != 0 {
		t.Errorf("DocumentBlocks of a restricted document at public clearance: %d blocks", len(bs))
	}
	if bs, _ := e.ix.DocumentBlocks(ctx, res, index.Restricted); len(bs) != 1 {
		t.Errorf("DocumentBlocks with clearance: %d blocks", len(bs))
	}
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/x.md", Sensitivity: "secret", Data: []byte("x\n")}); err == nil || !strings.Contains(err.Error(), "/x.md") {
		t.Errorf("unknown sensitivity: %v", err)
	}
}

// Re-ingesting a restricted document without saying its sensitivity keeps
// it restricted; saying it changes it.
func TestSensitivityIsSticky(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	in := index.Input{Source: "/r.md", Sensitivity: index.Restricted, Language: "de", Data: []byte("Quoll v1.\n")}
	if _, err := e.ix.Ingest(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Sensitivity, in.Language, in.Data = "", "", []byte("Quoll v2.\n")
	if r, err := e.ix.Ingest(ctx, in); err != nil || r.Status != index.Replaced {
		t.Fatalf("%+v %v", r, err)
	}
	if hits := e.search("quoll", 10); len(hits) != 0 {
		t.Fatalf("re-ingest without a sensitivity made the document public")
	}
	rec, _ := e.ix.Blobs().GetRecord(ctx, blobstore.DocID("/r.md"))
	if rec.Sensitivity != index.Restricted || rec.Language != "de" {
		t.Errorf("record %+v", rec)
	}
	// Same bytes, nothing said: unchanged.
	if r, _ := e.ix.Ingest(ctx, in); r.Status != index.Unchanged {
		t.Errorf("status %s, want unchanged", r.Status)
	}
	in.Sensitivity = index.Public
	if r, _ := e.ix.Ingest(ctx, in); r.Status != index.Replaced || len(e.search("quoll", 10)) != 1 {
		t.Errorf("an explicit public did not apply: %+v", r)
	}
}
