package index

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
)

// fixClock makes ix record one ingestion time, so that two indexes of the
// same files have equal rows (Verify's digest covers ingested_at).
func fixClock(ix *Index) {
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	now := func() time.Time { return t0 }
	ix.cfg.now = now
	ix.cur.Load().now = now
}

func openFixed(t *testing.T) *Index {
	t.Helper()
	ix, err := Open(context.Background(), t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	fixClock(ix)
	return ix
}

// snapshot is what must be equal between a synced index and a fresh ingest
// of the same folder: the digest of every derived row, the document list
// (with bytes) and the records (with the files' sizes and times).
type snapshot struct {
	Digest    string
	Documents []DocumentInfo
	Records   string
}

func snap(t *testing.T, ix *Index) snapshot {
	t.Helper()
	ctx := context.Background()
	v, err := ix.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Fatalf("verify: %+v", v)
	}
	var s snapshot
	s.Digest = v.Digest
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Clearance: Restricted}) {
		if err != nil {
			t.Fatal(err)
		}
		s.Documents = append(s.Documents, d)
	}
	recs, err := ix.blobs.Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(recs)
	s.Records = string(b)
	return s
}

// checkFresh fails unless ix equals a fresh index of dir.
func checkFresh(t *testing.T, ix *Index, dir, step string) {
	t.Helper()
	fresh := openFixed(t)
	if _, err := fresh.IngestFiles(context.Background(), []string{dir}, IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	got, want := snap(t, ix), snap(t, fresh)
	if got.Digest != want.Digest {
		t.Errorf("%s: digest %s, a fresh ingest %s", step, got.Digest, want.Digest)
	}
	if !reflect.DeepEqual(got.Documents, want.Documents) {
		t.Errorf("%s: documents\n%+v\na fresh ingest\n%+v", step, got.Documents, want.Documents)
	}
	if got.Records != want.Records {
		t.Errorf("%s: records\n%s\na fresh ingest\n%s", step, got.Records, want.Records)
	}
}

func writeFile(t *testing.T, path, data string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, ix *Index, dir string, opts *SyncOptions) SyncSummary {
	t.Helper()
	sum, err := ix.Sync(context.Background(), []string{dir}, opts)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if len(sum.Ingest.Failed) > 0 {
		t.Fatalf("sync: failed %v", sum.Ingest.Failed[0].Err)
	}
	return sum
}

func checkPlan(t *testing.T, step string, got SyncPlan, add, change, del []string, unchanged, touched int) {
	t.Helper()
	norm := func(l []string) []string {
		if len(l) == 0 {
			return nil
		}
		return l
	}
	if !reflect.DeepEqual(norm(got.Add), norm(add)) || !reflect.DeepEqual(norm(got.Change), norm(change)) ||
		!reflect.DeepEqual(norm(got.Delete), norm(del)) || got.Unchanged != unchanged || got.Touched != touched {
		t.Errorf("%s: plan %+v, want add %v change %v delete %v unchanged %d touched %d", step, got, add, change, del, unchanged, touched)
	}
}

// After each sync (files added, changed, renamed, deleted, touched), the
// index equals a fresh ingest of the folder: the same rows, documents and
// records.
func TestSyncEqualsFreshIngest(t *testing.T) {
	ctx := context.Background()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "docs")
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(dir, "a.md"), "# Alpha\n\nalpha text\n", t0)
	writeFile(t, filepath.Join(dir, "b.md"), "# Beta\n\nbeta text\n", t0)
	writeFile(t, filepath.Join(dir, "sub", "c.txt"), "gamma text\n", t0)
	writeFile(t, filepath.Join(dir, "secret.md"), "---\nsensitivity: restricted\n---\n# Secret\n\nthe plan\n", t0)
	writeFile(t, filepath.Join(dir, ".hidden.md"), "# Hidden\n", t0)
	writeFile(t, filepath.Join(dir, "x.bin"), "binary", t0)
	src := func(rel string) string { return filepath.ToSlash(filepath.Join(dir, rel)) }

	ix := openFixed(t)
	sum := syncDir(t, ix, dir, nil)
	checkPlan(t, "first", sum.Plan, []string{src("a.md"), src("b.md"), src("secret.md"), src("sub/c.txt")}, nil, nil, 0, 0)
	if sum.Ingest.Added != 4 || len(sum.Ingest.Skipped) != 2 || sum.Elapsed <= 0 {
		t.Errorf("first: %+v", sum.Ingest)
	}
	checkFresh(t, ix, dir, "first")

	sum = syncDir(t, ix, dir, nil)
	checkPlan(t, "again", sum.Plan, nil, nil, nil, 4, 0)

	// Change a (and its size), add d, rename b to b2, delete c, change
	// the secret without saying its sensitivity again.
	t1 := t0.Add(time.Hour)
	writeFile(t, filepath.Join(dir, "a.md"), "# Alpha\n\nalpha text, longer now\n", t1)
	writeFile(t, filepath.Join(dir, "d.md"), "# Delta\n\ndelta\n", t1)
	writeFile(t, filepath.Join(dir, "sub", "e.txt"), "epsilon text\n", t1) // sub/ keeps a file: not a vanished directory
	if err := os.Rename(filepath.Join(dir, "b.md"), filepath.Join(dir, "b2.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "sub", "c.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "secret.md"), "---\nsensitivity: restricted\n---\n# Secret\n\nthe new plan\n", t1)

	before := snap(t, ix)
	dry, err := ix.Sync(ctx, []string{dir}, &SyncOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	wantAdd, wantChange, wantDel := []string{src("b2.md"), src("d.md"), src("sub/e.txt")}, []string{src("a.md"), src("secret.md")}, []string{src("b.md"), src("sub/c.txt")}
	checkPlan(t, "dry run", dry.Plan, wantAdd, wantChange, wantDel, 0, 0)
	if after := snap(t, ix); !reflect.DeepEqual(after, before) {
		t.Errorf("a dry run changed the index")
	}

	sum = syncDir(t, ix, dir, nil)
	checkPlan(t, "second", sum.Plan, wantAdd, wantChange, wantDel, 0, 0)
	if len(sum.Deleted) != 2 || sum.Ingest.Added != 3 || sum.Ingest.Replaced != 2 {
		t.Errorf("second: deleted %v, ingest %+v", sum.Deleted, sum.Ingest)
	}
	checkFresh(t, ix, dir, "second")
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Clearance: Restricted, SourcePrefix: src("secret.md")}) {
		if err != nil || d.Sensitivity != Restricted {
			t.Errorf("secret after a change: %+v, %v", d, err)
		}
	}

	// Touched: a new time, the same bytes. Nothing is re-derived; the
	// time is recorded, so the next sync reads nothing.
	t2 := t1.Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "a.md"), t2, t2); err != nil {
		t.Fatal(err)
	}
	sum = syncDir(t, ix, dir, nil)
	checkPlan(t, "touched", sum.Plan, nil, nil, nil, 5, 1)
	checkFresh(t, ix, dir, "touched")
	sum = syncDir(t, ix, dir, nil)
	checkPlan(t, "after touch", sum.Plan, nil, nil, nil, 5, 0)

	// A hidden file ingested by name is under dir and exists: it stays.
	if _, err := ix.IngestFiles(ctx, []string{filepath.Join(dir, ".hidden.md")}, IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	sum = syncDir(t, ix, dir, nil)
	checkPlan(t, "hidden", sum.Plan, nil, nil, nil, 6, 0)
	if _, err := ix.Delete(ctx, src(".hidden.md")); err != nil {
		t.Fatal(err)
	}

	// The directory vanishes (an unmounted disk): refused, nothing changed.
	moved := filepath.Join(root, "elsewhere")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	before = snap(t, ix)
	for _, dry := range []bool{true, false} {
		_, err = ix.Sync(ctx, []string{dir}, &SyncOptions{DryRun: dry})
		if !errors.Is(err, ErrDeleteAll) {
			t.Fatalf("vanished dir, dry run %v: %v, want ErrDeleteAll", dry, err)
		}
	}
	if after := snap(t, ix); !reflect.DeepEqual(after, before) {
		t.Errorf("a refused sync changed the index")
	}
	// An empty directory (the mount point without its disk): refused too.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err = ix.Sync(ctx, []string{dir}, nil); !errors.Is(err, ErrDeleteAll) {
		t.Fatalf("empty dir: %v, want ErrDeleteAll", err)
	}
	sum, err = ix.Sync(ctx, []string{dir}, &SyncOptions{AllowDeleteAll: true})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, "delete all", sum.Plan, nil, nil, []string{src("a.md"), src("b2.md"), src("d.md"), src("secret.md"), src("sub/e.txt")}, 0, 0)
	checkFresh(t, ix, dir, "delete all")
}

