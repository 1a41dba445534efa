package index

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// The automatic memory_limit follows DuckDB's ART indexes: with a floor
// of 1 MiB and a headroom of 48 MiB, ingesting raises it to what the indexes take plus
// the headroom (a fixed limit would leave the merges no room at 1M
// passages), never lowers it during writes, and a fixed
// Options.MemoryLimit stays as given.
func TestAutoMemoryLimit(t *testing.T) {
	saved := [3]int64{autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep}
	autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep = 1<<20, 48<<20, 1<<20
	defer func() { autoMemoryFloor, autoMemoryHeadroom, autoMemoryStep = saved[0], saved[1], saved[2] }()
	ctx := context.Background()
	for _, fixed := range []string{"", "64MB"} {
		ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://", MemoryLimit: fixed})
		if err != nil {
			t.Fatal(err)
		}
		setting := func() string {
			var v string
			if err := ix.cur.Load().db.QueryRow(`SELECT current_setting('memory_limit')`).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		opened, openLimit := setting(), ix.cur.Load().memLimit.Load()
		var limits []int64
		for b := range 4 {
			ins := make([]Input, 300)
			for i := range ins {
				ins[i] = Input{Source: fmt.Sprintf("mem://doc-%d-%d", b, i), MediaType: "text/plain",
					Data: []byte(fmt.Sprintf("passage %d of batch %d about %s", i, b, strings.Repeat(fmt.Sprintf("w%d ", i*7+b), 3)))}
			}
			if _, errs, err := ix.IngestBatch(ctx, ins); err != nil || errs[0] != nil {
				t.Fatal(err, errs[0])
			}
			if err := ix.WaitForMerges(ctx); err != nil {
				t.Fatal(err)
			}
			limits = append(limits, ix.cur.Load().memLimit.Load())
		}
		var art int64
		if err := ix.cur.Load().db.QueryRow(`SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT FROM duckdb_memory() WHERE tag = 'ART_INDEX'`).Scan(&art); err != nil {
			t.Fatal(err)
		}
		final := setting()
		ix.Close()
		if fixed != "" {
			if opened != "61.0 MiB" || final != opened || limits[3] != memoryBytes(fixed) {
				t.Errorf("MemoryLimit %s: memory_limit %q after the open, %q after the writes (automatic %d); want 61.0 MiB throughout", fixed, opened, final, limits[3])
			}
			continue
		}
		if mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }; openLimit < autoMemoryHeadroom || opened != mib(openLimit) {
			t.Errorf("memory_limit after the open of an empty index: %q (%d bytes), want the headroom and the empty tables' indexes", opened, openLimit)
		}
		if limits[3] <= openLimit {
			t.Errorf("limits %v: not raised above the open's %d by the ART indexes", limits, openLimit)
		}
		if art == 0 {
			t.Fatal("no ART index memory: the test measures nothing")
		}
		for i := 1; i < len(limits); i++ {
			if limits[i] < limits[i-1] {
				t.Errorf("limit lowered during writes: %v", limits)
			}
		}
		if last := limits[3]; last < art+autoMemoryHeadroom || last > art+autoMemoryHeadroom+autoMemoryStep+(1<<20) {
			t.Errorf("limit %d bytes for ART indexes of %d (headroom %d): want about their sum", last, art, autoMemoryHeadroom)
		}
		if want := fmt.Sprintf("%.1f MiB", float64(limits[3])/(1<<20)); final != want {
			t.Errorf("DuckDB's memory_limit %q, want %q", final, want)
		}
	}
}

// The automatic memory_limit exceeds its fit by less than 4 MiB: DuckDB's
// pool fills to the limit while it builds (rows not yet checkpointed), so
// whatever the rounding adds is resident memory (16 MiB steps rounded a
// 100k build's fit of 103.3 MiB up to 112 MiB).
func TestAutoMemoryStepSlack(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	s := ix.cur.Load()
	for _, want := range []int64{s.memLimit.Load() + 1<<20 + 1, 110_000_000, 246_000_000} { // each above the last
		if err := s.setMemory(ctx, want, false); err != nil {
			t.Fatal(err)
		}
		got := s.memLimit.Load()
		if got < want || got-want >= 4<<20 {
			t.Errorf("fit %d bytes: limit %d (%.1f MiB over), want within 4 MiB above", want, got, float64(got-want)/(1<<20))
		}
		var setting string
		if err := s.db.QueryRow(`SELECT current_setting('memory_limit')`).Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprintf("%.1f MiB", float64(got)/(1<<20)); setting != w {
			t.Errorf("DuckDB's memory_limit %q, want %q", setting, w)
		}
	}
}

// A small index's automatic limit leaves autoMemorySmallHeadroom plus its
// ART indexes besides them, up to autoMemoryHeadroom: at 100k passages
// (ART 14 MB) the full 88 MB headroom put 24 MiB into DuckDB's pool that
// the build never needed and the process kept resident (issue 16). Scaled
// (a small headroom of 8 MiB, a cap of 200), four batches end at about
// twice the ART indexes plus 8 MiB, not at the cap.
func TestSmallIndexHeadroom(t *testing.T) {
	for _, c := range []struct{ art, want int64 }{
		{0, 48 << 20}, {14 << 20, 62 << 20}, {40 << 20, 88 << 20}, {154 << 20, 88 << 20},
	} {
		if got := memoryHeadroom(c.art); got != c.want {
			t.Errorf("headroom for ART indexes of %d MiB: %d MiB, want %d", c.art>>20, got>>20, c.want>>20)
		}
	}
	saved := [4]int64{autoMemoryFloor, autoMemoryHeadroom, autoMemorySmallHeadroom, autoMemoryStep}
	autoMemoryFloor, autoMemoryHeadroom, autoMemorySmallHeadroom, autoMemoryStep = 1<<20, 200<<20, 8<<20, 1<<20
	defer func() {
		autoMemoryFloor, autoMemoryHeadroom, autoMemorySmallHeadroom, autoMemoryStep = saved[0], saved[1], saved[2], saved[3]
	}()
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for b := range 4 {
		ins := make([]Input, 300)
		for i := range ins {
			ins[i] = Input{Source: fmt.Sprintf("mem://doc-%d-%d", b, i), MediaType: "text/plain",
				Data: []byte(fmt.Sprintf("passage %d of batch %d about %s", i, b, strings.Repeat(fmt.Sprintf("w%d ", i*7+b), 3)))}
		}
		if _, errs, err := ix.IngestBatch(ctx, ins); err != nil || errs[0] != nil {
			t.Fatal(err, errs[0])
		}
		if err := ix.WaitForMerges(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := ix.cur.Load()
	art, err := s.artBytes(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if art == 0 {
		t.Fatal("no ART index memory: the test measures nothing")
	}
	limit := s.memLimit.Load()
	if lo, hi := 2*art+autoMemorySmallHeadroom-(1<<20), 2*art+autoMemorySmallHeadroom+autoMemoryStep+(1<<20); limit < lo || limit > hi {
		t.Errorf("limit %.1f MiB for ART indexes of %.1f MiB: want twice them plus the small headroom of %d MiB (%.1f to %.1f)",
			float64(limit)/(1<<20), float64(art)/(1<<20), autoMemorySmallHeadroom>>20, float64(lo)/(1<<20), float64(hi)/(1<<20))
	}
}
