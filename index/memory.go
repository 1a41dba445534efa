package index

// The automatic DuckDB memory_limit (Options.MemoryLimit empty): the
// values it starts from and follows, and how a state fits it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
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
// headroom of 112 MB), 318 MB at 112 MiB (this headroom, rounded up to
// 16 MiB then), 291-322 MB at 104 MiB (4 MiB steps, with merges
// appending 1 MiB slices; 311-347 before, eight alternating pairs); the
// build's own peak 370-416 MB at 104 MiB (median 392), 342-380 at 80
// (memoryHeadroom; median 358, nine alternating pairs). Reads need
// room too, and got it by reading in bounded pieces (chunks.go): with the
// floor at 128 MiB, a live rebuild of 100k passages failed its verify
// ("failed to pin block", 143.8 of 144.0 MiB used): one sorted read of
// every block's text, which failed at 144 MiB with nothing else in the
// pool. Verify, export, ForEachBlock and embedMissing now read in ranges
// of doc ids or pages of block ids; at 100k passages and 112 MiB a
// rebuild with its verify, verify and export passed.
//
// What a write needs besides the ART indexes grows with the index (its
// merges' segments), so a smaller index gets less: the headroom is
// autoMemorySmallHeadroom plus the ART indexes, up to autoMemoryHeadroom
// (memoryHeadroom), which it reaches at about 40 MB of ART indexes
// (300k passages, where 55 MB failed). At 100k passages (ART 14 MB) that
// is 62 MB besides them, a limit of 76-80 MiB, where a build passed at a
// fixed 61 MiB (64MB: 47 MB besides) and at 104 MiB the pool's last 24
// MiB were resident memory only (bench-fts, the build's own peak). A
// build with a headroom of 64 MB throughout reached 390k passages
// without running out. The floor, 80 MiB, matters below about 100k
// passages: at 64 MiB a verify in the process that had just ingested one
// 100 MiB text file (72k blocks, small ART indexes) ran out of memory in
// its postings pass (fts.ForEachPosting reads fixed 16 MiB term ranges)
// and passed only on the retry; at 80 MiB it passed (review 10 M2).
// Variables for tests.
var (
	autoMemoryFloor    int64 = 80 << 20
	autoMemoryHeadroom int64 = 88 << 20
	// autoMemorySmallHeadroom: the headroom below autoMemoryHeadroom,
	// before the ART indexes are added to it (memoryHeadroom).
	autoMemorySmallHeadroom int64 = 48 << 20
	// autoMemoryStep: the limit moves in steps of this, so that a write
	// sets it again only when the ART indexes grew by a step (at 100k
	// passages they grow about 0.16 MB a 1,000-passage batch: a SET
	// every 25 batches or so). The fit is rounded up to it, and DuckDB's
	// pool fills to its limit while it builds (rows not yet
	// checkpointed), so the rounding is resident memory: 16 MiB rounded
	// the 100k build's fit (103.3 MiB) up to 112 MiB.
	autoMemoryStep int64 = 4 << 20
)

// maintain runs the full-text merges a write calls for
// (fts.Index.Maintain), with the automatic memory_limit first fitted to
// the indexes the write grew.
func (s *state) maintain(ctx context.Context) error {
	if err := s.fitMemory(ctx, 1, false, false); err != nil {
		return err
	}
	return s.merge(ctx)
}

// merge runs the full-text merges a write calls for, once more after
// DuckDB ran out of memory and the automatic limit was raised
// (outOfMemory): a merge that fails leaves its segments as they were.
func (s *state) merge(ctx context.Context) error {
	err := s.fts.Maintain(ctx, s.db, 0)
	if s.outOfMemory(ctx, "merge", err) {
		err = s.fts.Maintain(ctx, s.db, 0)
	}
	return err
}

// committedError is an error after a write committed: trying the write
// again would repeat it, so outOfMemory does not.
type committedError struct{ err error }

func (e *committedError) Error() string { return e.err.Error() }
func (e *committedError) Unwrap() error { return e.err }

// Committed reports whether err is an error after a write committed: its
// documents are stored (and searchable) and only work after the commit
// failed, such as a full-text merge. Trying the write again would repeat
// it; a caller that splits a batch to retry it must not.
func Committed(err error) bool {
	var c *committedError
	return errors.As(err, &c)
}

// afterCommit marks err, if any, as one after a write committed.
func afterCommit(err error) error {
	if err == nil {
		return nil
	}
	return &committedError{err}
}

