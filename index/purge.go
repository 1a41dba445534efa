package index

// Purge: a delete that erases. See Index.Purge and ARCHITECTURE.md
// ("Erasure").

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/layout"
)

// ErrPurged is returned, wrapped in a *layout.PurgedError, by Rollback
// (and by any publish) of a generation older than the last purge: it may
// hold the text of the documents the purge erased. Force does not
// override it.
var ErrPurged = layout.ErrPurged

// PurgeResult is what Purge erased.
type PurgeResult struct {
	// Documents are the doc ids deleted.
	Documents []string `json:"documents"`
	// Blobs are the blob ids removed: every blob that no record and no
	// document row names (the deleted documents', unless another document
	// holds the same bytes; their older versions'; those of documents
	// deleted before). BlobBytes is their size.
	Blobs     []string `json:"blobs"`
	BlobBytes int64    `json:"blob_bytes"`
	// BlobTempFiles are the blob store's temporary files removed (a
	// crashed write's, which may hold a copy of a purged document): all
	// of them, but those of writes under way in this process.
	BlobTempFiles []string `json:"blob_temp_files"`
	// Generation is the new live generation: the live database written
	// into a fresh file, without the freed pages that held the text.
	// FileBytes is its size.
	Generation string `json:"generation"`
	FileBytes  int64  `json:"file_bytes"`
	// Dropped are the generations removed (the one live before the purge
	// and those kept for a rollback), DroppedBytes their size with the
	// temporary files removed.
	Dropped      []string `json:"dropped"`
	DroppedBytes int64    `json:"dropped_bytes"`
	// Elapsed is the purge's duration.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Reclaimed is the bytes the purge freed: blobs and dropped generations,
// less the new generation's file (negative when the rewrite outgrew what
// it replaced).
func (r *PurgeResult) Reclaimed() int64 { return r.BlobBytes + r.DroppedBytes - r.FileBytes }

// Purge deletes documents as Delete does (named by doc id or source) and
// erases every copy of their text that escurel keeps:
//
//   - their records, and every raw blob that no record (nor any
//     document row) names: their current and older versions, and those
//     of documents deleted before; a blob shared with another document
//     stays;
//   - their rows, then the full-text index compacted, so that its
//     dictionary keeps no term only they had, and the vectors of their
//     blocks in every embedding set;
//   - the freed pages and the write-ahead log of the live database: the
//     live rows are copied into a fresh file (COPY FROM DATABASE), which
//     becomes a new generation, recorded as the last purge (layout's
//     PURGED) and published; the Index switches to it as a rebuild's swap
//     does (running searches finish on the old state);
//   - every older generation, the one live before included, once its last
//     reader has left (Purge waits for them until ctx ends), and the
//     directory's temporary files.
//
// From then on no generation older than the purge becomes live again:
// Rollback refuses it, even with Force, naming the purge's time.
//
// Names that match no document are an error after the rest is done; the
// erasure runs all the same, so a Purge of an already deleted document
// erases what its Delete left in the index directory. Copies outside the
// index directory and a file:// store are not escurel's to erase: object
// versions of a versioned bucket, backups, snapshots, and blocks a file
// system or disk keeps after a file is removed.
//
// It holds writes back until the new generation is live; searches go on.
// An error before the purge's mark leaves the old generation live with the
// documents deleted (not erased: Purge again) and the purge recorded as
// unfinished (layout's PURGING): until a Purge finishes, no older
// generation becomes live again, even by a forced Rollback. After the
// mark, the directory serves the new generation (a later Open finishes a
// publish that a crash interrupted, and removes the older generations a
// crash or a cancellation left), and the error says what is left.
func (ix *Index) Purge(ctx context.Context, names ...string) (*PurgeResult, error) {
	start := time.Now()
	res := &PurgeResult{}
	missing, err := ix.purgeLive(ctx, res, names)
	if err != nil {
		res.Elapsed = time.Since(start)
		return res, err
	}
	// Without writeMu: readers still on the old state leave, its database
	// closes, and its generation goes.
	r, err := ix.layout.RemoveBefore(ctx, res.Generation)
	res.Dropped, res.DroppedBytes = r.Generations, r.Bytes()
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("purge: %s is live without the erased text, but older generations that hold it remain (escurel gc removes them; no rollback serves them): %w", res.Generation, err)
	}
	return res, missing
}

