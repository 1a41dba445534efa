package index

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"strings"

	"github.com/escurel/escurel/internal/duck"
	"github.com/escurel/escurel/internal/layout"
)

// When a generation's file is rewritten. DuckDB reuses the blocks a
// checkpoint frees but gives back only free blocks at the file's end,
// and never vacuums the rows deleted from a table that has an index
// (blocks, documents and the vectors have keys): ten rounds of deleting
// and re-ingesting 10 % of a corpus more than doubled the file. A rewrite
// (rewriteTo: ATTACH, COPY FROM DATABASE) holds the live rows only.
const (
	// compactRewriteShare: Index.Compact rewrites the file when at least
	// this share of it is reclaimable, and at least compactRewriteMin
	// bytes (a few of DuckDB's 256 KiB blocks move at every checkpoint).
	compactRewriteShare = 0.10
	compactRewriteMin   = 1 << 20
	// closeRewriteShare: Close rewrites the file when at least this share
	// of it is reclaimable (and at least closeRewriteMin), so that
	// an index under churn stays within about 1/(1−share) of its live
	// size plus the keyed tables' last row groups (keyedLastGroupsQuery:
	// free space that comes back after any rewrite) without anyone
	// running compact (Lucene reclaims deletes in its merges; SQLite
	// needs VACUUM or auto_vacuum).
	closeRewriteShare = 0.20
)

// closeRewriteMin is the least reclaimable bytes for which Close rewrites
// (a variable for tests).
var closeRewriteMin int64 = 16 << 20

// space is what a generation's DuckDB file holds: its bytes, and an
// estimate of the bytes a rewrite would reclaim: each table's blocks in
// proportion to its deleted rows still stored, and the free blocks beyond
// those that the next writer's checkpoint fills again (keyedLastGroups).
type space struct {
	file, reclaimable int64
}

// keyedLastGroupsQuery lists the tables, not empty, that have an index
// (a PRIMARY KEY or UNIQUE constraint, or a CREATE INDEX), whose last row
// groups keyedLastGroups counts: blocks, documents, document_text and vectors_<set> by
// their keys, and the small manifest, schema_migrations and
// embedding_sets. DuckDB appends to such a table's last row group
// instead of starting a new one (it cannot vacuum an indexed table, so it
// does not make small row groups there), and every checkpoint after an
// append rewrites that whole row group into free blocks: the file keeps
// about one last row group of each keyed table free, and a rewrite does
// not make that space go away; it comes back at the next writer's first
// checkpoint. (A table this process never appended to is counted too:
// that errs towards not rewriting.) At 100,000 passages the blocks table
// is one row group of 71 MB: counted as reclaimable, it made every
// writer's Close rewrite the whole file (6.1-7.0 s for a one-file
// ingest). Measured with pragma_storage_info (DuckDB 1.5, reproduced on a
// plain table with and without a PRIMARY KEY).
const keyedLastGroupsQuery = `
WITH keyed AS (
	SELECT DISTINCT table_name FROM duckdb_constraints()
	WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE') AND database_name = current_database() AND schema_name = 'main'
	UNION
	SELECT table_name FROM duckdb_indexes() WHERE database_name = current_database() AND schema_name = 'main'
)
SELECT table_name FROM keyed JOIN duckdb_tables() t USING (table_name)
WHERE t.database_name = current_database() AND t.schema_name = 'main' AND t.estimated_size > 0
ORDER BY table_name`

// proportion is n×part/whole, in floating point: n×part can pass
// int64's range (a 100 GB table with 10^8 deleted rows).
func proportion(n, part, whole int64) int64 {
	return int64(float64(n) * (float64(part) / float64(whole)))
}

// below reports whether reclaimable bytes of a file of file bytes fall
// short of minShare of it or of minBytes.
func below(file, reclaimable int64, minShare float64, minBytes int64) bool {
	return file <= 0 || float64(reclaimable)/float64(file) < minShare || reclaimable < minBytes
}

// share is the reclaimable share of the file.
func (sp space) share() float64 {
	if sp.file <= 0 {
		return 0
	}
	return float64(sp.reclaimable) / float64(sp.file)
}

