package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/rerank"
)

// run runs escurel in-process and returns stdout, stderr and the exit code.
func run(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	code := exitCode(&errb, m.Run(context.Background(), args))
	return out.String(), errb.String(), code
}

func docs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"guide.md":  "---\ntitle: Platypus Guide\n---\n\n# Setup\n\nInstall the egg-laying toolchain.\n\n## Tuning\n\nTune the bill sensors.\n",
		"notes.txt": "Loose notes about sensors.\n",
		"bad.md":    "\x00\x01binary",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goodDocs is docs without the file that fails.
func goodDocs(t *testing.T) string {
	t.Helper()
	src := docs(t)
	if err := os.Remove(filepath.Join(src, "bad.md")); err != nil {
		t.Fatal(err)
	}
	return src
}

func TestIngestSearchStatus(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := docs(t)
	out, errOut, code := run(t, nil, "--index", idx, "ingest", src)
	if code != 1 {
		t.Fatalf("ingest with a bad file: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "bad.md: binary content: NUL byte at offset 0") || !strings.Contains(errOut, "1 of 3 files failed (1 kept as a failed document, listed by escurel status): bad.md") {
		t.Errorf("stderr does not name the failure:\n%s", errOut)
	}
	if !strings.Contains(out, "2 added, 0 replaced, 0 unchanged, 1 failed; 3 blocks written") {
		t.Errorf("summary:\n%s", out)
	}

	// --json: exactly the documented keys.
	out, errOut, code = run(t, nil, "search", "--index", idx, "-k", "2", "--json", "platypus", "tuning")
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, errOut)
	}
	var doc struct {
		Query string           `json:"query"`
		Hits  []map[string]any `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("search --json output %q: %v", out, err)
	}
	if doc.Query != "platypus tuning" || len(doc.Hits) != 2 {
		t.Fatalf("search --json: %+v", doc)
	}
	var keys []string
	for k := range doc.Hits[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"block_id", "body", "byte_end", "byte_start", "context", "doc_id", "heading_path", "page", "score", "source", "title"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("hit keys %v, want %v", keys, want)
	}
	h := doc.Hits[0]
	if h["body"] != "Tune the bill sensors." || h["context"] != "[Platypus Guide › Setup › Tuning]" || h["title"] != "Platypus Guide" {
		t.Errorf("top hit %v", h)
	}

	// Text output: context and source:span.
	out, _, code = run(t, nil, "--index", idx, "search", "bill sensors")
	guide := filepath.ToSlash(filepath.Join(src, "guide.md"))
	data, _ := os.ReadFile(filepath.Join(src, "guide.md"))
	start := bytes.Index(data, []byte("Tune the bill"))
	if code != 0 || !strings.Contains(out, "[Platypus Guide › Setup › Tuning]") ||
		!strings.Contains(out, guide+":"+strconv.Itoa(start)+"-"+strconv.Itoa(start+len("Tune the bill sensors."))) {
		t.Errorf("search output:\n%s", out)
	}

	out, _, code = run(t, nil, "--index", idx, "status", "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["documents"].(float64) != 3 || st["failed"].(float64) != 1 || st["blocks"].(float64) != 3 {
		t.Errorf("status --json: %s", out)
	}
	if f, _ := st["failed_documents"].([]any); len(f) != 1 || f[0].(map[string]any)["reason"] != "binary content: NUL byte at offset 0" {
		t.Errorf("status --json failed_documents: %v", st["failed_documents"])
	}
	out, _, code = run(t, nil, "--index", idx, "status")
	for _, s := range []string{"schema version", "chunker", "default(max_bytes=1500)", "contextualize", "structural", "documents", "3 (1 failed)",
		"extractors", "markdown/2 2, text/2 1", "bad.md: binary content: NUL byte at offset 0"} {
		if code != 0 || !strings.Contains(out, s) {
			t.Errorf("status output lacks %q:\n%s", s, out)
		}
	}
}

func TestContextualizeEnv(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := docs(t)
	off := map[string]string{"ESCUREL_INGEST_CONTEXTUALIZE": "off"}
	run(t, off, "--index", idx, "ingest", filepath.Join(src, "guide.md"))
	out, _, _ := run(t, off, "--index", idx, "search", "--json", "bill")
	if !strings.Contains(out, `"context":""`) {
		t.Errorf("contextualize off stored a context: %s", out)
	}
	// The index remembers: a search without the variable adopts "off"; a
	// contrary setting is refused with the fix.
	if _, errOut, code := run(t, nil, "--index", idx, "search", "bill"); code != 0 {
		t.Errorf("search without the variable: exit %d %s", code, errOut)
	}
	_, errOut, code := run(t, map[string]string{"ESCUREL_INGEST_CONTEXTUALIZE": "structural"}, "--index", idx, "search", "bill")
	if code != 1 || !strings.Contains(errOut, "escurel rebuild --contextualize 'structural'") {
		t.Errorf("mismatch: exit %d, %s", code, errOut)
	}
	_, errOut, code = run(t, map[string]string{"ESCUREL_INGEST_CONTEXTUALIZE": "yes"}, "--index", idx, "ingest", src)
	if code != 1 || !strings.Contains(errOut, `contextualize "yes": want "structural" or "off"`) {
		t.Errorf("unknown mode: exit %d, %s", code, errOut)
	}
	// --dry-run prints the plan and changes nothing.
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--dry-run", "--contextualize", "structural")
	if code != 0 || !strings.Contains(out, "live generation: gen-000001") || !strings.Contains(out, "documents: 1") ||
		!strings.Contains(out, "change: contextualize: off → structural") {
		t.Fatalf("rebuild --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	if gens, _ := layout.Generations(idx); len(gens) != 1 {
		t.Fatalf("a dry run made generations: %v", gens)
	}
	// rebuild with the other mode swaps the index; the env default follows.
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--contextualize", "structural")
	if code != 0 || !strings.Contains(out, "rebuild: 1 document, 2 blocks") || !strings.Contains(out, "live generation gen-000002 (was gen-000001") {
		t.Fatalf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = run(t, nil, "--index", idx, "search", "--json", "bill")
	if !strings.Contains(out, `"context":"[Platypus Guide › Setup › Tuning]"`) {
		t.Errorf("after rebuild: %s", out)
	}
}

func TestSensitivityFlags(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := docs(t)
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", "--sensitivity", "restricted", filepath.Join(src, "guide.md")); code != 0 {
		t.Fatalf("ingest: %d %s", code, errOut)
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "bill"); !strings.Contains(out, "no hits") {
		t.Errorf("restricted block at default clearance:\n%s", out)
	}
	// Flags after the query work too.
	if out, _, _ := run(t, nil, "--index", idx, "search", "bill", "--clearance", "restricted"); !strings.Contains(out, "Tune the bill sensors.") {
		t.Errorf("restricted block missing with clearance:\n%s", out)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", "--sensitivity", "secret", filepath.Join(src, "notes.txt")); code != 2 || !strings.Contains(errOut, `sensitivity "secret"`) {
		t.Errorf("bad sensitivity: %d %s", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"--index", idx, "search"}, {"--index", idx, "ingest"},
		{"--index", idx, "search", "-k", "0", "x"}, {"--index", idx, "search", "--nope", "x"},
		{"--index", idx, "rebuild", "--embedder", "word2vec"},
		{"--index", idx, "rebuild", "--contextualize", "bogus"},
		{"--index", idx, "rebuild", "--chunker", "semantic"},
		{"--index", idx, "ingest", "--lang", "English", "."},
		{"--index", idx, "--blobs", "mem://", "ingest", "."},
	} {
		if _, errOut, code := run(t, nil, args...); code != 2 || !strings.Contains(errOut, "Try: escurel help") {
			t.Errorf("%q: exit %d, stderr %q; want 2 with a hint", args, code, errOut)
		}
	}
	if _, errOut, code := run(t, nil, "--index", idx, "search", "x"); code != 1 || !strings.Contains(errOut, "no index in") {
		t.Errorf("search without an index: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", "/no/such/path"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("ingest of a missing path: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(idx); err == nil {
		t.Error("a failed command created the index directory")
	}
	if _, errOut, _ := run(t, nil, "--index", idx, "search", "-oauth"); strings.Count(errOut, "escurel") != 2 || !strings.Contains(errOut, "escurel: search: flag provided but not defined: -oauth") {
		t.Errorf("unknown flag message: %q", errOut)
	}
	if out, _, code := run(t, nil, "help"); code != 0 || !strings.Contains(out, "ESCUREL_INGEST_CONTEXTUALIZE") {
		t.Errorf("help: %d %s", code, out)
	}
}

func TestDeleteCompact(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := docs(t)
	guide := filepath.Join(src, "guide.md")
	run(t, nil, "--index", idx, "ingest", guide, filepath.Join(src, "notes.txt"))
	out, errOut, code := run(t, nil, "--index", idx, "delete", guide, "/not/there.md")
	if code != 1 || !strings.Contains(out, "deleted 1 document\n") || !strings.Contains(errOut, "no document /not/there.md") {
		t.Errorf("delete: %d %q %q", code, out, errOut)
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "sensors"); !strings.Contains(out, "notes.txt") || strings.Contains(out, "guide.md") {
		t.Errorf("after delete:\n%s", out)
	}
	// Two of three blocks died: past the 20% threshold the delete compacted.
	out, _, _ = run(t, nil, "--index", idx, "status", "--json")
	if !strings.Contains(out, `"tombstones":0,"segments":1`) {
		t.Errorf("no automatic compaction: %s", out)
	}
	out, _, code = run(t, nil, "--index", idx, "compact")
	if code != 0 || !strings.Contains(out, "compacted: 1 segments -> 1, 0 tombstones dropped") {
		t.Errorf("compact: %d %s", code, out)
	}
	// rebuild does not bring the deleted document back.
	run(t, nil, "--index", idx, "rebuild")
	if out, _, _ := run(t, nil, "--index", idx, "search", "--and", "bill", "sensors"); !strings.Contains(out, "no hits") {
		t.Errorf("deleted document back after rebuild:\n%s", out)
	}
}

// search --mode hybrid --explain --json adds an explain object per hit;
// --rerank sends the hits to a reranker on a loopback server; the embedder
// comes from ESCUREL_EMBEDDER.
func TestSearchModesCLI(t *testing.T) {
	srv := modelserver.Start(t)
	idx := filepath.Join(t.TempDir(), "idx")
	src := goodDocs(t)
	env := map[string]string{"ESCUREL_EMBEDDER": "ollama:m?dim=384&url=" + srv.URL}
	if out, errOut, code := run(t, env, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := run(t, nil, "--index", idx, "search", "--mode", "hybrid", "--explain", "--json", "--rerank", srv.URL+"/rerank", "bill sensors")
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, errOut)
	}
	var doc struct {
		Hits []struct {
			Body    string `json:"body"`
			Explain struct {
				BM25   *struct{ Rank int } `json:"bm25"`
				Dense  *struct{ Rank int } `json:"dense"`
				Rerank *struct{ Rank int } `json:"rerank"`
			} `json:"explain"`
		} `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Hits) != 3 || doc.Hits[0].Body != "Tune the bill sensors." {
		t.Fatalf("hits %+v", doc.Hits)
	}
	x := doc.Hits[0].Explain
	if x.BM25 == nil || x.Dense == nil || x.Rerank == nil || x.Rerank.Rank != 1 {
		t.Errorf("explain %+v", x)
	}
	var paths []string
	for _, r := range srv.Requests() {
		paths = append(paths, r.Path)
	}
	if !slices.Contains(paths, "/api/embed") || paths[len(paths)-1] != "/rerank" {
		t.Errorf("requests %v", paths)
	}
	// Text output shows the legs.
	out, _, _ = run(t, nil, "--index", idx, "search", "--mode", "dense", "--explain", "bill sensors")
	if !strings.Contains(out, "bm25 -  dense #1") {
		t.Errorf("text explain:\n%s", out)
	}
	// Bad values are usage errors.
	for _, args := range [][]string{{"--mode", "vector"}, {"--fusion", "max"}, {"--rerank", "ftp://x"}} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx, "search"}, append(args, "q")...)...)
		if code == 0 || errOut == "" {
			t.Errorf("search %v: exit %d", args, code)
		}
	}
	if _, errOut, code := run(t, nil, "--index", idx, "--embedder", "hash", "search", "q"); code != 1 || !strings.Contains(errOut, "escurel rebuild --embedder") {
		t.Errorf("another embedder: exit %d: %s", code, errOut)
	}
}

