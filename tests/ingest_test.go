package tests

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/extract"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A bad file in a batch does not stop the others, and nothing of it is
// stored.
func TestBadFileDoesNotStopBatch(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a-good.md":          "# Alpha\n\nThe alpha document talks about quokkas.\n",
		"b-empty.md":         "",
		"c-binary.md":        "PK\x03\x04\x00\x00binary",
		"d-latin1.txt":       "caf\xe9 quokka",
		"e-badfront.md":      "---\ntitle: [oops\n---\nquokka\n",
		"f-good.txt":         "Plain text about quokkas too.\n",
		"sub/g-nested.md":    "Nested quokka page.\n",
		"image.png":          "\x89PNG",
		".hidden/secret.md":  "hidden quokka",
		"sub/.draft.md":      "draft quokka",
		"sub/notes.markdown": "More quokka notes.\n",
	})
	e := newEnv(t, index.Options{})
	sum, err := e.ix.IngestFiles(context.Background(), []string{dir}, index.IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Added != 4 || len(sum.Failed) != 4 || len(sum.Skipped) != 3 {
		t.Fatalf("added %d, failed %d, skipped %v", sum.Added, len(sum.Failed), sum.Skipped)
	}
	wantErr := map[string]error{
		"b-empty.md": extract.ErrEmpty, "c-binary.md": extract.ErrBinary,
		"d-latin1.txt": extract.ErrInvalidUTF8, "e-badfront.md": extract.ErrFrontMatter,
	}
	for _, f := range sum.Failed {
		name := filepath.Base(f.Path)
		if !errors.Is(f.Err, wantErr[name]) || !strings.Contains(f.Err.Error(), name) {
			t.Errorf("%s: err %v, want %v naming the file", name, f.Err, wantErr[name])
		}
	}
	if hits := e.search("quokka quokkas", 10); len(hits) != 4 {
		t.Errorf("%d hits, want 4 (the good files only)", len(hits))
	}
	// The four bad files are kept as failed documents: record, blob and
	// reason, no blocks.
	recs, err := e.ix.Blobs().Records(context.Background())
	if err != nil || len(recs) != 8 {
		t.Errorf("blob store holds %d records (%v), want 8", len(recs), err)
	}
	failed, err := e.ix.Failed(context.Background(), index.Restricted)
	if err != nil || len(failed) != 4 {
		t.Fatalf("Failed() = %d documents (%v), want 4", len(failed), err)
	}
	for _, f := range failed {
		name := filepath.Base(f.Source)
		if _, ok := wantErr[name]; !ok || f.Reason == "" || f.Extractor == "" {
			t.Errorf("failed document %+v", f)
		}
		if _, err := e.ix.Blobs().Get(context.Background(), mustRecord(t, e, f.DocID).BlobID); err != nil {
			t.Errorf("%s: blob not kept: %v", name, err)
		}
	}
	// A file named explicitly with an unsupported extension is a failure,
	// not a skip.
	sum, err = e.ix.IngestFiles(context.Background(), []string{filepath.Join(dir, "image.png")}, index.IngestOptions{})
	if err != nil || len(sum.Failed) != 1 || !errors.Is(sum.Failed[0].Err, extract.ErrUnsupported) {
		t.Errorf("explicit .png: %+v, %v", sum, err)
	}
	if _, err := e.ix.IngestFiles(context.Background(), []string{filepath.Join(dir, "missing")}, index.IngestOptions{}); err == nil {
		t.Error("a missing path argument did not stop the batch")
	}
}