// Re-syncing a changed file keeps the sensitivity it was ingested with,
// and an over-cap file is read once the cap allows it.
func TestSyncKeepsSensitivityAndCap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(dir, "a.md"), "# A\n\nalpha\n", t0)
	writeFile(t, filepath.Join(dir, "big.md"), "# Big\n\nbigger than the cap\n", t0)
	ix := openFixed(t)
	if _, err := ix.IngestFiles(ctx, []string{filepath.Join(dir, "a.md")}, IngestOptions{Sensitivity: Restricted}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "a.md"), "# A\n\nalpha changed\n", t0.Add(time.Minute))
	sum, err := ix.Sync(ctx, []string{dir}, &SyncOptions{IngestOptions: IngestOptions{MaxFileBytes: 24}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Ingest.Replaced != 1 || len(sum.Ingest.Failed) != 1 {
		t.Fatalf("sync: %+v", sum.Ingest)
	}
	var got []DocumentInfo
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Clearance: Restricted}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if len(got) != 2 || got[0].Sensitivity != Restricted || got[1].Status != StatusFailed {
		t.Fatalf("documents: %+v", got)
	}
	// Unchanged files, the same cap: nothing read.
	sum, err = ix.Sync(ctx, []string{dir}, &SyncOptions{IngestOptions: IngestOptions{MaxFileBytes: 24}})
	if err != nil || sum.Plan.Unchanged != 2 {
		t.Fatalf("again: %+v, %v", sum.Plan, err)
	}
	// A cap that lets big.md through: read now.
	sum, err = ix.Sync(ctx, []string{dir}, nil)
	if err != nil || len(sum.Plan.Change) != 1 || sum.Ingest.Replaced != 1 {
		t.Fatalf("larger cap: %+v, %+v, %v", sum.Plan, sum.Ingest, err)
	}
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Status: StatusFailed, Clearance: Restricted}) {
		t.Errorf("still failed: %+v, %v", d, err)
	}
}