// verify prints the digest and exits 1 on drift; rollback returns to the
// generation before the rebuild, and verify agrees with its digest.
func TestVerifyRollbackCLI(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testVerifyRollbackCLI(t, l.flags) })
	}
}

func testVerifyRollbackCLI(t *testing.T, flags []string) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := goodDocs(t)
	if _, errOut, code := run(t, nil, append(append([]string{"--index", idx}, flags...), "ingest", src)...); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := run(t, nil, "--index", idx, "verify", "--json")
	var v struct {
		Digest     string
		Generation string
		Documents  int
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Generation != "gen-000001" || v.Documents != 2 || len(v.Digest) != 64 {
		t.Fatalf("verify: exit %d %s %s", code, out, errOut)
	}
	first := v.Digest
	if _, errOut, code := run(t, nil, "--index", idx, "rebuild", "--contextualize", "off"); code != 0 {
		t.Fatal(errOut)
	}
	out, _, _ = run(t, nil, "--index", idx, "verify")
	if strings.Contains(out, first) || !strings.Contains(out, "generation gen-000002") {
		t.Errorf("verify after a contextualize change:\n%s", out)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rollback")
	if code != 0 || !strings.Contains(out, "live generation gen-000001 (was gen-000002)") {
		t.Fatalf("rollback: exit %d %s %s", code, out, errOut)
	}
	out, _, _ = run(t, nil, "--index", idx, "verify")
	if !strings.Contains(out, "digest "+first) {
		t.Errorf("verify after rollback:\n%s", out)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "rollback"); code != 1 || !strings.Contains(errOut, "no generation older than gen-000001") {
		t.Errorf("second rollback: exit %d %s", code, errOut)
	}
	// Drift: a blob lost; then a record removed behind the index's back.
	ctx := context.Background()
	store := openBlobs(t, idx)
	recs, err := store.Records(ctx)
	if err != nil || len(recs) == 0 {
		t.Fatalf("records: %d, %v", len(recs), err)
	}
	data, err := store.Get(ctx, recs[0].BlobID)
	if err != nil {
		t.Fatal(err)
	}
	damageBlob(t, idx, recs[0].BlobID, "remove")
	out, _, code = run(t, nil, "--index", idx, "verify")
	if code != 1 || !strings.Contains(out, "records without blobs (cannot be rebuilt): 1") {
		t.Errorf("verify with a lost blob: exit %d\n%s", code, out)
	}
	if _, err := openBlobs(t, idx).Put(ctx, data); err != nil {
		t.Fatal(err)
	}
	// Drift: a record removed behind the index's back.
	if err := openBlobs(t, idx).DeleteRecord(ctx, recs[0].DocID); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "--index", idx, "verify")
	if code != 1 || !strings.Contains(out, "rows without records: 1") || !strings.Contains(errOut, "drifted") {
		t.Errorf("verify with a lost record: exit %d\n%s%s", code, out, errOut)
	}
}