// Re-ingesting a changed file replaces its blocks; re-ingesting the same
// bytes writes nothing.
func TestReingest(t *testing.T) {
	e := newEnv(t, index.Options{})
	r := e.ingest("/docs/a.md", "# A\n\nold wombat text\n\nsecond old paragraph\n")
	if r.Status != index.Added || r.Blocks != 1 {
		t.Fatalf("first ingest %+v", r)
	}
	if r := e.ingest("/docs/a.md", "# A\n\nold wombat text\n\nsecond old paragraph\n"); r.Status != index.Unchanged {
		t.Fatalf("same bytes: %+v", r)
	}
	r = e.ingest("/docs/a.md", "# A\n\nnew numbat text\n")
	if r.Status != index.Replaced {
		t.Fatalf("changed bytes: %+v", r)
	}
	if hits := e.search("wombat", 10); len(hits) != 0 {
		t.Errorf("stale block still found: %+v", hits)
	}
	if hits := e.search("numbat", 10); len(hits) != 1 {
		t.Errorf("new block not found")
	}
	st, err := e.ix.Stats(context.Background())
	if err != nil || st.Documents != 1 || st.Blocks != 1 || st.Embeddings != 1 {
		t.Errorf("stats %+v, %v", st, err)
	}
	// Survives a reopen: it is in the file, not in memory.
	e.reopen()
	if hits := e.search("numbat", 10); len(hits) != 1 || hits[0].Body != "new numbat text" {
		t.Errorf("after reopen: %+v", hits)
	}
	// The record follows the new version; both blobs are kept.
	rec, err := e.ix.Blobs().GetRecord(context.Background(), blobstore.DocID("/docs/a.md"))
	if err != nil || rec.BlobID != blobstore.BlobID([]byte("# A\n\nnew numbat text\n")) {
		t.Errorf("record %+v, %v", rec, err)
	}
}

// The blob store holds everything the index derives from: every document
// row has its record and blob, byte for byte.
func TestBlobStoreIsSourceOfTruth(t *testing.T) {
	blobs := filepath.Join(t.TempDir(), "elsewhere")
	e := newEnv(t, index.Options{BlobURL: fileURL(blobs)})
	e.ingest("/d/one.md", "# One\n\nfirst body\n")
	e.ingest("/d/two.txt", "second body\n")
	if n := e.checkVerbatim(); n != 2 {
		t.Errorf("%d blocks, want 2", n)
	}
	if n := blobCount(t, e.ix.Blobs()); n != 2 {
		t.Errorf("%d blobs, want 2", n)
	}
	st, _ := e.ix.Stats(context.Background())
	if st.BlobURL != fileURL(blobs) || st.Documents != 2 {
		t.Errorf("stats %+v", st)
	}
}

// BM25 scores against a hand computation (k1 1.2, b 0.75, contexts off so
// the indexed text is the body).
func TestBM25HandComputed(t *testing.T) {
	e := newEnv(t, index.Options{Contextualize: index.ContextOff})
	e.ingest("/1.txt", "apple banana apple")         // |d| = 3, tf(apple) = 2
	e.ingest("/2.txt", "banana cherry")              // |d| = 2
	e.ingest("/3.txt", "cherry date elderberry fig") // |d| = 4
	const n, avgdl, k1, b = 3.0, 3.0, 1.2, 0.75
	idf := func(df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }
	tf := func(f, dl float64) float64 { return f * (k1 + 1) / (f + k1*(1-b+b*dl/avgdl)) }
	want := map[string]float64{
		"/1.txt": idf(1)*tf(2, 3) + idf(2)*tf(1, 3),
		"/2.txt": idf(2) * tf(1, 2),
	}
	hits := e.search("apple banana", 10)
	if len(hits) != 2 || hits[0].Source != "/1.txt" {
		t.Fatalf("hits %+v", hits)
	}
	for _, h := range hits {
		if math.Abs(h.Score-want[h.Source]) > 1e-12 {
			t.Errorf("%s: score %.15f, want %.15f", h.Source, h.Score, want[h.Source])
		}
	}
	// Ties break by the internal block order, the order of writing: the
	// same body twice scores equal. Their ids differ (another document).
	e.ingest("/4.txt", "cherry date elderberry fig")
	hits = e.search("elderberry", 10)
	if len(hits) != 2 || hits[0].Score != hits[1].Score || hits[0].Source != "/3.txt" || hits[0].BlockID == hits[1].BlockID {
		t.Errorf("tie order: %+v", hits)
	}
	if hits := e.search("  ...  ", 10); len(hits) != 0 {
		t.Errorf("a query without terms returned %d hits", len(hits))
	}
}