// space measures the file after a CHECKPOINT (so that the log is in it).
// What costs a scan of a table's storage is read only while it can
// change the answer to "at least minShare of the file and minBytes
// reclaimable?": below those bounds the figure returned is an upper bound
// (the used blocks in proportion to the largest share of deleted rows of
// any table, a block of slack per churned table; the free blocks that the
// next writer refills, keyedLastGroups, not subtracted); at or above them
// it is the estimate.
// The caller holds writeMu.
func (s *state) space(ctx context.Context, minShare float64, minBytes int64) (space, error) {
	var sp space
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return sp, err
	}
	defer conn.Close()
	s.waitVerifying()
	if _, err := conn.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return sp, err
	}
	var blockSize, total, free int64
	if err := conn.QueryRowContext(ctx, `SELECT block_size, total_blocks, free_blocks FROM pragma_database_size() WHERE database_name = current_database()`).Scan(&blockSize, &total, &free); err != nil {
		return sp, err
	}
	sp.file, sp.reclaimable = total*blockSize, free*blockSize
	type table struct {
		name   string
		stored int64
	}
	var tables []table
	err = func() error {
		rows, err := conn.QueryContext(ctx, `SELECT table_name, estimated_size FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t table
			if err := rows.Scan(&t.name, &t.stored); err != nil {
				return err
			}
			tables = append(tables, t)
		}
		return rows.Err()
	}()
	if err != nil {
		return sp, err
	}
	// A table's deleted rows: its blocks in proportion. Its blocks are
	// read (pragma_storage_info, about a second for the blocks table at
	// 1M passages) only when the bound (the used blocks in proportion to
	// the largest share of deleted rows) does not already leave the total
	// below the caller's bounds.
	type churned struct {
		name       string
		dead, rows int64
	}
	var dead []churned
	// The tables' blocks are among the used ones (a table's share of them
	// no more than its share of deleted rows, the largest of them): the
	// sum of each table's proportion of the whole file counted every
	// churned small table (fts_blocks, fts_terms) as the whole file too.
	var most float64
	for _, t := range tables {
		if t.stored == 0 {
			continue
		}
		var live int64
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM "`+strings.ReplaceAll(t.name, `"`, `""`)+`"`).Scan(&live); err != nil {
			return sp, fmt.Errorf("%s: %w", t.name, err)
		}
		if live < t.stored {
			dead = append(dead, churned{t.name, t.stored - live, t.stored})
			most = max(most, float64(t.stored-live)/float64(t.stored))
		}
	}
	// A block shared by two tables' segments (a partial block) counts in
	// both: one block each for slack.
	bound := sp.reclaimable + int64(float64(sp.file-sp.reclaimable)*most) + int64(len(dead))*blockSize
	if below(sp.file, bound, minShare, minBytes) {
		sp.reclaimable = bound
		return sp, nil
	}
	last := map[string]int64{} // a table's last row group's blocks, read with its blocks
	for _, t := range dead {
		blocks, lastBlocks, err := storedBlocks(ctx, conn, t.name)
		if err != nil {
			return sp, err
		}
		last[t.name] = lastBlocks
		sp.reclaimable += proportion(blocks*blockSize, t.dead, t.rows)
	}
	if below(sp.file, sp.reclaimable, minShare, minBytes) {
		return sp, nil
	}
	// Only now: pragma_storage_info of the blocks table takes about a
	// second at 1M passages (read once: the loop above kept its last row
	// group).
	refill, err := keyedLastGroups(ctx, conn, last)
	if err != nil {
		return sp, err
	}
	sp.reclaimable -= min(free, refill) * blockSize
	return sp, nil
}

// keyedLastGroups is the number of blocks that the last row groups of the
// keyed tables take (keyedLastGroupsQuery): the free blocks the next
// writer's first checkpoint fills again.
func keyedLastGroups(ctx context.Context, conn *sql.Conn, known map[string]int64) (int64, error) {
	tables, err := queryColumn[string](ctx, conn, keyedLastGroupsQuery)
	if err != nil {
		return 0, fmt.Errorf("keyed tables: %w", err)
	}
	var n int64
	for _, t := range tables {
		blocks, ok := known[t]
		if !ok {
			var err error
			if _, blocks, err = storedBlocks(ctx, conn, t); err != nil {
				return 0, err
			}
		}
		n += blocks
	}
	return n, nil
}

// storedBlocks is the number of blocks a table's storage takes, and of
// them those of its last row group, from one read of pragma_storage_info.
func storedBlocks(ctx context.Context, conn *sql.Conn, table string) (all, last int64, err error) {
	// The last row group is the highest of all, with blocks on disk or
	// not (a constant segment has none): the highest with blocks would
	// be a full one before it.
	err = conn.QueryRowContext(ctx, `WITH s AS (SELECT row_group_id, block_id FROM pragma_storage_info(`+sqlString(table)+`))
		SELECT count(DISTINCT block_id) FILTER (WHERE block_id >= 0),
			count(DISTINCT block_id) FILTER (WHERE block_id >= 0 AND row_group_id = (SELECT max(row_group_id) FROM s)) FROM s`).Scan(&all, &last)
	if err != nil {
		err = fmt.Errorf("%s: storage: %w", table, err)
	}
	return all, last, err
}

