package index

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/embed"
)

// TestCheckpointWaitsForReader: DuckDB refuses a CHECKPOINT while a read
// transaction older than a committed update runs (a search, an export);
// checkpoint tries again until the reader has ended, and past
// checkpointWait returns DuckDB's error. A publish's snapshot folds first,
// so such a refusal no longer comes after its verify.
func TestCheckpointWaitsForReader(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")), Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mustIngest(t, ix, Input{Source: "/a.md", Data: []byte("# A\n\nplatypus ledger\n")})
	s, err := ix.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.unref()
	reader := func() *sql.Tx {
		t.Helper()
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blocks`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("reader: %d blocks, %v", n, err)
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE documents SET title = title || '!'`); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	defer func(w time.Duration) { checkpointWait = w }(checkpointWait)

	checkpointWait = 0
	tx := reader()
	if err := s.checkpoint(ctx); err == nil || !strings.Contains(err.Error(), "Cannot CHECKPOINT") {
		t.Fatalf("a CHECKPOINT beside an older reader, no wait: %v; want DuckDB's refusal", err)
	}
	tx.Rollback()

	checkpointWait = 10 * time.Second
	tx = reader()
	go func() { time.Sleep(300 * time.Millisecond); tx.Rollback() }()
	t0 := time.Now()
	if err := s.checkpoint(ctx); err != nil {
		t.Fatalf("a CHECKPOINT waiting for the reader: %v", err)
	}
	if d := time.Since(t0); d < 250*time.Millisecond {
		t.Fatalf("the CHECKPOINT succeeded after %v, before the reader ended: the refusal this test needs did not happen", d)
	}
	if n := fileSize(s.path + ".wal"); n != 0 {
		t.Fatalf("log of %d bytes after the checkpoint", n)
	}

	// A snapshot (publish) folds before its verify: refused, it fails
	// there ("snapshot …"), not in its copy ("copy …") after the verify.
	checkpointWait = 0
	tx = reader()
	defer tx.Rollback()
	if _, err := ix.snapshot(ctx, filepath.Join(t.TempDir(), "copy.duckdb"), ""); err == nil || !strings.HasPrefix(err.Error(), "snapshot ") || !strings.Contains(err.Error(), "Cannot CHECKPOINT") {
		t.Fatalf("a snapshot beside an older reader: %v; want its first CHECKPOINT refused", err)
	}
}