// The 155 real FastAPI pages ingest without a failure, every block is
// verbatim, and the title of a page reaches its blocks.
func TestFastAPIPages(t *testing.T) {
	dir := sharedData(t, "markdown/fastapi")
	e := newEnv(t, index.Options{})
	sum, err := e.ix.IngestFiles(context.Background(), []string{dir}, index.IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Added != 155 || len(sum.Failed) != 0 {
		t.Fatalf("added %d, failed %v", sum.Added, sum.Failed)
	}
	if n := e.checkVerbatim(); n != sum.Blocks || n < 1000 {
		t.Errorf("%d verbatim blocks, summary says %d", n, sum.Blocks)
	}
	hits := e.search("path parameters with types", 5)
	var sources []string
	for _, h := range hits {
		sources = append(sources, filepath.Base(h.Source))
		if !strings.HasPrefix(h.Context, "[") || strings.Contains(h.Context, "{ #") {
			t.Errorf("context %q", h.Context)
		}
	}
	sort.Strings(sources)
	if !strings.Contains(strings.Join(sources, " "), "path-params.md") {
		t.Errorf("top 5 for 'path parameters with types' miss path-params.md: %v", sources)
	}
}

// Odd directory entries are failures or skips, never a hang or a crash, and
// symbolic links resolve to one document per file.
func TestOddFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"real/a.md":      "Alpha wallaby text.\n",
		"big.md":         strings.Repeat("wallaby ", 200),
		"other/b.md":     "Beta wallaby text.\n",
		"report.pdf":     "%PDF-1.7 not a real PDF",
		"real/deep/c.md": "Gamma wallaby text.\n",
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Mkfifo(filepath.Join(dir, "real", "pipe.md"), 0o644))
	must(os.Symlink(filepath.Join(dir, "real", "a.md"), filepath.Join(dir, "other", "alias.md")))
	must(os.Symlink(filepath.Join(dir, "real", "deep"), filepath.Join(dir, "other", "deeplink")))
	must(os.Symlink(filepath.Join(dir, "missing.md"), filepath.Join(dir, "other", "dangling.md")))
	must(os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "reallink")))

	e := newEnv(t, index.Options{})
	ctx := context.Background()
	sum, err := e.ix.IngestFiles(ctx, []string{filepath.Join(dir, "other"), filepath.Join(dir, "reallink"),
		filepath.Join(dir, "report.pdf"), filepath.Join(dir, "big.md")}, index.IngestOptions{MaxFileBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// other/: b.md, alias.md (→ real/a.md); reallink/ walks real/: a.md (a
	// repeat of alias.md), deep/c.md; the FIFO, the dangling link, the PDF
	// (corrupt: kept as failed) and the over-cap file (kept as failed,
	// unread) fail; deeplink (a symlinked directory) is skipped.
	if sum.Added != 3 {
		t.Errorf("added %d, want 3", sum.Added)
	}
	reasons := map[string]string{}
	for _, f := range sum.Failed {
		reasons[filepath.Base(f.Path)] = f.Err.Error()
		if f.Bytes != 0 && filepath.Base(f.Path) != "report.pdf" {
			t.Errorf("%s: %d bytes read for a failed file", f.Path, f.Bytes)
		}
	}
	for name, want := range map[string]string{
		"pipe.md": "not a regular file", "dangling.md": "no such file", "report.pdf": "corrupt document", "big.md": "over the size cap: 1600 bytes, over 1000",
	} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("%s: failure %q, want %q", name, reasons[name], want)
		}
	}
	if len(sum.Failed) != 4 || len(sum.Skipped) != 1 || !strings.HasSuffix(sum.Skipped[0], "deeplink") {
		t.Errorf("failed %v, skipped %v", reasons, sum.Skipped)
	}
	hits := e.search("wallaby", 10)
	sources := map[string]bool{}
	for _, h := range hits {
		sources[h.Source] = true
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(dir, "real", "a.md"))
	if len(hits) != 3 || !sources[filepath.ToSlash(real)] {
		t.Errorf("hits from %v, want 3 documents with real paths", sources)
	}
}