// ESCUREL_CHUNKER picks a small-to-big chunker: search --json gains
// prompt_text and parent_locator, expand shows the block's surroundings,
// and opening with another chunker names the rebuild that switches.
func TestSmallToBigCLI(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := goodDocs(t)
	env := map[string]string{"ESCUREL_CHUNKER": "sentence_window(window=1)"}
	if _, errOut, code := run(t, env, "--index", idx, "ingest", src); code != 0 {
		t.Fatal(errOut)
	}
	out, _, code := run(t, nil, "--index", idx, "search", "--json", "-k", "1", "bill", "sensors")
	var doc struct {
		Hits []map[string]any `json:"hits"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Hits) != 1 {
		t.Fatalf("search: %s", out)
	}
	h := doc.Hits[0]
	if h["body"] != "Tune the bill sensors." || h["prompt_text"] != "Tune the bill sensors." || h["parent_locator"] == nil {
		t.Errorf("hit %v", h)
	}
	id := fmt.Sprint(h["block_id"])
	out, errOut, code := run(t, nil, "--index", idx, "expand", "--json", id)
	if code != 0 || !strings.Contains(out, `"body":"Tune the bill sensors."`) {
		t.Errorf("expand: exit %d %s %s", code, out, errOut)
	}
	if len(id) != 16 {
		t.Errorf("block id %q", id)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "expand", "0000000000067932"); code != 1 ||
		!strings.Contains(errOut, "no such block 0000000000067932 (its document changed or was deleted)") {
		t.Errorf("expand of a missing block: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "expand", "424242"); code != 2 || !strings.Contains(errOut, "not a block id") {
		t.Errorf("expand of a malformed id: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "--chunker", "default", "search", "bill"); code != 1 || !strings.Contains(errOut, "escurel rebuild --chunker") {
		t.Errorf("another chunker: exit %d %s", code, errOut)
	}
}

// An index created on a blob store of its own remembers it: later commands
// without --blobs use it, and another store is refused.
func TestIndexRemembersBlobStore(t *testing.T) {
	root := t.TempDir()
	idx, store := filepath.Join(root, "idx"), filepath.Join(root, "store")
	src := goodDocs(t)
	env := map[string]string{"ESCUREL_INDEX": idx, "ESCUREL_BLOBS": "file://" + store}
	if _, errOut, code := run(t, env, "ingest", src); code != 0 {
		t.Fatal(errOut)
	}
	out, _, code := run(t, nil, "--index", idx, "status")
	if code != 0 || !strings.Contains(out, "file://"+store) {
		t.Errorf("status without --blobs: %s", out)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "verify"); code != 0 {
		t.Errorf("verify without --blobs: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "--blobs", "file://"+filepath.Join(root, "other"), "search", "bill"); code != 1 || !strings.Contains(errOut, "derives from the blob store") {
		t.Errorf("another store: exit %d %s", code, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "rebuild"); code != 0 {
		t.Errorf("rebuild without --blobs: exit %d %s", code, errOut)
	}
}

// delete takes a file as ingest took it: a relative path finds the
// document ingested by its absolute path.
func TestDeleteRelativePath(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := goodDocs(t)
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatal(errOut)
	}
	t.Chdir(src)
	out, errOut, code := run(t, nil, "--index", idx, "delete", "notes.txt")
	if code != 0 || !strings.Contains(out, "deleted 1 document\n") {
		t.Errorf("delete notes.txt: exit %d %s %s", code, out, errOut)
	}
	// A file already removed from disk, named relative to the directory.
	if err := os.Remove("guide.md"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "--index", idx, "delete", "./guide.md")
	if code != 0 || !strings.Contains(out, "deleted 1 document\n") {
		t.Errorf("delete a removed file: exit %d %s %s", code, out, errOut)
	}
}

// A directory of mixed formats: the per-format table, exit 1 for the bad
// files, status listing them, --max-file-bytes, and a rebuild that counts
// the ones still failing.
func TestIngestMixedFormats(t *testing.T) {
	shared, err := filepath.Abs("../../../shared/data/documents")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("shared test data %s is absent: %v", shared, err)
	}
	src := t.TempDir()
	for name, data := range map[string][]byte{
		"page.html":   []byte("<title>Bandicoot</title><h1>Diet</h1><p>Bandicoots eat insects.</p>"),
		"notzip.docx": []byte("not a zip"),
		"big.md":      bytes.Repeat([]byte("bandicoot "), 20000),
	} {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx := filepath.Join(t.TempDir(), "idx")
	out, errOut, code := run(t, nil, "--index", idx, "ingest", "--max-file-bytes", "150000",
		filepath.Join(shared, "pdf", "multi_page.pdf"), filepath.Join(shared, "docx", "word_sample.docx"), src)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"5 files into", "3 added, 0 replaced, 0 unchanged, 2 failed",
		"format  documents  pages  without text  blocks  failed  extract s (summed)",
		"docx 2 0 0 4 1",
		"html 1 0 0 1 0",
		"markdown 1 0 0 0 1",
		"pdf 1 5 0 14 0",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("ingest output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"notzip.docx: corrupt document", "big.md: file over the size cap: 200000 bytes, over 150000",
		"2 of 5 files failed (2 kept as failed documents, listed by escurel status): big.md, notzip.docx"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	out, _, code = run(t, nil, "--index", idx, "status")
	if code != 0 || !strings.Contains(out, "5 (2 failed)") || !strings.Contains(out, "docx/2 2, html/2 1, none (over the size cap, never read) 1, pdf/2 1") ||
		!strings.Contains(out, "big.md: file over the size cap") || !strings.Contains(out, "notzip.docx: corrupt document") {
		t.Errorf("status:\n%s", out)
	}
	out, _, code = run(t, nil, "--index", idx, "search", "word processor typewriter")
	if code != 0 || !strings.Contains(out, "multi_page.pdf") || !strings.Contains(out, "› p.1]") {
		t.Errorf("search:\n%s", out)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild")
	if code != 0 || !strings.Contains(out, "rebuild: 5 documents") || !strings.Contains(out, "failed documents: 2 (escurel status lists them); 0 that failed before extract now") {
		t.Errorf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
	// A rebuild under a limit the served documents cannot meet is refused
	// and the live generation stays; --allow-failures accepts it.
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--extract-timeout", "1ns")
	if code != 1 || !strings.Contains(errOut, "documents the live index serves fail extraction") || !strings.Contains(errOut, "--allow-failures") {
		t.Errorf("rebuild under 1ns: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "word processor typewriter"); !strings.Contains(out, "multi_page.pdf") {
		t.Errorf("search after the refused rebuild:\n%s", out)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--extract-timeout", "1ns", "--allow-failures")
	if code != 0 || !strings.Contains(out, "failed documents: 5") {
		t.Errorf("rebuild --allow-failures: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild")
	if code != 0 || !strings.Contains(out, "failed documents: 2 (escurel status lists them); 3 that failed before extract now") {
		t.Errorf("rebuild after: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "--extract-timeout", "soon", "status"); code != 2 || !strings.Contains(errOut, "--extract-timeout") {
		t.Errorf("bad --extract-timeout: exit %d %s", code, errOut)
	}
}

// The binary links the providers it ships: the onnx embedder and the PDF
// extractor are registered, so a manifest records pdf/2 and an onnx spec
// builds (or fails for want of a model, not of a provider).
func TestProvidersLinked(t *testing.T) {
	if !slices.Contains(embed.Providers(), "onnx") {
		t.Errorf("embed.Providers() = %v, want onnx", embed.Providers())
	}
	if ids := extract.IDs(); !strings.Contains(ids, "pdf/2") {
		t.Errorf("extract.IDs() = %q, want pdf/2", ids)
	}
	if !slices.Contains(rerank.Providers(), "http") {
		t.Errorf("rerank.Providers() = %v, want http", rerank.Providers())
	}
	spec, err := embed.ParseSpec("onnx:m?path=" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := embed.New(spec); errors.Is(err, embed.ErrNotLinked) {
		t.Errorf("embed.New(onnx): %v", err)
	}
}
