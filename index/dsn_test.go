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
