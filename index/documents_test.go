package index

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func listAll(t *testing.T, ix *Index, o *ListOptions) []DocumentInfo {
	t.Helper()
	var out []DocumentInfo
	for d, err := range ix.ListDocuments(context.Background(), o) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestListDocuments(t *testing.T) {
	ctx := context.Background()
	ix := openFixed(t)
	pub := "# Guide\n\nfirst part\n\n## More\n\nsecond part\n"
	_, errs, err := ix.IngestBatch(ctx, []Input{
		{Source: "/docs/guide.md", Data: []byte(pub)},
		{Source: "/docs/notes.txt", Data: []byte("plain notes\n"), Sensitivity: Internal, Language: "de"},
		{Source: "/secret/plan.md", Data: []byte("# Takeover plan\n\nbuy them\n"), Sensitivity: Restricted},
		{Source: "/secret/broken.md", Data: []byte("bad\x00bytes"), Sensitivity: Restricted},
		{Source: "/docs/empty.md", Data: []byte("")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || errs[3] == nil || errs[4] == nil {
		t.Fatalf("ingest: %v", errs)
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

	got := listAll(t, ix, nil) // public
	if len(got) != 2 || got[0].Source != "/docs/empty.md" || got[1].Source != "/docs/guide.md" {
		t.Fatalf("public: %+v", got)
	}
	g := got[1]
	want := DocumentInfo{DocID: g.DocID, Source: "/docs/guide.md", Title: "Guide", MediaType: "text/markdown", Sensitivity: Public,
		Status: StatusOK, Blocks: 2, Bytes: int64(len(pub)), IngestedAt: at, Extractor: "markdown/1", Language: "en"}
	if g.Extractor != "" && strings.HasPrefix(g.Extractor, "markdown/") {
		want.Extractor = g.Extractor
	}
	if g != want {
		t.Errorf("guide:\n%+v\nwant\n%+v", g, want)
	}
	if e := got[0]; e.Status != StatusFailed || e.Reason == "" || e.Blocks != 0 {
		t.Errorf("empty: %+v", e)
	}
	for _, d := range got {
		if strings.HasPrefix(d.Source, "/secret/") {
			t.Errorf("public lists %s", d.Source)
		}
	}
	if n, err := ix.DocumentsWithheld(ctx, nil); err != nil || n != 3 {
		t.Errorf("withheld at public: %d, %v; want 3", n, err)
	}
	// A source prefix does not narrow the count: it would tell which
	// sources exist above the clearance.
	if n, err := ix.DocumentsWithheld(ctx, &ListOptions{SourcePrefix: "/nothing/"}); err != nil || n != 3 {
		t.Errorf("withheld with a prefix: %d, %v; want 3", n, err)
	}
	if n, err := ix.DocumentsWithheld(ctx, &ListOptions{Status: StatusFailed}); err != nil || n != 1 {
		t.Errorf("failed withheld: %d, %v; want 1", n, err)
	}

	got = listAll(t, ix, &ListOptions{Clearance: Internal})
	if len(got) != 3 || got[2].Source != "/docs/notes.txt" || got[2].Language != "de" || got[2].Sensitivity != Internal {
		t.Errorf("internal: %+v", got)
	}

	got = listAll(t, ix, &ListOptions{Clearance: Restricted, SourcePrefix: "/secret/"})
	if len(got) != 2 || got[0].Source != "/secret/broken.md" || got[1].Title != "Takeover plan" {
		t.Fatalf("restricted, /secret/: %+v", got)
	}
	if got[0].Status != StatusFailed || !strings.Contains(got[0].Reason, "NUL") && got[0].Reason == "" {
		t.Errorf("failed restricted document: %+v", got[0])
	}
	got = listAll(t, ix, &ListOptions{Clearance: Restricted, Status: StatusFailed})
	if len(got) != 2 {
		t.Errorf("failed: %+v", got)
	}
	got = listAll(t, ix, &ListOptions{Clearance: Restricted, Status: StatusOK})
	if len(got) != 3 {
		t.Errorf("ok: %+v", got)
	}

	// Pages of one: the same list, in order.
	all := listAll(t, ix, &ListOptions{Clearance: Restricted})
	paged := listAll(t, ix, &ListOptions{Clearance: Restricted, PageSize: 1})
	if len(all) != 5 || len(paged) != 5 {
		t.Fatalf("all %d, paged %d", len(all), len(paged))
	}
	for i := range all {
		if all[i] != paged[i] {
			t.Errorf("page %d: %+v, want %+v", i, paged[i], all[i])
		}
	}
	// One record by id, within the clearance only.
	if d, err := ix.Document(ctx, all[2].DocID, Restricted); err != nil || d != all[2] {
		t.Errorf("Document(%s): %+v, %v; want %+v", all[2].DocID, d, err, all[2])
	}
	for _, id := range []string{all[2].DocID, strings.Repeat("0", 32)} {
		if all[2].Sensitivity == Public {
			t.Fatal("the fixture's third document must not be public")
		}
		if _, err := ix.Document(ctx, id, Public); !errors.Is(err, ErrNotFound) {
			t.Errorf("Document(%s) at public: %v, want ErrNotFound", id, err)
		}
	}
	// A cursor: the documents after a source, as the pages above.
	after := listAll(t, ix, &ListOptions{Clearance: Restricted, After: all[1].Source, PageSize: 2})
	if len(after) != 3 || after[0] != all[2] || after[2] != all[4] {
		t.Errorf("after %s: %+v", all[1].Source, after)
	}
	// Breaking out of the loop ends the iteration.
	n := 0
	for range ix.ListDocuments(ctx, &ListOptions{Clearance: Restricted, PageSize: 2}) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("break: %d", n)
	}

	// Bad options: one error.
	for _, o := range []*ListOptions{{Clearance: "secret"}, {Status: "gone"}, {PageSize: -1}} {
		var errs []error
		for _, err := range ix.ListDocuments(ctx, o) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || errs[0] == nil {
			t.Errorf("%+v: %v", o, errs)
		}
	}
}

// A document whose sensitivity escurel does not know is above every
// clearance: never listed, always counted as withheld.
func TestListDocumentsUnknownSensitivity(t *testing.T) {
	ctx := context.Background()
	ix := openFixed(t)
	if _, err := ix.Ingest(ctx, Input{Source: "/odd.md", Data: []byte("# Odd\n\nodd\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.cur.Load().db.ExecContext(ctx, `UPDATE documents SET sensitivity = 'Secret'`); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, ix, &ListOptions{Clearance: Restricted}); len(got) != 0 {
		t.Errorf("listed: %+v", got)
	}
	if n, err := ix.DocumentsWithheld(ctx, &ListOptions{Clearance: Restricted}); err != nil || n != 1 {
		t.Errorf("withheld: %d, %v", n, err)
	}
}
