package index

import (
	"context"
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

// memoryBytes reads DuckDB's notation of a memory limit, both decimal
// and binary units; 0 for anything else.
func TestMemoryBytes(t *testing.T) {
	for s, want := range map[string]int64{"256MB": 256_000_000, "512KiB": 512 << 10, "1.5 GiB": 3 << 29, "2TB": 2e12, "7B": 7, "": 0, "12": 0, "1 XB": 0} {
		if got := memoryBytes(s); got != want {
			t.Errorf("memoryBytes(%q) = %d, want %d", s, got, want)
		}
	}
}