// rewriteLive rewrites the live generation into a new one when at least
// minShare of its file is reclaimable, publishes it and, with swap, makes
// it live (the caller that closes the index passes false: the next Open
// opens it). It returns the generation replaced ("" when nothing was
// rewritten), which the caller removes once no reader holds it
// (layout.RemoveReplaced). The caller holds writeMu.
func (ix *Index) rewriteLive(ctx context.Context, s *state, minShare float64, minBytes int64, swap bool) (replaced string, err error) {
	if ix.layout.Building() {
		// A rebuild (or purge) is building a generation: a copy published
		// above it would make its publish move CURRENT backwards, and
		// its cleanup remove the copy. The next Compact or Close rewrites.
		return "", nil
	}
	sp, err := s.space(ctx, minShare, minBytes)
	if err != nil {
		return "", fmt.Errorf("compact %s: %w", s.gen, err)
	}
	if below(sp.file, sp.reclaimable, minShare, minBytes) {
		return "", nil
	}
	gen, err := ix.layout.NewGeneration()
	if err != nil {
		return "", fmt.Errorf("compact: %w", err)
	}
	// The copy grows DuckDB's memory (at 1M passages from about 330 MB
	// to 560 MB resident) while the Go heap, at its peak after a build,
	// keeps up to twice its live size mapped (400 MB for 184 live): a
	// build's peak RSS was this copy's. A collection that hands the free
	// pages back first costs one GC cycle (0.1 s at 1M) in a rewrite of
	// seconds to minutes; it collects the whole process's heap, so only
	// when that gives back enough to matter.
	if heapToGiveBack() >= giveBackMin {
		debug.FreeOSMemory()
	}
	if err := s.rewriteTo(ctx, ix.layout.GenerationPath(gen)); err != nil {
		ix.layout.Abandon(gen)
		return "", fmt.Errorf("compact: %w", err)
	}
	if err := ix.layout.PublishSettled(gen); err != nil {
		ix.layout.Abandon(gen)
		return "", fmt.Errorf("compact: %w", err)
	}
	if swap {
		if err := ix.switchTo(context.WithoutCancel(ctx), gen); err != nil {
			ix.stale = gen
			return "", fmt.Errorf("compact: %s is live, but this process still serves %s: %w; call Reload", gen, s.gen, err)
		}
	}
	return s.gen, nil
}

// imagePath is the file of the full-text index's image (fts.Index.SaveImage)
// beside the DuckDB file at path.
func imagePath(path string) string { return path + ".fts-image" }

// saveImage saves the full-text index's image (fts.Index.SaveImage) for
// the next Open to read, unless the one stored is current. A failure is
// logged, not returned: the image is derived, and without it the next
// Open reads the tables, only slower (1.4 s at 1M passages).
//
// With fold (the close folds the log, state.foldsLog) it checkpoints
// first: saved beside a large write-ahead log (a build's last batches),
// the fingerprint's reads raised a 100k build's peak RSS by 15-40 MB. A
// failed checkpoint is reported by the next one: rewriteLive's, or the
// state's close (closeErr).
func (s *state) saveImage(ctx context.Context, fold bool) {
	if s.fts.ImageCurrent() {
		return
	}
	if fold {
		s.waitVerifying()
		_, _ = s.db.ExecContext(ctx, `CHECKPOINT`)
	}
	err := func() error {
		tx, err := duck.Begin(ctx, s.db)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		_, err = s.fts.SaveImage(ctx, tx, imagePath(s.path))
		return err
	}()
	if err != nil {
		slog.Warn("index: saving the full-text index's image failed; the next open reads its tables instead", "index", s.path, "err", err)
	}
}

// copyImage copies the full-text index's image to a rewrite's copy at dst
// when it is current (the copy's rows are the same, so is its
// fingerprint), so that the copy opens from it. A failure is logged: the
// copy's first open reads its tables instead.
func (s *state) copyImage(dst string) {
	if !s.fts.ImageCurrent() {
		return
	}
	if err := layout.CopyFile(imagePath(s.path), imagePath(dst)); err != nil {
		slog.Warn("index: copying the full-text index's image failed; the copy's first open reads its tables instead", "index", s.path, "err", err)
	}
}

// giveBackMin is the least heapToGiveBack for which a rewrite first
// hands the Go heap's free pages back (debug.FreeOSMemory).
const giveBackMin = 64 << 20

// heapToGiveBack estimates, in bytes, what a collection and a scavenge
// would give back to the operating system: the heap's free and unused
// pages not released yet, and its objects beyond the live heap of the
// last collection (runtime/metrics; 0 for a metric the runtime lacks).
func heapToGiveBack() uint64 {
	ss := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(ss)
	v := make([]uint64, len(ss))
	for i, s := range ss {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	free, unused, objects, live := v[0], v[1], v[2], v[3]
	return free + unused + objects - min(objects, live)
}

// compactLive is Index.Compact's part under writeMu: the full-text
// compaction, then a rewrite when compactRewriteShare of the file is
// reclaimable. It returns the generation replaced, or "".
func (ix *Index) compactLive(ctx context.Context) (string, error) {
	ix.verifyMu.Lock() // before writeMu: its CHECKPOINT would wait for a verify under it
	defer ix.verifyMu.Unlock()
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return "", err
	}
	if err := s.compact(ctx); err != nil {
		return "", err
	}
	return ix.rewriteLive(ctx, s, compactRewriteShare, compactRewriteMin, true)
}

// spaceOf is state.space for tests: the file of the live generation, with
// the blocks the next writer refills always subtracted.
func (ix *Index) spaceOf(ctx context.Context) (space, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return space{}, err
	}
	return s.space(ctx, 0, 0)
}
