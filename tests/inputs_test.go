package tests

// Inputs that once broke an ingest or blew up its cost (issue 15), each
// with a small generated input.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// A file whose name is not valid UTF-8 fails alone, named (escaped), with
// nothing of it stored; the 200 good files beside it are ingested, and the
// index derives exactly from the blob store afterwards.
func TestNonUTF8FileName(t *testing.T) {
	files := map[string]string{"a-bad-\xff\xfe.md": "A file with a bad name about quokkas.\n"}
	for i := range 200 {
		files[fmt.Sprintf("doc%03d.md", i)] = fmt.Sprintf("Document %d about quokkas.\n", i)
	}
	dir := writeFiles(t, files)
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	sum, err := e.ix.IngestFiles(ctx, []string{dir}, index.IngestOptions{})
	if err != nil {
		t.Fatalf("the bad name stopped the ingest: %v", err)
	}
	if sum.Added != 200 || len(sum.Failed) != 1 {
		t.Fatalf("added %d, failed %d, want 200 and 1", sum.Added, len(sum.Failed))
	}
	msg := sum.Failed[0].Err.Error()
	if !utf8.ValidString(msg) || !strings.Contains(msg, `a-bad-\xff\xfe.md`) || !strings.Contains(msg, "UTF-8") {
		t.Errorf("error %q: want the escaped name and the reason", msg)
	}
	recs, err := e.ix.Blobs().Records(ctx)
	if err != nil || len(recs) != 200 {
		t.Fatalf("%d records (%v), want 200", len(recs), err)
	}
	v, err := e.ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify: %+v, %v", v, err)
	}
	// Through the API too: a source or title that is not UTF-8 is the
	// document's error, and nothing is stored.
	for _, in := range []index.Input{
		{Source: "/x/bad-\xff.md", Data: []byte("quokka")},
		{Source: "/x/good.md", Title: "bad \xff title", Data: []byte("quokka")},
	} {
		_, err := e.ix.Ingest(ctx, in)
		var de *index.DocumentError
		if !errors.As(err, &de) || !utf8.ValidString(err.Error()) {
			t.Errorf("%q: err %v, want a DocumentError in valid UTF-8", in.Source, err)
		}
	}
	if recs, _ := e.ix.Blobs().Records(ctx); len(recs) != 200 {
		t.Errorf("%d records, want 200", len(recs))
	}
}

// Any record can be deleted, even one the index has no rows of (left by
// an older escurel whose batch failed after its records were stored).
func TestDeleteRecordWithoutRows(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	e.ingest("/docs/a.md", "Alpha quokka.\n")
	rec := *mustRecord(t, e, blobstore.DocID("/docs/a.md"))
	// (Its source is valid UTF-8: a record whose source would not read
	// back from JSON is refused by PutRecord, and ingest refuses such a
	// file name first.)
	rec.Source = "/docs/orphan-ü.md"
	rec.DocID = blobstore.DocID(rec.Source)
	if err := e.ix.Blobs().PutRecord(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if v, err := e.ix.Verify(ctx, nil); err != nil || v.OK() {
		t.Fatalf("verify before: %+v, %v; want drift", v, err)
	}
	if _, err := e.ix.Delete(ctx, rec.DocID); err != nil {
		t.Fatalf("delete a record without rows: %v", err)
	}
	if v, err := e.ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify after: %+v, %v", v, err)
	}
}

// UTF-16 text with a byte order mark is transcoded, searchable, and its
// blocks are verbatim spans of the kept text; a rebuild derives the same
// rows.
func TestUTF16Document(t *testing.T) {
	e := newEnv(t, index.Options{})
	ctx := context.Background()
	le := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune("# Notes\n\nThe quokka eats lentils.\n")) {
		le = append(le, byte(u), byte(u>>8))
	}
	res, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/utf16.md", Data: le})
	if err != nil || res.Status != index.Added {
		t.Fatalf("ingest: %+v, %v", res, err)
	}
	if hits := e.search("quokka lentils", 5); len(hits) != 1 || hits[0].Body != "The quokka eats lentils." {
		t.Fatalf("hits %+v", hits)
	}
	if e.checkVerbatim() != 1 {
		t.Error("want 1 block")
	}
	if text, err := e.ix.DocumentText(ctx, res.DocID, index.Restricted); err != nil || !strings.HasPrefix(text, "# Notes") {
		t.Errorf("document text %q, %v", text, err)
	}
	// The same bytes again: unchanged.
	if res, err := e.ix.Ingest(ctx, index.Input{Source: "/docs/utf16.md", Data: le}); err != nil || res.Status != index.Unchanged {
		t.Errorf("again: %+v, %v", res, err)
	}
}
