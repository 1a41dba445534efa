package index

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/google/go-cmp/cmp"
)

// TestVerifyMatchesRowsToRecords: verify matches the documents rows to
// the records in doc id order. Records without rows are reported wherever
// their doc ids fall (before every row, between two, after every row);
// rows whose record is gone, differs, or is more restricted than the row
// are reported; the rest are not, a row more restricted than its record
// among them (a row at its front matter's internal, its record rewritten
// public). The same with the caller's records (opts.Records, a
// rebuild's) given out of order.
func TestVerifyMatchesRowsToRecords(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")), Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	var ids []string
	for i := range 7 {
		in := pearsDoc(fmt.Sprintf("/d%d.md", i))
		ins = append(ins, in)
		ids = append(ids, blobstore.DocID(in.Source))
	}
	// A row more restricted than its record: not drift (derivation may
	// raise a level, never lower one). The ingest records the front
	// matter's level, so the record is rewritten below it.
	raised := Input{Source: "/raised.md", Data: []byte("---\nsensitivity: internal\n---\n# R\n\napples and pears\n")}
	mustIngest(t, ix, append(ins, raised)...) // raised is not among ins and ids, which the cases below pick from
	// The record says public; the row, from the front matter, internal.
	rec, err := ix.Blobs().GetRecord(ctx, blobstore.DocID(raised.Source))
	if err != nil {
		t.Fatal(err)
	}
	rec.Sensitivity = Public
	if err := ix.Blobs().PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	live, err := ix.live()
	if err != nil {
		t.Fatal(err)
	}
	var level string
	if err := live.db.QueryRow(`SELECT sensitivity FROM documents WHERE source = ?`, raised.Source).Scan(&level); err != nil || level != Internal {
		t.Fatalf("%s: row at %q, %v; want %s", raised.Source, level, err, Internal)
	}
	slices.Sort(ids)
	bySource := map[string]string{}
	for _, in := range ins {
		bySource[blobstore.DocID(in.Source)] = in.Source
	}

	// Records without rows: one before the first row's doc id, one
	// between two rows, one after the last.
	var orphans []string
	var before, between, after bool
	for i := 0; !(before && between && after); i++ {
		if i > 10000 {
			t.Fatal("no sources found for every place among the doc ids")
		}
		src := fmt.Sprintf("/orphan%d.md", i)
		id := blobstore.DocID(src)
		var place *bool
		switch {
		case id < ids[0]:
			place = &before
		case id > ids[len(ids)-1]:
			place = &after
		default:
			place = &between
		}
		if *place {
			continue
		}
		*place = true
		rec, err := ix.Blobs().GetRecord(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		rec.DocID, rec.Source = id, src
		if err := ix.Blobs().PutRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, src)
	}

	// Rows whose record is gone, differs (a given title), or is more
	// restricted than the row: the first, a middle and the last doc id.
	gone, retitled, restricted := bySource[ids[0]], bySource[ids[3]], bySource[ids[len(ids)-1]]
	if err := ix.Blobs().DeleteRecord(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if rec, err = ix.Blobs().GetRecord(ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	rec.Title, rec.TitleGiven = "Another title", true
	if err := ix.Blobs().PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if rec, err = ix.Blobs().GetRecord(ctx, ids[len(ids)-1]); err != nil {
		t.Fatal(err)
	}
	if rec.Sensitivity != Public {
		t.Fatalf("%s: sensitivity %q, want %q", rec.Source, rec.Sensitivity, Public)
	}
	rec.Sensitivity = Restricted
	if err := ix.Blobs().PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}

	slices.Sort(orphans)
	want := []string{gone, retitled, restricted}
	slices.Sort(want)
	check := func(what string, opts *VerifyOptions) {
		t.Helper()
		v, err := ix.Verify(ctx, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if diff := cmp.Diff(orphans, v.RecordsWithoutRows); diff != "" {
			t.Errorf("%s: records without rows (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(want, v.RowsWithoutRecords); diff != "" {
			t.Errorf("%s: rows without records (-want +got):\n%s", what, diff)
		}
		if v.Documents != int64(len(ins)+1) {
			t.Errorf("%s: %d documents, want %d", what, v.Documents, len(ins)+1)
		}
	}
	check("verify", &VerifyOptions{SkipOrphans: true})
	recs, err := ix.Blobs().Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(recs)
	check("verify with the caller's records, reversed", &VerifyOptions{Records: recs, SkipOrphans: true})
	if !slices.IsSortedFunc(recs, func(a, b *blobstore.Record) int { return strings.Compare(b.DocID, a.DocID) }) {
		t.Error("verify reordered the caller's records")
	}
}

// recordWalk passes records without a row wherever they fall, matches
// the rest, and refuses a row repeated or out of doc id order.
func TestRecordWalk(t *testing.T) {
	recs := []*blobstore.Record{{DocID: "b", Source: "/b"}, {DocID: "c", Source: "/c"}, {DocID: "e", Source: "/e"}, {DocID: "g", Source: "/g"}}
	w := recordWalk{recs: recs}
	for _, row := range []struct{ id, want string }{{"a", ""}, {"c", "/c"}, {"d", ""}, {"e", "/e"}} {
		r, err := w.match(row.id)
		if err != nil || (r == nil) != (row.want == "") || (r != nil && r.Source != row.want) {
			t.Fatalf("match(%q) = %v, %v; want %q", row.id, r, err, row.want)
		}
	}
	if diff := cmp.Diff([]string{"/b", "/g"}, w.rest()); diff != "" {
		t.Errorf("records without rows (-want +got):\n%s", diff)
	}
	for _, ids := range [][]string{{"c", "c"}, {"c", "b"}} {
		w := recordWalk{recs: recs}
		if _, err := w.match(ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := w.match(ids[1]); err == nil || !strings.Contains(err.Error(), "repeated or out of doc id order") {
			t.Errorf("rows %q then %q: %v", ids[0], ids[1], err)
		}
	}
}