// publicHits is how many hits a public caller gets for query.
func publicHits(t *testing.T, ix *Index, query string) int {
	t.Helper()
	hits, err := ix.Search(context.Background(), query, &SearchOptions{Clearance: Public})
	if err != nil {
		t.Fatal(err)
	}
	return len(hits)
}

// A file renamed under a synced directory keeps the sensitivity its old
// document was given by the ingest option: its bytes are that blob's.
func TestSyncRenameKeepsSensitivity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(dir, "salaries.txt"), "zqsalary of the CEO is large\n", t0)
	writeFile(t, filepath.Join(dir, "menu.txt"), "lentil soup\n", t0)
	ix := openFixed(t)
	if _, err := ix.IngestFiles(ctx, []string{filepath.Join(dir, "salaries.txt")}, IngestOptions{Sensitivity: Restricted}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.IngestFiles(ctx, []string{filepath.Join(dir, "menu.txt")}, IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "salaries.txt"), filepath.Join(dir, "salaries-2025.txt")); err != nil {
		t.Fatal(err)
	}
	// A copy of a public file under a new name stays public.
	writeFile(t, filepath.Join(dir, "menu-copy.txt"), "lentil soup\n", t0)
	sum := syncDir(t, ix, dir, nil)
	src := func(rel string) string { return filepath.ToSlash(filepath.Join(dir, rel)) }
	checkPlan(t, "rename", sum.Plan, []string{src("menu-copy.txt"), src("salaries-2025.txt")}, nil, []string{src("salaries.txt")}, 1, 0)
	if !reflect.DeepEqual(sum.Plan.Raised, []string{src("salaries-2025.txt")}) {
		t.Errorf("raised %v", sum.Plan.Raised)
	}
	if n := publicHits(t, ix, "zqsalary"); n != 0 {
		t.Errorf("after a rename and a sync, a public search finds the restricted text (%d hits)", n)
	}
	if n := publicHits(t, ix, "lentil"); n != 2 {
		t.Errorf("public hits for the public text: %d, want 2", n)
	}
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Clearance: Restricted, SourcePrefix: src("salaries-2025.txt")}) {
		if err != nil || d.Sensitivity != Restricted {
			t.Errorf("renamed: %+v, %v", d, err)
		}
	}
}

