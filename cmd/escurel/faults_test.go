package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/escurel/escurel/blobstore"
)

// Out-of-range numbers are usage errors before anything runs (issue 19,
// items 1 and 11): -k and --depth past the library's limits once ended the
// process (out of memory, or a panic in make).
func TestOutOfRangeFlags(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"search", "-k", "9223372036854775807", "x"}, "-k 9223372036854775807"},
		{[]string{"search", "-k", "10000000000", "x"}, "-k 10000000000"},
		{[]string{"search", "--mode", "hybrid", "--depth", "9223372036854775807", "x"}, "--depth 9223372036854775807"},
		{[]string{"search", "--mode", "hybrid", "--depth", "-1", "x"}, "--depth -1"},
	} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", c.args, code, errOut, c.want)
		}
	}
}

// A language the analyzer does not support, and a negative duration, are
// usage errors before anything runs: --lang xx once failed every file, and
// --rerank-timeout -1s was accepted (issue 19, item 11).
func TestUnsupportedLanguageAndNegativeDurations(t *testing.T) {
	src := goodDocs(t)
	idx := filepath.Join(t.TempDir(), "idx")
	for _, args := range [][]string{
		{"ingest", "--lang", "xx", src},
		{"search", "--rerank-timeout", "-1s", "--rerank", "http://127.0.0.1:1/rerank", "x"},
		{"--extract-timeout", "-1s", "ingest", src},
		{"--embedder", "openai:m?url=http://127.0.0.1:1&dim=8&timeout=-1s", "ingest", src},
	} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...)
		if code != 2 {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errOut)
		}
		if _, err := os.Stat(idx); err == nil {
			t.Fatalf("%q created the index", args)
		}
	}
	// On an existing index, before any file is read.
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s", code, errOut)
	}
	out, errOut, code := run(t, nil, "--index", idx, "ingest", "--lang", "xx", src)
	if code != 2 || !strings.Contains(errOut, `--lang: language "xx"`) || out != "" {
		t.Errorf("ingest --lang xx into an index: exit %d\n%s%s", code, out, errOut)
	}
}

