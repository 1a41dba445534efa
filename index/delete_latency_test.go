package index

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/duck"
)

// BenchmarkDeleteOne times deleting one document at a time from a copy
// of an index bench-fts built (issue 16): ESCUREL_DELETE_DIR is its
// escurel directory (bench/fts -work DIR: DIR/escurel) of
// ESCUREL_DELETE_N passages (default 100000), ESCUREL_DELETE_TMP where
// the copy goes (/dev/shm leaves out the fsyncs; default the system's
// temporary directory), ESCUREL_DELETE_K how many deletes of each kind
// (default 40). It reports the p50 and p90 of Index.Delete, of the rows
// alone (the record's removal already durable) and of the blob store's
// part alone (RemoveRecord, SyncRemovals), with the rows' steps, and the
// CPU time per delete (the process's, all threads: steadier than the
// wall time on a loaded machine), and reports the p50s as metrics. It
// measures once whatever b.N is (run it with -benchtime 1x), and skips
// without ESCUREL_DELETE_DIR. It searches once first, as a server has
// (its hits' table of documents is then loaded, and a delete reads it
// rather than the rows); ESCUREL_DELETE_COLD=1 leaves that out (a CLI
// delete).
func BenchmarkDeleteOne(b *testing.B) {
	t := b
	src := os.Getenv("ESCUREL_DELETE_DIR")
	if src == "" {
		t.Skip("ESCUREL_DELETE_DIR (a bench-fts escurel index directory) not set")
	}
	n := envInt(t, "ESCUREL_DELETE_N", 100000)
	k := envInt(t, "ESCUREL_DELETE_K", 40)
	tmp, err := os.MkdirTemp(os.Getenv("ESCUREL_DELETE_TMP"), "dl-latency-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "escurel")
	t0 := time.Now()
	if err := copyTree(src, dir); err != nil {
		t.Fatal(err)
	}
	// The copy's dirty pages written back now, not under the timed
	// deletes' fsyncs (at 1M passages, 2.8 GB: delete p50 3.3-8.6 ms
	// from run to run without this).
	if err := exec.Command("sync").Run(); err != nil {
		t.Logf("sync after the copy: %v", err)
	}
	t.Logf("copied %s to %s in %v", src, dir, time.Since(t0).Round(time.Millisecond))
	ctx := context.Background()
	ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if os.Getenv("ESCUREL_DELETE_COLD") != "1" {
		for range hitDocsLoadAfter {
			if hits, err := ix.Search(ctx, "file", nil); err != nil || len(hits) == 0 {
				t.Fatal(hits, err)
			}
		}
		if s := ix.cur.Load(); !s.hitDocs.isLoaded() {
			t.Fatal("the search did not load the table of documents")
		}
	}
	// Passages p0 … p(n-1) are documents bench://pN; take them spread out,
	// away from the ones bench-fts deletes (n/2 to n/2 + 20, then
	// n/2 + 21 + round with -writes).
	next := 0
	name := func() string {
		next++
		return "bench://p" + strconv.Itoa((n/7+next*997)%n)
	}
	// Warm up: the first write of a state loads what it needs.
	if _, err := ix.Delete(ctx, name()); err != nil {
		t.Fatal(err)
	}
	whole := make([]time.Duration, k)
	cpu0 := cpuTime()
	for i := range whole {
		nm := name()
		t0 := time.Now()
		if _, err := ix.Delete(ctx, nm); err != nil {
			t.Fatal(err)
		}
		whole[i] = time.Since(t0)
	}
	cpuWhole := (cpuTime() - cpu0) / time.Duration(k)
	rows := make([]time.Duration, k)
	blobs := make([]time.Duration, k)
	var steps [6][]time.Duration
	var cpuSteps [6]time.Duration
	var cpuBlobs time.Duration
	for j := range steps {
		steps[j] = make([]time.Duration, k)
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s := ix.cur.Load()
	for i := range rows {
		id := blobstore.DocID(name())
		t0, c0 := time.Now(), cpuTime()
		if err := s.blobs.RemoveRecord(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := s.blobs.SyncRemovals(); err != nil {
			t.Fatal(err)
		}
		blobs[i] = time.Since(t0)
		cpuBlobs += cpuTime() - c0
		// The rows, step by step as deleteDocs and deleteCommit take them.
		t0, c0 = time.Now(), cpuTime()
		lap := func(j int) {
			now, c := time.Now(), cpuTime()
			steps[j][i] = now.Sub(t0)
			cpuSteps[j] += c - c0
			t0, c0 = now, c
		}
		tx, err := duck.Begin(ctx, s.db)
		if err != nil {
			t.Fatal(err)
		}
		lap(0)
		docs, known := s.hitDocs.docRanges([]any{id})
		if known {
			err = deleteDocumentRows(ctx, tx, []any{id}, len(docs))
		} else {
			docs, err = deleteDocuments(ctx, tx, []any{id})
		}
		if err != nil || len(docs) != 1 {
			t.Fatal(len(docs), err)
		}
		lap(1)
		del, err := s.deleteDocRows(ctx, tx, []any{id}, docs)
		if err != nil {
			t.Fatal(err)
		}
		lap(2)
		rm, err := s.fts.Remove(ctx, tx, del.blocks)
		if err != nil {
			t.Fatal(err)
		}
		lap(3)
		gone := blockIDs(del.blocks)
		if err := s.fts.CommitWith(ctx, tx, func() {
			s.applyDense(nil, gone)
			s.applyLanguages(del.langs)
			s.texts.apply(-del.texts)
			s.metaChanged(del.docs)
			s.pub.apply(nil, nil, gone)
			s.docs.apply(nil, del.docs)
			s.hitDocs.apply(nil, del.docs)
		}, rm); err != nil {
			t.Fatal(err)
		}
		lap(4)
		if err := s.fts.Maintain(ctx, s.db, 0); err != nil {
			t.Fatal(err)
		}
		lap(5)
		for j := range 6 {
			rows[i] += steps[j][i]
		}
	}
	var cpuRows time.Duration
	for _, c := range cpuSteps {
		cpuRows += c
	}
	per := func(d time.Duration) time.Duration { return d / time.Duration(k) }
	for _, m := range []struct {
		what string
		ds   []time.Duration
		cpu  time.Duration // per delete, all threads
	}{{"Delete", whole, cpuWhole}, {"rows only", rows, per(cpuRows)}, {"blob store only", blobs, per(cpuBlobs)},
		{"  begin", steps[0], per(cpuSteps[0])}, {"  documents", steps[1], per(cpuSteps[1])}, {"  blocks", steps[2], per(cpuSteps[2])},
		{"  fts.Remove", steps[3], per(cpuSteps[3])}, {"  commit", steps[4], per(cpuSteps[4])}, {"  maintain", steps[5], per(cpuSteps[5])}} {
		p50, p90 := quantile(m.ds, 50), quantile(m.ds, 90)
		t.Logf("%-16s p50 %6.2f ms  p90 %6.2f ms  CPU %6.2f ms  (%d deletes)", m.what, ms(p50), ms(p90), ms(m.cpu), len(m.ds))
	}
	b.ReportMetric(ms(quantile(whole, 50)), "delete-p50-ms")
	b.ReportMetric(ms(cpuWhole), "delete-cpu-ms")
	b.ReportMetric(ms(quantile(rows, 50)), "rows-p50-ms")
	b.ReportMetric(ms(quantile(blobs, 50)), "blobs-p50-ms")
}

func envInt(t testing.TB, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

func quantile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// copyTree copies the directory src to dst (regular files and
// directories; the lock file too, unlocked).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		// Synced, so that the copy's writeback (2.8 GB at 1M) is not
		// still competing with the deletes timed after it.
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// TestDeleteStatementsUseKeys checks, within its transaction, every
// statement with which a delete and a replace delete rows (seeDelete),
// and fails when one would read its table other than by its key. DuckDB
// chooses an ART lookup as the scan starts, so the plan to read is
// EXPLAIN ANALYZE's, of a SELECT of the row ids with the statement's
// table and condition (the DELETE's scan; running the DELETE itself would
// take its rows): every scan must be an ART lookup (Index Scan), or a
// sequential scan with a block_id range pushed into it (zone maps skip
// the other row groups; blocks and vectors are in block_id order). It
// covers documents by doc id (one and two), blocks and vectors by one
// block id and by ranges, and document_text by doc id, so a delete's
// cost does not grow with the index (issue 16). The doc-id scan that a
// row without a block range falls back to is not on these paths. It runs
// cold (the documents rows read as they are deleted, RETURNING) and warm
// (a search loaded the in-memory table: the documents rows deleted by key,
// nothing read back), and checks after each delete that no row of the
// documents is left in any table and that the table equals the rows.
func TestDeleteStatementsUseKeys(t *testing.T) {
	for _, warm := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "warm"}[warm], func(t *testing.T) { testDeleteStatementsUseKeys(t, warm) })
	}
}

func testDeleteStatementsUseKeys(t *testing.T, warm bool) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	for i := range 6 {
		ins = append(ins, Input{Source: fmt.Sprintf("/m%d.md", i), Data: []byte(fmt.Sprintf(
			"# Doc %d\n\napples %d\n\n## Part\n\npears %d\n", i, i, i))})
	}
	ins = append(ins, Input{Source: "/one.md", Data: []byte("plums\n")},
		Input{Source: "/h.html", Data: []byte("<html><body><p>guavas</p></body></html>")})
	if _, errs, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	} else {
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if warm {
		for range hitDocsLoadAfter {
			if _, err := ix.Search(ctx, "apples", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]bool{}
	defer func() { seeDelete = nil }()
	seeDelete = func(ctx context.Context, tx *duck.Tx, query string, args []any) {
		rest, ok := strings.CutPrefix(query, "DELETE FROM ")
		table, cond, ok2 := strings.Cut(rest, " WHERE ")
		if !ok || !ok2 {
			t.Errorf("not a DELETE … WHERE: %s", query)
			return
		}
		if i := strings.Index(cond, "RETURNING "); i >= 0 {
			cond = cond[:i]
			if table == "documents" && warm {
				t.Errorf("warm: the documents rows read back: %s", query)
			}
		} else if table == "documents" && !warm {
			t.Errorf("cold: the documents rows not read back: %s", query)
		}
		kind := table
		switch {
		case strings.Contains(cond, "block_id = "):
			kind += " ="
		case strings.Contains(cond, "BETWEEN"):
			kind += " BETWEEN"
		case strings.Count(cond, "?") > 1:
			kind += " IN list"
		}
		seen[kind] = true
		rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) SELECT rowid FROM "+table+" WHERE "+cond, args...)
		if err != nil {
			t.Errorf("explain %s: %v", query, err)
			return
		}
		defer rows.Close()
		var plan strings.Builder
		for rows.Next() {
			var kind, text string
			if err := rows.Scan(&kind, &text); err != nil {
				t.Error(err)
			}
			plan.WriteString(text)
		}
		if bad := scanProblem(plan.String()); bad != "" {
			t.Errorf("%s: %s:\n%s", query, bad, plan.String())
		}
	}
	left := func(names ...string) {
		t.Helper()
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.unref()
		for _, name := range names {
			id := blobstore.DocID(name)
			var n int
			if err := s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM documents WHERE doc_id = $1) + (SELECT count(*) FROM blocks WHERE doc_id = $1)
				+ (SELECT count(*) FROM document_text WHERE doc_id = $1)
				+ (SELECT count(*) FROM vectors_1 WHERE block_id NOT IN (SELECT block_id FROM blocks))`, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%s: %d rows left after its delete", name, n)
			}
		}
		if warm {
			if err := CheckDocTable(ctx, ix); err != nil {
				t.Error(err)
			}
		}
	}
	del := func(names ...string) {
		t.Helper()
		if _, err := ix.Delete(ctx, names...); err != nil {
			t.Fatal(err)
		}
		left(names...)
	}
	del("/m0.md")           // a range of blocks
	del("/one.md")          // one block
	del("/m2.md", "/m4.md") // two documents, two ranges
	del("/h.html")          // document_text
	if _, _, err := ix.IngestBatch(ctx, []Input{{Source: "/m1.md", Data: []byte("# Doc 1\n\nchanged\n\n## Part\n\nagain\n")}}); err != nil {
		t.Fatal(err)
	}
	if warm {
		if err := CheckDocTable(ctx, ix); err != nil {
			t.Error(err)
		}
	}
	del("/m1.md") // the replaced document's new rows
	for _, want := range []string{"documents", "documents IN list", "blocks =", "blocks BETWEEN", "vectors_1 =", "vectors_1 BETWEEN", "document_text"} {
		if !seen[want] {
			t.Errorf("no statement on %s checked; seen %v", want, seen)
		}
	}
}

// scanProblem returns why plan (EXPLAIN (ANALYZE, FORMAT JSON)) reads
// a table other than by its key, or "".
func scanProblem(plan string) string {
	type node struct {
		Type     string         `json:"operator_type"`
		Extra    map[string]any `json:"extra_info"` // strings, or lists of them (a FILTER's expressions)
		Scanned  int64          `json:"operator_rows_scanned"`
		Children []node         `json:"children"`
	}
	var root node
	if err := json.Unmarshal([]byte(plan), &root); err != nil {
		return "plan: " + err.Error()
	}
	scans, empty := 0, false // empty: DuckDB knew from statistics that nothing matches
	var problem string
	var walk func(n node)
	walk = func(n node) {
		empty = empty || n.Type == "EMPTY_RESULT"
		if n.Type == "TABLE_SCAN" {
			scans++
			f := fmt.Sprint(n.Extra["Filters"])
			switch typ := fmt.Sprint(n.Extra["Type"]); {
			case typ == "Index Scan":
			case typ == "Sequential Scan" && strings.Contains(f, "block_id>=") && strings.Contains(f, "block_id<="):
			default:
				problem = fmt.Sprintf("%s of %s (filters %q, %d rows scanned): neither an ART lookup nor a block_id range",
					typ, n.Extra["Table"], f, n.Scanned)
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(root)
	if problem == "" && scans == 0 && !empty {
		return "no table scan"
	}
	return problem
}