// A subdirectory that vanishes for one sync (an unmounted share, a
// directory moved away and back) is refused like a vanished DIR: its
// documents keep their records, and so their sensitivity.
func TestSyncVanishedSubdir(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	docs := filepath.Join(root, "docs")
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(docs, "pub", "a.txt"), "public lentils\n", t0)
	writeFile(t, filepath.Join(docs, "hr", "deep", "s.txt"), "zqsalary data\n", t0)
	writeFile(t, filepath.Join(docs, "hr", "t.txt"), "zqbonus data\n", t0)
	ix := openFixed(t)
	if _, err := ix.IngestFiles(ctx, []string{filepath.Join(docs, "pub")}, IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.IngestFiles(ctx, []string{filepath.Join(docs, "hr")}, IngestOptions{Sensitivity: Restricted}); err != nil {
		t.Fatal(err)
	}
	away := filepath.Join(root, "hr-unmounted")
	if err := os.Rename(filepath.Join(docs, "hr"), away); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		sum, err := ix.Sync(ctx, []string{docs}, &SyncOptions{DryRun: dry})
		if !errors.Is(err, ErrDeleteAll) {
			t.Fatalf("vanished subdirectory, dry run %v: %v (plan %+v), want ErrDeleteAll", dry, err, sum.Plan)
		}
		if !strings.Contains(err.Error(), filepath.Join(docs, "hr")+" is missing") {
			t.Errorf("the error does not name the directory: %v", err)
		}
	}
	// The mount point without its share: an empty directory, refused too.
	if err := os.Mkdir(filepath.Join(docs, "hr"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Sync(ctx, []string{docs}, nil); !errors.Is(err, ErrDeleteAll) {
		t.Fatalf("empty subdirectory: %v, want ErrDeleteAll", err)
	}
	// Only the deeper directory gone: refused as well.
	if err := os.Remove(filepath.Join(docs, "hr")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, filepath.Join(docs, "hr")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(docs, "hr", "deep"), away); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Sync(ctx, []string{docs}, nil); !errors.Is(err, ErrDeleteAll) {
		t.Fatalf("vanished deeper directory: %v, want ErrDeleteAll", err)
	}
	if err := os.Rename(away, filepath.Join(docs, "hr", "deep")); err != nil {
		t.Fatal(err)
	}
	sum := syncDir(t, ix, docs, nil)
	if len(sum.Plan.Add)+len(sum.Plan.Change)+len(sum.Plan.Delete) != 0 {
		t.Errorf("back: plan %+v", sum.Plan)
	}
	if n := publicHits(t, ix, "zqsalary"); n != 0 {
		t.Errorf("restricted text now public (%d hits)", n)
	}
	// Gone for good: deleted when the operator says so.
	if err := os.RemoveAll(filepath.Join(docs, "hr")); err != nil {
		t.Fatal(err)
	}
	sum, err := ix.Sync(ctx, []string{docs}, &SyncOptions{AllowDeleteAll: true})
	if err != nil || len(sum.Deleted) != 2 {
		t.Fatalf("allowed: %+v, %v", sum, err)
	}
}

// sync --sensitivity never lowers a document's level without
// AllowDowngrade.
func TestSyncRefusesDowngrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(dir, "s.txt"), "zqsalary data\n", t0)
	ix := openFixed(t)
	if _, err := ix.IngestFiles(ctx, []string{dir}, IngestOptions{Sensitivity: Restricted}); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		_, err := ix.Sync(ctx, []string{dir}, &SyncOptions{IngestOptions: IngestOptions{Sensitivity: Internal}, DryRun: dry})
		if !errors.Is(err, ErrDowngrade) {
			t.Fatalf("dry run %v: %v, want ErrDowngrade", dry, err)
		}
	}
	if n := publicHits(t, ix, "zqsalary"); n != 0 {
		t.Fatalf("public hits %d", n)
	}
	// Raising needs no flag.
	syncDir(t, ix, dir, &SyncOptions{IngestOptions: IngestOptions{Sensitivity: Restricted}})
	sum := syncDir(t, ix, dir, &SyncOptions{IngestOptions: IngestOptions{Sensitivity: Public}, AllowDowngrade: true})
	if sum.Ingest.Replaced != 1 || publicHits(t, ix, "zqsalary") != 1 {
		t.Errorf("allowed downgrade: %+v", sum.Ingest)
	}
}

// Sync deletes only documents a file walk stored: an upload whose source
// looks like a path under the directory is left alone, and listed.
func TestSyncLeavesUploads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, filepath.Join(dir, "real.md"), "# Real\n\nA real file.\n", t0)
	ix := openFixed(t)
	if _, err := ix.IngestFiles(ctx, []string{dir}, IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	up := filepath.ToSlash(filepath.Join(dir, "uploaded.md")) // as POST /v1/ingest?source=… would
	if _, err := ix.Ingest(ctx, Input{Source: up, Data: []byte("# Up\n\nUploaded over HTTP, no file.\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, Input{Source: filepath.ToSlash(filepath.Join(dir, "sub", "up2.md")), Data: []byte("# Up2\n\nno file either\n")}); err != nil {
		t.Fatal(err)
	}
	sum := syncDir(t, ix, dir, nil)
	if len(sum.Deleted) > 0 || len(sum.Plan.Delete) > 0 {
		t.Errorf("sync deleted uploads that never came from a file: %v", sum.Plan.Delete)
	}
	if len(sum.Plan.NotFromFiles) != 2 || sum.Plan.NotFromFiles[1] != up {
		t.Errorf("not from files: %v", sum.Plan.NotFromFiles)
	}
	if _, err := ix.blobs.GetRecord(ctx, blobstore.DocID(up)); err != nil {
		t.Errorf("the upload's record: %v", err)
	}
}
