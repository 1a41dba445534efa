// Package tests holds escurel's end-to-end tests: real DuckDB files, the
// real file:// blob store, real data from ../shared/data where present.
package tests

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "gocloud.dev/blob/fileblob"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	// The providers the CLI links: the end-to-end tests read PDFs and run
	// ONNX models as escurel does.
	_ "github.com/escurel/escurel/embed/onnx"
	_ "github.com/escurel/escurel/index/extract/pdf"
)

// env is an index in a temporary directory with a file:// blob store.
type env struct {
	t    *testing.T
	dir  string
	ix   *index.Index
	opts index.Options
}

// newEnv makes an env; its blob store is in the pack layout (a new
// store's default), or in the loose layout (index.Options.LooseBlobs)
// when ESCUREL_TEST_LOOSE is set, to run this package's tests on it.
func newEnv(t *testing.T, opts index.Options) *env {
	t.Helper()
	return newEnvLayout(t, opts, os.Getenv("ESCUREL_TEST_LOOSE") == "")
}

// newEnvLayout makes an env whose blob store is in the pack layout when
// packs is true, else in the loose layout.
func newEnvLayout(t *testing.T, opts index.Options, packs bool) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), opts: opts}
	e.opts.LooseBlobs = !packs
	e.open()
	if e.ix.Blobs().Packed() != packs {
		t.Fatalf("the blob store's layout: packed %v, want %v", e.ix.Blobs().Packed(), packs)
	}
	t.Cleanup(func() { e.ix.Close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	ix, err := index.Open(context.Background(), e.dir, &e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.ix = ix
}

func (e *env) reopen() {
	e.t.Helper()
	if err := e.ix.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// ingest ingests data as the document at source and fails on error.
func (e *env) ingest(source, data string) index.Result {
	e.t.Helper()
	res, err := e.ix.Ingest(context.Background(), index.Input{Source: source, Data: []byte(data)})
	if err != nil {
		e.t.Fatalf("ingest %s: %v", source, err)
	}
	return res
}

func (e *env) search(q string, k int) []index.Hit {
	e.t.Helper()
	hits, err := e.ix.Search(context.Background(), q, &index.SearchOptions{K: k})
	if err != nil {
		e.t.Fatalf("search %q: %v", q, err)
	}
	return hits
}

// checkVerbatim asserts that every block of every document in the blob store
// is its document's text from byte_start to byte_end (the blob itself for
// Markdown and plain text, the kept extracted text for HTML, DOCX, PDF and
// UTF-16 text),
// and returns the number of blocks. Failed documents have no text and no
// blocks.
func (e *env) checkVerbatim() int {
	e.t.Helper()
	ctx := context.Background()
	recs, err := e.ix.Blobs().Records(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, rec := range recs {
		blocks, err := e.ix.DocumentBlocks(ctx, rec.DocID, index.Restricted)
		if err != nil {
			e.t.Fatal(err)
		}
		text, err := e.ix.DocumentText(ctx, rec.DocID, index.Restricted)
		if errors.Is(err, index.ErrNotFound) && len(blocks) == 0 {
			continue // a failed document
		}
		if err != nil {
			e.t.Fatalf("%s: %v", rec.Source, err)
		}
		if rec.MediaType == "text/markdown" || rec.MediaType == "text/plain" {
			data, err := e.ix.Blobs().Get(ctx, rec.BlobID)
			utf16 := len(data) >= 2 && (data[0] == 0xFF && data[1] == 0xFE || data[0] == 0xFE && data[1] == 0xFF)
			if err != nil || string(data) != text && !utf16 { // UTF-16 is transcoded, its text kept
				e.t.Fatalf("%s: the text of a Markdown or text document is not its blob (%v)", rec.Source, err)
			}
		}
		for _, b := range blocks {
			if got := text[b.ByteStart:b.ByteEnd]; got != b.Body {
				e.t.Fatalf("%s block %s: text[%d:%d] = %q, body %q", rec.Source, b.BlockID, b.ByteStart, b.ByteEnd, got, b.Body)
			}
		}
		n += len(blocks)
	}
	return n
}

// mustRecord returns the blob store's record of docID.
func mustRecord(t *testing.T, e *env, docID string) *blobstore.Record {
	t.Helper()
	rec, err := e.ix.Blobs().GetRecord(context.Background(), docID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// sharedData returns ../shared/data/<rel>, or skips the test when the shared
// data folder is absent (a clone outside this workplace).
func sharedData(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "shared", "data", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test data %s is absent (%v): this test needs ../shared/data beside the repository", p, err)
	}
	return p
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func openStore(dir string) (*blobstore.Store, error) {
	return blobstore.Open(context.Background(), fileURL(dir))
}

// digest returns the open index's verification digest, failing the test
// when its coverage checks fail.
func (e *env) digest() string {
	e.t.Helper()
	v, err := e.ix.Verify(context.Background(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if !v.OK() {
		e.t.Fatalf("verify: %+v", v)
	}
	return v.Digest
}

// corruptBlob damages blob id of the file:// store in storeDir, in either
// layout: a loose blob's file is overwritten, a packed blob's bytes are
// changed inside its pack.
func corruptBlob(t *testing.T, store *blobstore.Store, storeDir, id string) {
	t.Helper()
	key, err := blobstore.BlobKey(id)
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(storeDir, filepath.FromSlash(key))
	if _, err := os.Stat(loose); err == nil {
		if err := os.WriteFile(loose, []byte("bit rot"), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(storeDir, "packs", "*.pack"))
	for _, p := range packs {
		b, _ := os.ReadFile(p)
		if i := bytes.Index(b, data); i >= 0 {
			b[i] ^= 0xff
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("blob %s is in no file of %s", id, storeDir)
}

// blobCount is how many blobs the store lists, in either layout.
func blobCount(t *testing.T, store *blobstore.Store) int {
	t.Helper()
	ids, err := store.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}
