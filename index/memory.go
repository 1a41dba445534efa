package index

// The automatic DuckDB memory_limit (Options.MemoryLimit empty): the
// values it starts from and follows, and how a state fits it.

import (
	"context"
	"fmt"
)

// defaultMemoryBytes is DefaultMemoryLimit in bytes (DuckDB's MB is 10^6).
const defaultMemoryBytes = 256_000_000

// The automatic memory_limit. DuckDB's ART indexes stay in its pool while
// the file is open and grow with it: 14-17 MB at 100k passages, 37-44 MB
// at 300k, so about 140 MB at 1M, where a fixed 128MB failed a build's
// full-text merge ("failed to pin block", 122 of 122 MiB used) and 256MB
// passed. Everything else a write
// needs (a merge's term range sorted, a batch's rows, the appenders) fits
// in autoMemoryHeadroom: a 100k build passed at 64MB (ART 14 MB), a 300k
// build at 128MB (ART 44 MB: 84 MB besides) but not at 96MB (its last
// merge failed with ART 41 MB: 55 MB besides). The rest of the pool
// (rows not yet checkpointed, cached blocks) is what a lower limit takes
// from the process's RSS: at 100k passages a build peaked at 451 MB over
// bench-fts' baseline at a floor of 256 MiB, 331-336 MB at 128 MiB (a
// headroom of 112 MB), 318 MB at 112 MiB (this headroom). Reads need
// room too, and got it by reading in bounded pieces (chunks.go): with the
// floor at 128 MiB, a live rebuild of 100k passages failed its verify
// ("failed to pin block", 143.8 of 144.0 MiB used): one sorted read of
// every block's text, which failed at 144 MiB with nothing else in the
// pool. Verify, export, ForEachBlock and embedMissing now read in ranges
// of doc ids or pages of block ids; at 100k passages and 112 MiB a
// rebuild with its verify, verify and export passed. The floor only
// matters below about 50k passages. Variables for tests.
var (
	autoMemoryFloor    int64 = 96 << 20
	autoMemoryHeadroom int64 = 88 << 20
	autoMemoryStep     int64 = 16 << 20 // the limit moves in steps of this
)

// maintain runs the full-text merges a write calls for
// (fts.Index.Maintain), with the automatic memory_limit first fitted to
// the indexes the write grew.
func (s *state) maintain(ctx context.Context) error {
	if err := s.fitMemory(ctx, 1, false); err != nil {
		return err
	}
	return s.fts.Maintain(ctx, s.db, 0)
}

// fitMemory sets an automatic memory_limit (Options.MemoryLimit empty;
// otherwise it does nothing) to what DuckDB's ART indexes take now, times
// copies (2 while a rewrite builds a copy's), plus autoMemoryHeadroom; at
// least autoMemoryFloor, rounded up to autoMemoryStep. It raises the
// limit; with lower (after an open, at DefaultMemoryLimit) it may lower
// it too, and where DuckDB cannot release what it holds, the higher limit
// stays. Errors: reading DuckDB's memory, or raising the limit.
func (s *state) fitMemory(ctx context.Context, copies int64, lower bool) error {
	if !s.memAuto {
		return nil
	}
	var art int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT FROM duckdb_memory() WHERE tag = 'ART_INDEX'`).Scan(&art); err != nil {
		return fmt.Errorf("memory limit of %s: %w", s.path, err)
	}
	want := max(autoMemoryFloor, copies*art+autoMemoryHeadroom)
	want = (want + autoMemoryStep - 1) / autoMemoryStep * autoMemoryStep
	cur := s.memLimit.Load()
	if want == cur || (want < cur && !lower) {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(`SET memory_limit = '%dKiB'`, want>>10)); err != nil {
		if want < cur {
			return nil // DuckDB holds more than want: the limit it has stays
		}
		return fmt.Errorf("memory limit of %s: raise to %d MiB: %w", s.path, want>>20, err)
	}
	s.memLimit.Store(want)
	return nil
}