// The ART indexes as stored, estimated from the rows of the tables that
// have them. DuckDB loads an index lazily, a 256 KiB buffer at a time as
// lookups and writes touch it, so right after an open duckdb_memory()
// shows next to none of it (0.26 MB of 5.2 at 8k documents) while the
// first searches, deletes and writes load it all. Measured on DuckDB 1.5
// (300k keys inserted in ten batches): a BIGINT key (block ids, in
// ingest order) takes 12 bytes, a VARCHAR key 50 (16 hex digits: public
// ids) to 74 (32: doc ids); and each index at least one buffer per node
// type it uses (all nine from a few thousand keys: 8k documents loaded
// 5.2 MB, mostly such buffers; counted here as one per 256 keys, up to
// nine). With these figures the estimate of the 100k and 1M bench-fts
// indexes (documents, blocks' two keys) is 16 and 154 MB against the
// 14-17 and about 140 MB their builds held loaded.
const (
	artKeyBytes     = 16        // a key of any type but VARCHAR
	artVarcharBytes = 64        // a VARCHAR key
	artBufferBytes  = 256 << 10 // DuckDB's ART buffer
	artNodeTypes    = 9         // allocators of an ART: prefix, leaf, nodes 4 to 256, leaf nodes
)

// artEstimateQuery is the estimate of the ART indexes as stored, in bytes:
// every PRIMARY KEY and UNIQUE constraint and every CREATE INDEX of the
// file's own database, by the rows of its table.
var artEstimateQuery = fmt.Sprintf(`
WITH keyed AS (
	SELECT t.estimated_size AS n,
		coalesce((SELECT bool_or(col.data_type = 'VARCHAR') FROM duckdb_columns() col
			WHERE col.database_name = c.database_name AND col.schema_name = c.schema_name
			AND col.table_name = c.table_name AND list_contains(c.constraint_column_names, col.column_name)), true) AS varchar_key
	FROM duckdb_constraints() c JOIN duckdb_tables() t USING (database_name, schema_name, table_name)
	WHERE c.constraint_type IN ('PRIMARY KEY', 'UNIQUE') AND c.database_name = current_database()
	UNION ALL
	SELECT t.estimated_size, true FROM duckdb_indexes() i JOIN duckdb_tables() t USING (database_name, schema_name, table_name)
	WHERE i.database_name = current_database()
)
SELECT coalesce(sum(n * CASE WHEN varchar_key THEN %d ELSE %d END + least(ceil(n / 256), %d) * %d), 0)::BIGINT FROM keyed`,
	artVarcharBytes, artKeyBytes, artNodeTypes, artBufferBytes)