// What a source controls (its name, headings, text) cannot forge lines or
// send terminal sequences through plain output, and a query is echoed cut
// to a few hundred bytes (issue 19, item 9).
func TestOutputASourceCannotForge(t *testing.T) {
	src := t.TempDir()
	evil := "evil\n 2.  9.9999  passwd:0-1\r\x1b[2J\u0085.md"
	if err := os.WriteFile(filepath.Join(src, evil), []byte("# Head \x1b[31mred\n\nplatypus \x1b]0;title\x07 text\n"), 0o644); err != nil {
		t.Skipf("this file system refuses the name: %v", err)
	}
	// Fails (NUL), so status lists it, with a control character in its name.
	if err := os.WriteFile(filepath.Join(src, "bad\x1b[2J\n.md"), []byte("\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 1 {
		t.Fatalf("ingest: exit %d\n%s%s", code, out, errOut)
	}
	clean := func(what, s string) {
		t.Helper()
		for _, r := range s {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
				t.Errorf("%s: control character %U in output:\n%q", what, r, s)
				return
			}
		}
	}
	out, _, code := run(t, nil, "--index", idx, "search", "platypus")
	clean("search", out)
	if code != 0 || strings.Count(out, "\n 2.") != 0 || !strings.Contains(out, `"`+filepath.Join(src, "evil\\n")) {
		t.Errorf("search output forged or not escaped:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "search", "--explain", "--mode", "hybrid", "platypus")
	clean("search --explain", out)
	js, _, _ := run(t, nil, "--index", idx, "search", "--json", "platypus")
	var found struct {
		Hits []struct {
			BlockID string `json:"block_id"`
		}
	}
	if err := json.Unmarshal([]byte(js), &found); err != nil || len(found.Hits) == 0 {
		t.Fatalf("search --json: %v %s", err, js)
	}
	out, _, _ = run(t, nil, "--index", idx, "expand", found.Hits[0].BlockID)
	clean("expand", out)
	if !strings.Contains(out, "platypus") {
		t.Errorf("expand:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "status", "--clearance", "restricted")
	clean("status", out)
	if !strings.Contains(out, `bad\x1b[2J\n.md`) {
		t.Errorf("status does not show the failed name escaped:\n%s", out)
	}
	out, _, _ = run(t, nil, "--index", idx, "verify")
	clean("verify", out)

	// A 1 MB query is echoed cut, with a marker, on stdout and stderr.
	q := strings.Repeat("zz", 1<<19)
	out, _, _ = run(t, nil, "--index", idx, "search", q)
	if len(out) > 400 || !strings.Contains(out, "no hits for") || !strings.Contains(out, "1048576 bytes") {
		t.Errorf("no hits for a 1 MB query: %d bytes of output: %.300s", len(out), out)
	}
	_, errOut, _ := run(t, nil, "--index", idx, "search", "--mode", "nonsense", q)
	if len(errOut) > 600 || !strings.Contains(errOut, "nonsense") {
		t.Errorf("error for a 1 MB query: %d bytes: %.300s", len(errOut), errOut)
	}
}

// A full disk (a small tmpfs; skipped without the privilege to mount
// one): an ingest whose blobs, records and log fit but whose checkpoint
// does not once exited 0, and then every command, search included, failed
// with DuckDB's checkpoint error (issue 19, item 3). Now the ingest either
// exits 1 naming a checkpoint that failed, or, its log being under
// closeCheckpointBytes, leaves the log for the next open and exits 0;
// searches and status work on the full disk, and once space is freed
// nothing was lost.
func TestFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=12m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs CAP_SYS_ADMIN): %v", err)
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	src1, src2 := t.TempDir(), t.TempDir()
	for i := range 50 {
		os.WriteFile(filepath.Join(src1, fmt.Sprintf("a%d.md", i)), []byte(fmt.Sprintf("# Doc %d\n\nplatypus words number %d\n", i, i)), 0o644)
		os.WriteFile(filepath.Join(src2, fmt.Sprintf("b%d.md", i)), []byte(fmt.Sprintf("# Other %d\n\nwombat text %d lorem ipsum\n", i, i)), 0o644)
	}
	idx := filepath.Join(mnt, "idx")
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src1); code != 0 {
		t.Fatalf("first ingest: %d %s", code, errOut)
	}
	// Leave 1 MB: room for the blobs, records and log, not the checkpoint.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, nil, "--index", idx, "ingest", src2)
	if code == 0 {
		// Its log, under closeCheckpointBytes, was left for the next open
		// (no checkpoint to fail): acknowledged, and durable in the log.
		logs, _ := filepath.Glob(filepath.Join(idx, "gen-*", "index.duckdb.wal"))
		if len(logs) != 1 || fileBytes(logs[0]) == 0 {
			t.Errorf("ingest on a full disk: exit 0 without a log left to replay (%q)\n%s%s", logs, out, errOut)
		} else {
			t.Logf("ingest on a full disk: exit 0, its log (%d bytes) left for the next open", fileBytes(logs[0]))
		}
	} else {
		t.Logf("ingest on a full disk: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{{"search", "platypus"}, {"status"}, {"search", "wombat"}} {
		out, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...)
		if code != 0 || strings.Contains(out, "no hits") {
			t.Errorf("%q on a full disk: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "--index", idx, "verify")
	if code != 0 || !strings.Contains(out, "100 documents") {
		t.Errorf("verify once space is freed: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := run(t, nil, "--index", idx, "ingest", src2); !strings.Contains(out, "50 unchanged") {
		t.Errorf("the ingest on the full disk was not all committed:\n%s", out)
	}
}

// A damaged blob (one byte flipped) or a missing one: verify --deep names
// the document, the blob and the repair; rebuild repairs it from the
// source file when that still holds the bytes, else names the document
// and the repair; ingesting the original bytes repairs it, though the
// index holds them unchanged (issue 19, item 4: verify saw nothing, every
// rebuild failed, and re-ingest said "unchanged" and wrote nothing).
func TestDamagedBlobIsFoundAndRepaired(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testDamagedBlobIsFoundAndRepaired(t, l.flags) })
	}
}

func testDamagedBlobIsFoundAndRepaired(t *testing.T, flags []string) {
	src := goodDocs(t)
	idx := filepath.Join(t.TempDir(), "idx")
	if _, errOut, code := run(t, nil, append(append([]string{"--index", idx}, flags...), "ingest", src)...); code != 0 {
		t.Fatal(errOut)
	}
	guide := filepath.Join(src, "guide.md")
	for _, damage := range []string{"flip", "remove"} {
		blob := strings.TrimPrefix(blobOf(t, idx, guide), "sha256:")
		damageBlob(t, idx, "sha256:"+blob, damage)
		out, errOut, code := run(t, nil, "--index", idx, "verify", "--deep")
		if code != 1 || !strings.Contains(out, guide) || !strings.Contains(out, "escurel ingest "+guide) {
			t.Errorf("%s: verify --deep: exit %d\n%s%s", damage, code, out, errOut)
		}
		if damage == "flip" && !strings.Contains(out, blob) {
			t.Errorf("verify --deep does not name the blob:\n%s", out)
		}
		// With its source file gone (or changed), rebuild cannot repair
		// the blob: it names the document and the repair.
		if err := os.Rename(guide, guide+".away"); err != nil {
			t.Fatal(err)
		}
		out, errOut, code = run(t, nil, "--index", idx, "rebuild")
		if code != 1 || !strings.Contains(errOut, guide) || !strings.Contains(errOut, `escurel ingest "`+guide+`"`) {
			t.Errorf("%s: rebuild: exit %d\n%s%s", damage, code, out, errOut)
		}
		if err := os.Rename(guide+".away", guide); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := run(t, nil, "--index", idx, "ingest", guide); code != 0 {
			t.Errorf("%s: re-ingest: exit %d\n%s%s", damage, code, out, errOut)
		}
		if out, errOut, code := run(t, nil, "--index", idx, "verify", "--deep"); code != 0 {
			t.Errorf("%s: verify --deep after the repair: exit %d\n%s%s", damage, code, out, errOut)
		}
		if out, errOut, code := run(t, nil, "--index", idx, "rebuild"); code != 0 {
			t.Errorf("%s: rebuild after the repair: exit %d\n%s%s", damage, code, out, errOut)
		}
	}
}

// Whatever state the derived files are in, rebuild re-derives the index
// from the blob store with no hand edit, and other commands point to it
// (issue 19, item 6: a truncated index.duckdb, an empty or garbage
// CURRENT, or none beside a generation of documents, had no way out).
func TestRebuildRepairsDamagedDerivedFiles(t *testing.T) {
	src := goodDocs(t)
	for _, c := range []struct {
		name   string
		damage func(idx string) error
	}{
		{"truncated index.duckdb", func(idx string) error {
			return os.Truncate(filepath.Join(idx, "gen-000001", "index.duckdb"), 4096)
		}},
		{"garbage index.duckdb", func(idx string) error {
			return os.WriteFile(filepath.Join(idx, "gen-000001", "index.duckdb"), []byte("not a database"), 0o600)
		}},
		{"empty CURRENT", func(idx string) error { return os.WriteFile(filepath.Join(idx, "CURRENT"), nil, 0o600) }},
		{"garbage CURRENT", func(idx string) error {
			return os.WriteFile(filepath.Join(idx, "CURRENT"), []byte("\x00\xffgarbage\n"), 0o600)
		}},
		{"CURRENT naming a lost generation", func(idx string) error {
			return os.WriteFile(filepath.Join(idx, "CURRENT"), []byte("gen-000009\n"), 0o600)
		}},
		{"no CURRENT", func(idx string) error { return os.Remove(filepath.Join(idx, "CURRENT")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			idx := filepath.Join(t.TempDir(), "idx")
			if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
				t.Fatal(errOut)
			}
			if err := c.damage(idx); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := run(t, nil, "--index", idx, "search", "platypus")
			if code == 0 || !strings.Contains(errOut, "escurel rebuild") {
				t.Errorf("search on the damage: exit %d, want a pointer to escurel rebuild\n%s%s", code, out, errOut)
			}
			if out, errOut, code := run(t, nil, "--index", idx, "rebuild"); code != 0 {
				t.Fatalf("rebuild: exit %d\n%s%s", code, out, errOut)
			}
			out, errOut, code = run(t, nil, "--index", idx, "verify")
			if code != 0 || !strings.Contains(out, "2 documents") {
				t.Errorf("verify after the rebuild: exit %d\n%s%s", code, out, errOut)
			}
			if out, _, code := run(t, nil, "--index", idx, "search", "platypus"); code != 0 || strings.Contains(out, "no hits") {
				t.Errorf("search after the rebuild: exit %d\n%s", code, out)
			}
		})
	}
}

// recordFile returns the record file of the document at source.
func recordFile(idx, source string) string {
	return filepath.Join(idx, "blobs", "documents", blobstore.DocID(source)+".json")
}

// digestOf runs verify and returns the digest it prints.
func digestOf(t *testing.T, idx string) string {
	t.Helper()
	out, errOut, code := run(t, nil, "--index", idx, "verify")
	if code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	_, d, _ := strings.Cut(out, "digest ")
	d, _, _ = strings.Cut(d, "\n")
	return d
}

// Damaged records (issue 19, item 5: a truncated, empty or binary record
// blocked verify, rebuild and re-ingest with "decode: unexpected EOF",
// naming nothing). verify lists every damaged record by key and source
// with its repairs; re-ingesting the source repairs its record; rebuild
// restores the others from the live rows, back to the clean digest.
// Without live rows rebuild refuses with the whole list, or leaves them
// out with --allow-missing (never serving them at a level read from
// nowhere), and escurel delete DOC_ID removes one.
func TestDamagedRecordsAreListedAndRepaired(t *testing.T) {
	src := goodDocs(t)
	secret := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(secret, []byte("# Merger\n\nplatypus merger plans\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	// The loose layout's record files are damaged here; tests'
	// TestCrashAndRepairLoop damages packed records.
	if _, errOut, code := run(t, nil, "--index", idx, "--loose-blobs", "ingest", src); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", "--sensitivity", "restricted", secret); code != 0 {
		t.Fatal(errOut)
	}
	plain := filepath.Join(filepath.Dir(secret), "plain.md") // never damaged
	os.WriteFile(plain, []byte("# Plain\n\nwombat\n"), 0o600)
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", plain); code != 0 {
		t.Fatal(errOut)
	}
	clean := digestOf(t, idx)
	guide := filepath.Join(src, "guide.md")
	entries, _ := os.ReadDir(src)
	other := filepath.Join(src, entries[0].Name())
	if other == guide {
		other = filepath.Join(src, entries[1].Name())
	}
	damage := func() {
		t.Helper()
		data, err := os.ReadFile(recordFile(idx, guide))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(recordFile(idx, guide), data[:len(data)/2], 0o600) // truncated
		os.WriteFile(recordFile(idx, other), nil, 0o600)                // empty
		data, _ = os.ReadFile(recordFile(idx, secret))
		os.WriteFile(recordFile(idx, secret), []byte(strings.Replace(string(data), `"restricted"`, `"r\u00e9stricted"`, 1)), 0o600)
	}
	damage()
	out, errOut, code := run(t, nil, "--index", idx, "verify")
	if code != 1 || !strings.Contains(out, "damaged records: 3") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	for _, s := range []string{guide, other, secret} {
		if !strings.Contains(out, "documents/"+blobstore.DocID(s)+".json (source "+s+")") || !strings.Contains(out, "escurel ingest "+s) || !strings.Contains(out, "escurel delete "+blobstore.DocID(s)) {
			t.Errorf("verify does not name %s with its key and repairs:\n%s", s, out)
		}
	}
	if strings.Contains(out, "rows without records") {
		t.Errorf("a damaged record's row is listed as a row without a record:\n%s", out)
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "platypus merger"); strings.Contains(out, "secret.md") {
		t.Errorf("a public search shows the restricted document whose record is damaged:\n%s", out)
	}
	// Re-ingesting a source writes its record anew.
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", guide); code != 0 {
		t.Fatalf("re-ingest of %s: exit %d\n%s%s", guide, code, out, errOut)
	}
	if out, _, _ := run(t, nil, "--index", idx, "verify"); !strings.Contains(out, "damaged records: 2") || strings.Contains(out, "(source "+guide+")") {
		t.Errorf("verify after re-ingesting %s:\n%s", guide, out)
	}
	// Rebuild restores the others from the live rows.
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--dry-run")
	if code != 0 || !strings.Contains(out, "restore damaged record of \""+other+"\"") {
		t.Errorf("rebuild --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild")
	if code != 0 || !strings.Contains(out, "restored 2 damaged records") {
		t.Fatalf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
	if got := digestOf(t, idx); got != clean {
		t.Errorf("digest after the repair %s, want the clean %s", got, clean)
	}
	if out, _, _ := run(t, nil, "--index", idx, "search", "platypus merger"); strings.Contains(out, "secret.md") {
		t.Errorf("the restored record serves the restricted document publicly:\n%s", out)
	}

	// No live rows to restore from: refused with the whole list.
	damage()
	if err := os.WriteFile(filepath.Join(idx, "CURRENT"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild")
	if code != 1 || !strings.Contains(errOut, "3 damaged document records") {
		t.Fatalf("rebuild without live rows: exit %d\n%s%s", code, out, errOut)
	}
	for _, s := range []string{guide, secret} { // truncated, the sensitivity: the source is salvaged
		if !strings.Contains(errOut, `escurel ingest "`+s+`"`) {
			t.Errorf("rebuild's refusal does not name %s and its repair:\n%s", s, errOut)
		}
	}
	if !strings.Contains(errOut, "documents/"+blobstore.DocID(other)+".json (source unknown)") || !strings.Contains(errOut, "escurel delete "+blobstore.DocID(other)) {
		t.Errorf("rebuild's refusal does not name the empty record:\n%s", errOut)
	}
	out, errOut, code = run(t, nil, "--index", idx, "rebuild", "--allow-missing")
	if code != 0 {
		t.Fatalf("rebuild --allow-missing: exit %d\n%s%s", code, out, errOut)
	}
	for _, clearance := range []string{"public", "restricted"} {
		if out, _, _ := run(t, nil, "--index", idx, "search", "--clearance", clearance, "platypus merger"); strings.Contains(out, "secret.md") {
			t.Errorf("clearance %s: a document whose record is damaged is served:\n%s", clearance, out)
		}
	}
	// Repairs: re-ingest with a level, and delete the one whose source is lost.
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", "--sensitivity", "restricted", secret); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", guide); code != 0 {
		t.Fatal(errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "delete", blobstore.DocID(other)); code != 0 {
		t.Fatalf("delete of a damaged record: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "verify"); code != 0 || !strings.Contains(out, "3 documents") {
		t.Errorf("verify after the repairs: exit %d\n%s%s", code, out, errOut)
	}
}

// fileBytes is the size of the file at path; 0 when it cannot be read.
func fileBytes(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