// purgeLive is Purge's part under writeMu: delete, erase the blobs and the
// derived rows, rewrite the live database into a new generation, mark the
// purge, publish and switch. missing is the error for names that matched
// no document.
func (ix *Index) purgeLive(ctx context.Context, res *PurgeResult, names []string) (missing error, err error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return nil, err
	}
	// The intent first: should the purge stop between its deletes and its
	// mark (a crash, a full disk), no generation older than the live one,
	// which holds the documents' text, becomes live again, even forced.
	if err := ix.layout.BeginPurge(s.gen, ix.cfg.now()); err != nil {
		return nil, fmt.Errorf("purge: %w", err)
	}
	done, err := s.deleteDocs(ctx, names...)
	res.Documents = done
	if errors.Is(err, errNoDocument) {
		missing = fmt.Errorf("purge: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("purge: %w", err)
	}
	if err := ix.purgeBlobs(ctx, s, res); err != nil {
		return nil, err
	}
	if err := s.eraseDerived(ctx); err != nil {
		return nil, err
	}
	gen, err := ix.layout.NewGeneration()
	if err != nil {
		return nil, fmt.Errorf("purge: %w", err)
	}
	path := ix.layout.GenerationPath(gen)
	if err := s.rewriteTo(ctx, path); err != nil {
		ix.layout.Abandon(gen)
		return nil, err
	}
	res.Generation, res.FileBytes = gen, fileSize(path)
	if err := ix.layout.MarkPurge(gen, ix.cfg.now()); err != nil {
		ix.layout.Abandon(gen)
		return nil, fmt.Errorf("purge: %w", err)
	}
	// From here on the purge is recorded: nothing undoes it, and ctx's
	// cancellation no longer stops it.
	ctx = context.WithoutCancel(ctx)
	if err := ix.layout.PublishSettled(gen); err != nil {
		ix.stale = gen // writes to the old generation would be lost when the next Open finishes the purge
		return nil, fmt.Errorf("purge: %s is written and recorded as the purge, but publishing it failed: %w; close and open the index again to finish", gen, err)
	}
	if err := ix.switchTo(ctx, gen); err != nil {
		ix.stale = gen
		return nil, fmt.Errorf("purge: %s is live, but this process still serves %s: %w; call Reload", gen, s.gen, err)
	}
	return missing, nil
}

// purgeBlobs removes every orphan blob: each blob that no record and no
// document row names. That is more than the blobs of recs: the older
// versions of the purged documents (a version edited to drop a secret),
// and the blobs of documents deleted earlier (a Purge after a Delete, or
// again after a failed Purge), which no record names any more either.
//
// No orphan is spared for its age (GC's MinAge), and that is safe: the
// caller holds writeMu, so no record is stored meanwhile, and an ingest
// that uploaded (or found already stored) its blobs without the lock
// before this prepares again and uploads them again once it holds
// writeMu, because ix.blobsGone changes (and, once the purge switches,
// the live state too).
func (ix *Index) purgeBlobs(ctx context.Context, s *state, res *PurgeResult) error {
	named := map[string]bool{}
	all, err := ix.blobs.Records(ctx)
	if err != nil {
		return fmt.Errorf("purge: the documents are deleted, but their blobs were kept: %w (Purge again, or escurel gc removes them)", err)
	}
	for _, r := range all {
		named[r.BlobID] = true
	}
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT blob_id FROM documents`)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("purge: %w", err)
		}
		named[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	infos, err := ix.blobs.Blobs(ctx)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	defer ix.blobsGone.Add(1)
	var drop []string
	var dropBytes int64
	for _, b := range infos {
		if !named[b.ID] {
			drop = append(drop, b.ID)
			dropBytes += b.Size
		}
	}
	// In the pack layout, every pack holding one of them or a dead record
	// (an older version, a deleted document's) is rewritten without it.
	if _, err := ix.blobs.Repack(ctx, blobstore.RepackOptions{DropBlobs: drop, MinDead: 0}); err != nil {
		return fmt.Errorf("purge: the documents are deleted, but not all orphan blobs or older records are erased: %w (Purge again, or escurel gc removes the blobs)", err)
	}
	res.Blobs, res.BlobBytes = drop, dropBytes
	// The blob store's temporary files: a crashed batch's pack
	// (packs/<hex>.pack.tmp) holds whole documents. Every one, whatever
	// its age: TempFiles leaves out this process's writes under way, and
	// no other process writes the store (the LOCK; one writing index per
	// blob store).
	tmps, err := ix.blobs.TempFiles(ctx)
	if err != nil {
		return fmt.Errorf("purge: the documents are deleted, but the blob store's temporary files were not removed: %w (Purge again)", err)
	}
	for _, f := range tmps {
		if err := ix.blobs.RemoveTemp(f.Path); err != nil {
			return fmt.Errorf("purge: the documents are deleted, but not every blob store temporary file was removed: %w (Purge again)", err)
		}
		res.BlobTempFiles = append(res.BlobTempFiles, f.Path)
	}
	return nil
}

// eraseDerived drops what the live rows still derive from deleted blocks:
// their vectors in embedding sets other than the active one, and, by a
// compaction, their postings, field lengths and the dictionary's terms no
// live block holds.
func (ix *state) eraseDerived(ctx context.Context) error {
	rows, err := ix.db.QueryContext(ctx, `SELECT table_name FROM duckdb_tables()
		WHERE database_name = current_database() AND schema_name = 'main' AND table_name LIKE 'vectors\_%' ESCAPE '\'`)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return fmt.Errorf("purge: %w", err)
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	for _, t := range tables {
		if _, err := ix.db.ExecContext(ctx, `DELETE FROM "`+t+`" WHERE block_id NOT IN (SELECT block_id FROM blocks)`); err != nil {
			return fmt.Errorf("purge: %s: %w", t, err)
		}
	}
	if err := ix.fts.Compact(ctx, ix.db); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	return nil
}

