package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/testdocs"
)

// ingestDeclared ingests a document that declares its sensitivity in its
// front matter only (no Input.Sensitivity). A refused declaration is a
// failed document, which Ingest reports as an ErrFrontMatter error.
func ingestDeclared(t *testing.T, ix *index.Index, source, data string) error {
	t.Helper()
	_, err := ix.Ingest(context.Background(), index.Input{Source: source, Data: []byte(data)})
	if err != nil && !errors.Is(err, extract.ErrFrontMatter) {
		t.Fatalf("ingest %s: %v", source, err)
	}
	return err
}

// The leak of issue 15: a document that declares a sensitivity in a form
// escurel reads is indexed at it; one that declares it in a near miss
// fails, at restricted, with a reason naming the line. Either way no
// caller below the declared level sees its text, in any mode, through
// Expand, DocumentText, DocumentBlocks or the failure list.
func TestDeclaredSensitivityNeverLeaks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, index.Options{})
	for i := range 4 {
		e.ingest(fmt.Sprintf("/pub/%d.md", i), fmt.Sprintf("# Public %d\n\nLentil notes for everyone, number %d.\n", i, i))
	}
	type doc struct {
		source, secret, level string
		read                  bool
	}
	var docs []doc
	for i, c := range testdocs.FrontMatterCases {
		for _, level := range []string{index.Internal, index.Restricted} {
			d := doc{fmt.Sprintf("/fm/%02d-%s.md", i, level), fmt.Sprintf("zqsecret%02d%s", i, level[:3]), level, c.Read}
			body := fmt.Sprintf("# Memo %s\n\nLentil %s terms, private.\n", d.secret, d.secret)
			err := ingestDeclared(t, e.ix, d.source, c.Make(level, body))
			if (err == nil) != c.Read {
				t.Errorf("%s at %s: ingest error %v, want read=%v", c.Name, level, err, c.Read)
			}
			rec, gerr := e.ix.Blobs().GetRecord(ctx, blobstore.DocID(d.source))
			if gerr != nil {
				t.Fatal(gerr)
			}
			if want := map[bool]string{true: level, false: index.Restricted}[c.Read]; rec.Sensitivity != want {
				t.Errorf("%s at %s: recorded %s, want %s", c.Name, level, rec.Sensitivity, want)
			}
			if !c.Read && !strings.Contains(err.Error(), "line ") {
				t.Errorf("%s: the reason names no line: %v", c.Name, err)
			}
			docs = append(docs, d)
		}
	}
	visible := func(d doc, clearance string) bool {
		return d.read && (clearance == index.Restricted || (clearance == index.Internal && d.level == index.Internal))
	}
	levels := []string{index.Public, index.Internal, index.Restricted}
	for _, d := range docs {
		for _, clearance := range levels {
			for _, mode := range []string{index.ModeBM25, index.ModeDense, index.ModeHybrid} {
				for _, q := range []string{"lentil " + d.secret, d.secret} {
					out, _ := secretResponse(t, e.ix, q, index.SearchOptions{Mode: mode, K: 50, Clearance: clearance, Explain: true})
					if got := strings.Contains(out, d.secret); got != visible(d, clearance) && (got || mode == index.ModeBM25) {
						t.Errorf("%s, %s at %s: shown %v, want %v", d.source, mode, clearance, got, visible(d, clearance))
					}
				}
			}
			id := blobstore.DocID(d.source)
			text, terr := e.ix.DocumentText(ctx, id, clearance)
			blocks, _ := e.ix.DocumentBlocks(ctx, id, clearance)
			if !visible(d, clearance) && (terr == nil || strings.Contains(text, d.secret) || len(blocks) != 0) {
				t.Errorf("%s at %s: text %q (%v), %d blocks", d.source, clearance, text, terr, len(blocks))
			}
			failed, err := e.ix.Failed(ctx, clearance)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(failed)
			if clearance != index.Restricted && strings.Contains(string(b), d.secret) {
				t.Errorf("%s: the failure list at %s shows its text", d.source, clearance)
			}
		}
		if !d.read {
			continue
		}
		// Expand answers a block above clearance like a missing one.
		hits := searchWith(t, e.ix, d.secret, index.SearchOptions{K: 1, Clearance: index.Restricted})
		if len(hits) != 1 {
			t.Fatalf("%s: not found with clearance", d.source)
		}
		for _, clearance := range levels {
			x, err := e.ix.Expand(ctx, hits[0].BlockID, &index.ExpandOptions{Clearance: clearance})
			if visible(d, clearance) != (err == nil) {
				t.Errorf("%s: expand at %s: %v", d.source, clearance, err)
			}
			if err != nil && (!errors.Is(err, index.ErrNotFound) || x != nil) {
				t.Errorf("%s: expand at %s: %+v %v", d.source, clearance, x, err)
			}
		}
	}
	// Failed documents name the line to a caller with clearance.
	failed, _ := e.ix.Failed(ctx, index.Restricted)
	for _, f := range failed {
		if !strings.HasPrefix(f.Reason, "invalid front matter: ") || !strings.Contains(f.Reason, "line ") {
			t.Errorf("%s: reason %q", f.Source, f.Reason)
		}
	}
}

// A document that failed on its front matter stays restricted when a
// later, fixed version says nothing of its sensitivity (it was declared,
// if unreadably), and takes the level a fixed version declares.
func TestRefusedDeclarationThenFixed(t *testing.T) {
	e := newEnv(t, index.Options{})
	ingestDeclared(t, e.ix, "/m.md", "---\nSensitivity: restricted\n\nQuokka memo.\n")
	if hits := e.search("quokka", 5); len(hits) != 0 {
		t.Fatalf("unclosed front matter leaked: %+v", hits)
	}
	if err := ingestDeclared(t, e.ix, "/m.md", "Quokka memo.\n"); err != nil {
		t.Fatal(err)
	}
	if hits := e.search("quokka", 5); len(hits) != 0 {
		t.Errorf("the fixed version without a sensitivity is public")
	}
	if err := ingestDeclared(t, e.ix, "/m.md", "---\nsensitivity: public\n---\nQuokka memo.\n"); err != nil {
		t.Fatal(err)
	}
	if hits := e.search("quokka", 5); len(hits) != 1 {
		t.Errorf("an explicit public did not apply")
	}
}
