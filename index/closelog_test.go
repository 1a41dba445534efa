package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
)

// TestKilledChild runs in a child process of TestKilledAfterLoggedClose:
// open the index in ESCUREL_KILLED_DIR, ingest or delete as told, then
// SIGKILL itself without closing.
func TestKilledChild(t *testing.T) {
	dir := os.Getenv("ESCUREL_KILLED_DIR")
	if dir == "" {
		t.Skip("a child of TestKilledAfterLoggedClose")
	}
	ctx := context.Background()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(dir, "..", "blobs")), Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	if src := os.Getenv("ESCUREL_KILLED_INGEST"); src != "" {
		mustIngest(t, ix, Input{Source: src, Data: []byte("# X\n\n" + os.Getenv("ESCUREL_KILLED_WORD") + " text\n")})
	}
	if src := os.Getenv("ESCUREL_KILLED_DELETE"); src != "" {
		if _, err := ix.Delete(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// Writes acknowledged by processes killed with SIGKILL after a Close left
// its log (closeCheckpointBytes) are all there at the next open: an
// ingest, an open that writes nothing, a delete, each killed; the image
// saved beside the first log is stale then, and the next Close saves a
// current one.
func TestKilledAfterLoggedClose(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "idx")
	opts := &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(root, "blobs")), Embedder: embed.None}
	child := func(env ...string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), append([]string{"ESCUREL_KILLED_DIR=" + dir}, env...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child: %v\n%s", err, out)
		}
	}
	ix, err := Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustIngest(t, ix, Input{Source: "/a.md", Data: []byte("# A\n\nalphaword text\n")})
	path := ix.Path()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if fileSize(path+".wal") == 0 {
		t.Fatal("Close left no log: the test proves nothing")
	}
	child("ESCUREL_KILLED_INGEST=/b.md", "ESCUREL_KILLED_WORD=betaword")
	child()
	child("ESCUREL_KILLED_DELETE=/a.md")
	for round := range 2 {
		ix, err = Open(ctx, dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := bm25Hits(t, ix, "alphaword"), bm25Hits(t, ix, "betaword"); a != 0 || b != 1 {
			t.Errorf("open %d: alphaword %d hits (deleted: want 0), betaword %d (want 1)", round+1, a, b)
		}
		if got := imageCurrent(t, ix); got != (round == 1) {
			t.Errorf("open %d: image current %v", round+1, got)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A state a switch replaced never checkpoints at its close, whatever its
// log: a rollback may already have opened its generation again in another
// DuckDB instance (review 17). Its log stays for the next open of the
// generation, which replays it.
func TestReplacedStateLeavesLog(t *testing.T) {
	foldOnClose(t) // any other close folds its log
	ctx := context.Background()
	dir := t.TempDir()
	opts := &Options{BlobURL: "mem://", Embedder: embed.None}
	ix, err := Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mustIngest(t, ix, Input{Source: "/a.md", Data: []byte("# A\n\nalphaword text\n")})
	old := ix.Path()
	if fileSize(old+".wal") == 0 {
		t.Fatal("the ingest left no log: the test proves nothing")
	}
	switchToCopy(t, ix)
	if ix.Path() == old {
		t.Fatal("no switch")
	}
	if err := ix.Close(); err != nil { // waits for the replaced state's close
		t.Fatal(err)
	}
	if fileSize(old+".wal") == 0 {
		t.Error("the replaced state's close folded its log")
	}
	// The generation's file opens with its writes (as a rollback's would).
	db, err := sql.Open("duckdb", old)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var docs int
	if err := db.QueryRow(`SELECT count(*) FROM documents`).Scan(&docs); err != nil || docs != 1 {
		t.Fatalf("the replaced generation holds %d documents (%v), want 1", docs, err)
	}
}

// switchToCopy copies the live generation's rows into a new generation
// and switches ix to it.
func switchToCopy(t *testing.T, ix *Index) {
	t.Helper()
	ctx := context.Background()
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	gen, err := ix.layout.NewGeneration()
	if err == nil {
		err = ix.cur.Load().rewriteTo(ctx, ix.layout.GenerationPath(gen))
	}
	if err == nil {
		err = ix.layout.PublishSettled(gen)
	}
	if err == nil {
		err = ix.switchTo(ctx, gen)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A rollback to a generation that a replaced state still holds open for
// a reader waits for the reader to leave (or for its ctx), so that no
// two DuckDB instances of the process have one file open.
func TestRollbackWaitsForReplacedReaders(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://", Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mustIngest(t, ix, Input{Source: "/a.md", Data: []byte("# A\n\nalphaword text\n")})
	first := ix.Generation()
	reader, err := ix.acquire() // a search still running on first
	if err != nil {
		t.Fatal(err)
	}
	left := false
	defer func() { // before ix.Close, which waits for it
		if !left {
			reader.unref()
		}
	}()
	switchToCopy(t, ix)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _, err = ix.Rollback(short, &RollbackOptions{Force: true})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "still open in this process") {
		t.Fatalf("rollback while a reader holds %s: %v, want it to wait and time out", first, err)
	}
	reader.unref()
	left = true
	if _, to, err := ix.Rollback(ctx, &RollbackOptions{Force: true}); err != nil || to != first {
		t.Fatalf("rollback once the reader left: to %s, %v; want %s", to, err, first)
	}
}

// A Close that folds its log on a full disk (a small tmpfs; skipped
// without the privilege to mount one) reports the failed checkpoint, and
// nothing is lost: once space is freed the next open replays the log.
func TestCloseFoldFailsOnFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs CAP_SYS_ADMIN): %v", err)
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	ctx := context.Background()
	dir := filepath.Join(mnt, "idx")
	opts := &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(mnt, "blobs")), Embedder: embed.None}
	docs := func(prefix string) []Input {
		var in []Input
		for i := range 50 {
			in = append(in, Input{Source: fmt.Sprintf("/%s%d.md", prefix, i), Data: []byte(fmt.Sprintf("# %s %d\n\nplatypus words %s number %d\n", prefix, i, prefix, i))})
		}
		return in
	}
	ix, err := Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustIngest(t, ix, docs("a")...)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, ix, docs("b")...)
	// Leave 256 KiB: less than the checkpoint writes.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	foldOnClose(t)
	err = ix.Close()
	if err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("Close folding its log on a full disk: %v, want the checkpoint's error", err)
	}
	t.Logf("Close on a full disk: %v", err)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, opts); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	got, err := ix.Documents(ctx)
	if err != nil || len(got) != 100 {
		t.Fatalf("after space was freed: %d documents, %v; want 100", len(got), err)
	}
	v, err := ix.Verify(ctx, nil)
	if err != nil || !v.OK() {
		t.Fatalf("verify after space was freed: %+v, %v", v, err)
	}
}