// rewriteTo writes the generation's live rows into a new DuckDB file at
// dst: schema, sequences and data, none of the old file's free pages or
// log. The automatic memory_limit is first fitted to twice the ART
// indexes as stored (the copy's are built beside the live ones, which an
// open has not all loaded), and a copy that runs out of memory anyway is
// removed and written once more at the limit outOfMemory raises. The
// full-text image goes with the copy when it is current (copyImage). The
// caller holds writeMu.
func (ix *state) rewriteTo(ctx context.Context, dst string) error {
	if err := ix.fitMemory(ctx, 2, true, false); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	err := ix.rewriteOnce(ctx, dst)
	if ix.outOfMemory(ctx, "rewrite", err) {
		for _, p := range []string{dst, dst + ".wal"} {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return fmt.Errorf("%w; and removing the failed copy: %v", err, rerr)
			}
		}
		err = ix.rewriteOnce(ctx, dst)
	}
	if err == nil {
		ix.copyImage(dst)
	}
	return err
}

// rewriteOnce is one try of rewriteTo, at the limit already set.
func (ix *state) rewriteOnce(ctx context.Context, dst string) (err error) {
	conn, err := ix.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	defer conn.Close()
	var catalog string
	if err := conn.QueryRowContext(ctx, `SELECT current_database()`).Scan(&catalog); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	restore, err := ix.raiseThreads(ctx, conn)
	if err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	defer func() {
		if rerr := restore(); err == nil && rerr != nil {
			err = fmt.Errorf("purge: %w", rerr)
		}
	}()
	const alias = "escurel_purge"
	stmts := []string{
		`ATTACH '` + strings.ReplaceAll(dst, "'", "''") + `' AS ` + alias,
		`COPY FROM DATABASE "` + strings.ReplaceAll(catalog, `"`, `""`) + `" TO ` + alias,
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), `DETACH DATABASE IF EXISTS `+alias)
			return fmt.Errorf("purge: write %s: %w", dst, err)
		}
	}
	err = checkSequences(ctx, conn, catalog, alias)
	if err == nil {
		// DETACH would checkpoint, but openState turned DuckDB's
		// checkpoint on close off for the whole database.
		_, err = conn.ExecContext(ctx, `CHECKPOINT `+alias)
	}
	if _, derr := conn.ExecContext(context.WithoutCancel(ctx), `DETACH DATABASE `+alias); err == nil && derr != nil {
		err = derr
	}
	if err == nil {
		err = os.Chmod(dst, 0o600) // DuckDB created it 0666 less the umask
	}
	if err != nil {
		return fmt.Errorf("purge: write %s: %w", dst, err)
	}
	if _, err := os.Stat(dst + ".wal"); err == nil {
		return fmt.Errorf("purge: write %s: a write-ahead log stayed after the copy", dst)
	}
	return syncFile(dst)
}

// raiseThreads sets DuckDB's threads to GOMAXPROCS for one big statement
// (rewriteTo's COPY FROM DATABASE) when that is more than the index's
// configured threads, and returns what puts them back. The setting is the
// database's, not the connection's: searches that run meanwhile may use
// the extra threads too. One thread suits escurel's point lookups and
// appends (defaultDuckDBThreads), but a copy of every table is one
// statement that DuckDB runs in parallel: with 2 threads on 2 cores a 100k
// index (300 MB) copied in 4.16-4.42 s against 4.79-5.70 s with one
// (alternating, load 1-2). The caller holds writeMu, so two raises never
// overlap.
func (ix *state) raiseThreads(ctx context.Context, conn *sql.Conn) (restore func() error, err error) {
	n := runtime.GOMAXPROCS(0)
	if n <= ix.threads {
		return func() error { return nil }, nil
	}
	if _, err := conn.ExecContext(ctx, `SET threads = `+strconv.Itoa(n)); err != nil {
		return nil, fmt.Errorf("raise DuckDB's threads to %d: %w", n, err)
	}
	return func() error {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `SET threads = `+strconv.Itoa(ix.threads)); err != nil {
			return fmt.Errorf("put DuckDB's threads back to %d: %w", ix.threads, err)
		}
		return nil
	}, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkSequences checks that each sequence of the copy continues where
// the original's is (COPY FROM DATABASE starts it past the original's last
// value): a block id is never given twice.
func checkSequences(ctx context.Context, conn *sql.Conn, from, to string) error {
	rows, err := conn.QueryContext(ctx, `SELECT o.sequence_name, coalesce(o.last_value, o.start_value - 1), c.start_value, c.last_value
		FROM duckdb_sequences() o LEFT JOIN duckdb_sequences() c ON c.database_name = ? AND c.sequence_name = o.sequence_name
		WHERE o.database_name = ?`, to, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var last int64
		var start, copied sql.NullInt64
		if err := rows.Scan(&name, &last, &start, &copied); err != nil {
			return err
		}
		if !start.Valid || (!copied.Valid && start.Int64 <= last) || (copied.Valid && copied.Int64 < last) {
			return fmt.Errorf("sequence %s: the copy would give values from %v again (the original's last is %d)", name, start, last)
		}
	}
	return rows.Err()
}
