package index

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// DuckDB runs an index file's statements on one thread by default, on
// Options.DuckDBThreads when set; a negative count is refused by name.
func TestDuckDBThreads(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ opt, want int }{{0, 1}, {3, 3}} {
		ix, err := Open(ctx, t.TempDir(), &Options{DuckDBThreads: c.opt})
		if err != nil {
			t.Fatal(err)
		}
		s, err := ix.acquire()
		if err != nil {
			t.Fatal(err)
		}
		var got int
		err = s.db.QueryRowContext(ctx, `SELECT current_setting('threads')::INTEGER`).Scan(&got)
		s.unref()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("DuckDBThreads %d: DuckDB runs %d threads, want %d", c.opt, got, c.want)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(ctx, t.TempDir(), &Options{DuckDBThreads: -1})
	if err == nil || !strings.Contains(err.Error(), "DuckDB threads -1") {
		t.Errorf("DuckDBThreads -1: %v, want an error naming the setting", err)
	}
}

// A rewrite raises DuckDB's threads to GOMAXPROCS for its copy and puts
// them back to the configured count after, whether the copy succeeded or
// not.
func TestRewriteRaisesThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: []byte("# A\n\nsome text\n")}); err != nil {
		t.Fatal(err)
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		t.Fatal(err)
	}
	threads := func(conn *sql.Conn) int {
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT current_setting('threads')::INTEGER`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	restore, err := s.raiseThreads(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if n := threads(conn); n != 3 {
		t.Errorf("during a rewrite DuckDB runs %d threads, want GOMAXPROCS 3", n)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if n := threads(conn); n != 1 {
		t.Errorf("after a rewrite DuckDB runs %d threads, want the configured 1", n)
	}
	// A rewrite that fails (its destination cannot be created) puts them back too.
	if err := s.rewriteTo(ctx, filepath.Join(t.TempDir(), "missing", "x.duckdb")); err == nil {
		t.Fatal("a rewrite into a missing directory succeeded")
	}
	if n := threads(conn); n != 1 {
		t.Errorf("after a failed rewrite DuckDB runs %d threads, want the configured 1", n)
	}
	if err := s.rewriteTo(ctx, filepath.Join(t.TempDir(), "copy.duckdb")); err != nil {
		t.Fatal(err)
	}
	if n := threads(conn); n != 1 {
		t.Errorf("after a rewrite DuckDB runs %d threads, want the configured 1", n)
	}
}

// memoryBytes reads DuckDB's notation of a memory limit, both decimal
// and binary units; 0 for anything else.
func TestMemoryBytes(t *testing.T) {
	for s, want := range map[string]int64{"256MB": 256_000_000, "512KiB": 512 << 10, "1.5 GiB": 3 << 29, "2TB": 2e12, "7B": 7, "": 0, "12": 0, "1 XB": 0} {
		if got := memoryBytes(s); got != want {
			t.Errorf("memoryBytes(%q) = %d, want %d", s, got, want)
		}
	}
}