// artBytes is what DuckDB's ART indexes take: loaded, from duckdb_memory(),
// and with stored, at least artEstimateQuery's estimate of them as stored.
func (s *state) artBytes(ctx context.Context, stored bool) (int64, error) {
	var art int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT FROM duckdb_memory() WHERE tag = 'ART_INDEX'`).Scan(&art); err != nil {
		return 0, err
	}
	if stored {
		var est int64
		if err := s.db.QueryRowContext(ctx, artEstimateQuery).Scan(&est); err != nil {
			return 0, err
		}
		art = max(art, est)
	}
	return art, nil
}

// memoryHeadroom is what the automatic memory_limit leaves a write
// besides ART indexes of art bytes: autoMemorySmallHeadroom plus art, at
// most autoMemoryHeadroom.
func memoryHeadroom(art int64) int64 {
	return min(autoMemoryHeadroom, autoMemorySmallHeadroom+art)
}

// fitMemory sets an automatic memory_limit (Options.MemoryLimit empty;
// otherwise it does nothing) to what DuckDB's ART indexes take, times
// copies (2 while a rewrite builds a copy's), plus memoryHeadroom; at
// least autoMemoryFloor, rounded up to autoMemoryStep. The ART indexes
// are those loaded now, or with stored at least those stored
// (artBytes), which lookups have not all loaded after an open. It raises
// the limit; with lower it may lower it too, and where DuckDB cannot
// release what it holds, the higher limit stays. Errors: reading
// DuckDB's memory, or raising the limit.
func (s *state) fitMemory(ctx context.Context, copies int64, stored, lower bool) error {
	if !s.memAuto {
		return nil
	}
	art, err := s.artBytes(ctx, stored)
	if err != nil {
		return fmt.Errorf("memory limit of %s: %w", s.path, err)
	}
	return s.setMemory(ctx, max(autoMemoryFloor, copies*art+memoryHeadroom(art)), lower)
}

// setMemory sets the automatic memory_limit to want rounded up to
// autoMemoryStep, if that raises it or lower allows. Errors: raising it.
func (s *state) setMemory(ctx context.Context, want int64, lower bool) error {
	s.memMu.Lock()
	defer s.memMu.Unlock()
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

// autoMemoryRaises bounds how far outOfMemory raises the automatic limit
// beyond its fit: this many autoMemoryHeadroom.
const autoMemoryRaises = 4

// outOfMemory reports whether err is DuckDB's "Out of Memory Error"
// under an automatic memory_limit, and if so raises the limit so that
// the call that failed can be tried again: to the fit of the ART indexes
// as stored and loaded, and at least one autoMemoryHeadroom above the
// limit that failed (up to autoMemoryRaises of them above the fit; when
// the ART indexes' size cannot be read, the floor stands for the fit). It
// logs DuckDB's message and the new limit (slog, Warn; not the wrapping
// error's text, which may name a query or a source): a limit fitted too
// low is a defect to see, not to hide. False for any other error, one
// after a write committed (afterCommit), a fixed Options.MemoryLimit, a
// limit already at its bound, or a failure to raise it (logged too).
func (s *state) outOfMemory(ctx context.Context, op string, err error) bool {
	var done *committedError
	if err == nil || !s.memAuto || !isOutOfMemory(err) || errors.As(err, &done) {
		return false
	}
	msg := duckMessage(err)
	from := s.memLimit.Load()
	art, aerr := s.artBytes(ctx, true)
	fit := max(autoMemoryFloor, art+memoryHeadroom(art))
	if aerr != nil {
		// The pool is too full even for the catalog's row counts: one
		// headroom above the limit that failed, then the fit at the next
		// write (the floor as the fit would bound a large index's raise
		// below the limit it already has).
		slog.Warn("index: DuckDB out of memory; its indexes' size unread", "index", s.path, "op", op, "err", duckMessage(aerr))
		art, fit = 0, max(autoMemoryFloor, from)
	}
	want := min(max(fit, from+autoMemoryHeadroom), fit+autoMemoryRaises*autoMemoryHeadroom)
	if want <= from {
		slog.Warn("index: DuckDB out of memory at the automatic limit's bound; not retried", "index", s.path, "op", op, "limit_mib", from>>20, "art_mib", art>>20, "err", msg)
		return false
	}
	if serr := s.setMemory(context.WithoutCancel(ctx), want, false); serr != nil {
		slog.Warn("index: DuckDB out of memory; raising the limit failed", "index", s.path, "op", op, "limit_mib", from>>20, "err", msg, "raise_err", serr)
		return false
	}
	slog.Warn("index: DuckDB out of memory; limit raised, trying once more", "index", s.path, "op", op, "from_mib", from>>20, "to_mib", s.memLimit.Load()>>20, "art_mib", art>>20, "err", msg)
	return true
}

// outOfMemory is state.outOfMemory on the live state; false when there
// is none.
func (ix *Index) outOfMemory(ctx context.Context, op string, err error) bool {
	if err == nil {
		return false
	}
	s, aerr := ix.acquire()
	if aerr != nil {
		return false
	}
	defer s.unref()
	return s.outOfMemory(ctx, op, err)
}

// duckMessage is DuckDB's own message in err: that of the *duckdb.Error
// it wraps, else err's text from the first of isOutOfMemory's markers.
func duckMessage(err error) string {
	var de *duckdb.Error
	if errors.As(err, &de) {
		return de.Msg
	}
	msg := err.Error()
	for _, s := range outOfMemoryMarks {
		if i := strings.Index(msg, s); i >= 0 {
			return duckPart(msg[i:])
		}
	}
	return "(not DuckDB's)"
}

// duckPart is msg, which starts with DuckDB's message, cut where that
// message ends: after its "(… used)" or before its first line break or
// "; " (what a wrapping error may append, a source's name among it, is
// not logged).
func duckPart(msg string) string {
	if i := strings.Index(msg, " used)"); i >= 0 {
		return msg[:i+len(" used)")]
	}
	if i := strings.IndexAny(msg, "\n;"); i >= 0 {
		return msg[:i]
	}
	return msg
}

// outOfMemoryMarks are the texts of DuckDB's out-of-memory errors.
var outOfMemoryMarks = []string{"Out of Memory Error", "could not allocate block of size", "failed to pin block of size", "failed to allocate data of size"}

// isOutOfMemory reports whether err is, or wraps, DuckDB's out-of-memory
// error. Some paths keep only its text, and an appender's keeps only the
// buffer manager's message, without the error type's prefix
// ("could not close appender: Failed to append: could not allocate
// block of size 256.0 KiB (5.8 MiB/6.0 MiB used)").
//
// Not a FATAL error, whatever it wraps: an out-of-memory error during a
// rollback (a commit that ran out of memory, rolled back in a full pool)
// invalidates DuckDB's database until the file is opened again, so
// nothing can be tried again.
func isOutOfMemory(err error) bool {
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypeOutOfMemory {
		return true
	}
	msg := err.Error()
	if strings.Contains(msg, "FATAL Error") {
		return false
	}
	for _, s := range outOfMemoryMarks {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
