package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/layout"
)

// RollbackOptions configure Rollback.
type RollbackOptions struct {
	// Blobs, when not nil, is the blob store: the generation rolled back
	// to must verify against its records (Verify), or the rollback is
	// refused. A document deleted or made restricted since that generation
	// was built would otherwise be served again as it was.
	Blobs *blobstore.Store
	// Force rolls back although the generation does not verify; never
	// to one that ranks a document below its record's sensitivity
	// (ErrDowngrade).
	Force bool
}

// Rollback makes the generation before the live one live again and returns
// both names. It takes the directory's lock, so no process may have the
// index open; a process that has it open switches with Index.Reload. The
// generation rolled back from stays on disk until the next rebuild removes
// it. A generation older than the last Purge is refused, with or without
// Force, by an error wrapping ErrPurged that says when the purge happened;
// so is, by an error wrapping ErrDowngrade, a generation whose rows give a
// document a lower sensitivity than its record (opts.Blobs', or the
// directory's own store): Force overrides staleness, never a downgrade.
func Rollback(ctx context.Context, dir string, opts *RollbackOptions) (from, to string, err error) {
	if opts == nil {
		opts = &RollbackOptions{}
	}
	d, err := layout.Lock(dir)
	if err != nil {
		return "", "", err
	}
	defer d.Unlock()
	from, ok, err := d.CurrentNameUnchecked() // the live file may be lost: that is a reason to roll back
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", fmt.Errorf("rollback %s: no generations (no %s)", dir, layout.CurrentName)
	}
	to, ok, err = d.Previous()
	if err != nil {
		return "", "", err
	}
	if err := checkRollback(dir, to); err != nil {
		return "", "", fmt.Errorf("rollback %s: %w", dir, err)
	}
	if !ok {
		return "", "", fmt.Errorf("rollback %s: no generation older than %s; nothing to roll back to", dir, from)
	}
	// Even with Force, a generation that ranks a document below its
	// record's sensitivity is refused: Force overrides staleness, never a
	// downgrade. Without Blobs, the directory's own store is read.
	ix, err := openIndex(ctx, d, to, &Options{Blobs: opts.Blobs}, false)
	if err != nil {
		return "", "", fmt.Errorf("rollback %s to %s: %w", dir, to, err)
	}
	err = ix.checkRollbackTo(ctx, opts.Force || opts.Blobs == nil)
	ix.Close()
	if err != nil {
		return "", "", err
	}
	return from, to, d.Publish(to)
}

// checkRollbackTo checks the live generation of ix, one a rollback would
// make live: no row below its record's sensitivity (ErrDowngrade, even
// with force), and, unless force, that it verifies against the records
// (*StaleError).
func (ix *Index) checkRollbackTo(ctx context.Context, force bool) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return err
	}
	return s.checkRollbackTo(ctx, ix.dir, force)
}

// checkRollbackTo is Index.checkRollbackTo on the state s of the
// generation a rollback would make live; the caller holds writeMu.
func (s *state) checkRollbackTo(ctx context.Context, dir string, force bool) error {
	recs, err := s.blobs.Records(ctx)
	if err != nil {
		return fmt.Errorf("rollback %s to %s: %w", dir, s.gen, err)
	}
	levels := map[string]uint8{}
	for _, r := range recs {
		l, ok := knownLevel(r.Sensitivity)
		if !ok {
			l = math.MaxUint8 // unknown: every row is below it (fail closed)
		}
		levels[r.DocID] = l
	}
	rows, err := s.db.QueryContext(ctx, `SELECT doc_id, source, sensitivity FROM documents ORDER BY source`)
	if err != nil {
		return fmt.Errorf("rollback %s to %s: %w", dir, s.gen, err)
	}
	var down []string
	for rows.Next() {
		var id, src, sens string
		if err := rows.Scan(&id, &src, &sens); err != nil {
			rows.Close()
			return fmt.Errorf("rollback %s to %s: %w", dir, s.gen, err)
		}
		rl, ok := levels[id]
		if l, known := knownLevel(sens); ok && (!known || l < rl) {
			down = append(down, src)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rollback %s to %s: %w", dir, s.gen, err)
	}
	if len(down) > 0 {
		return fmt.Errorf("rollback %s to %s: refused, even with force: it ranks %d documents below the sensitivity their records have now (first: %s), and would serve them to callers without clearance; rebuild instead: %w",
			dir, s.gen, len(down), down[0], ErrDowngrade)
	}
	if force {
		return nil
	}
	v, err := s.verify(ctx, &VerifyOptions{SkipOrphans: true, Records: recs})
	if err != nil {
		return fmt.Errorf("rollback %s to %s: %w", dir, s.gen, err)
	}
	if !v.OK() {
		return &StaleError{Dir: dir, Generation: s.gen, Changed: append(v.RowsWithoutRecords, v.RecordsWithoutRows...)}
	}
	return nil
}

// knownLevel is level, and whether s is a sensitivity escurel knows.
func knownLevel(s string) (uint8, bool) {
	switch s {
	case Public, Internal, Restricted:
		return level(s), true
	}
	return 0, false
}

// checkRollback refuses a rollback to generation to ("" when none is
// older than the live one) when a purge happened since to was live: it
// may hold the erased documents. The error wraps ErrPurged and says when
// the purge happened; Force does not override it. Every way of making an
// older generation live again calls it (Rollback here; a live rollback in
// the same process too).
func checkRollback(dir, to string) error {
	if to != "" {
		return layout.CheckPurged(dir, to)
	}
	p, ok, err := layout.ReadPurge(dir)
	if err != nil {
		return err
	}
	if ok {
		return &layout.PurgedError{Purge: p}
	}
	return nil
}

// ErrStale is returned, wrapped in a *StaleError, by Rollback when the
// generation it would make live no longer matches the blob store.
var ErrStale = errors.New("index: generation no longer matches the blob store")

// StaleError reports a refused rollback: documents changed in the blob
// store (deleted, re-ingested, re-classified) since Generation was built,
// and making it live would serve them as they were. Rebuild instead, or
// roll back with RollbackOptions.Force.
type StaleError struct {
	Dir, Generation string
	Changed         []string // doc ids whose rows and records differ, rows first
}

func (e *StaleError) Error() string {
	first := ""
	if len(e.Changed) > 0 {
		first = "; first: " + e.Changed[0]
	}
	return fmt.Sprintf("rollback %s to %s: refused: %d documents changed in the blob store since %s was built (deleted, re-ingested or re-classified%s), and rolling back would serve them as they were; rebuild, or force the rollback (RollbackOptions.Force)",
		e.Dir, e.Generation, len(e.Changed), e.Generation, first)
}

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

// Documents returns the live generation's documents, doc id → source,
// failed ones included.
func (ix *Index) Documents(ctx context.Context) (map[string]string, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	return s.documents(ctx)
}

// documents is Index.Documents on one generation.
func (ix *state) documents(ctx context.Context) (map[string]string, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT doc_id, source FROM documents`)
	if err != nil {
		return nil, fmt.Errorf("documents: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, src string
		if err := rows.Scan(&id, &src); err != nil {
			return nil, err
		}
		out[id] = src
	}
	return out, rows.Err()
}

// copyTo writes a copy of the generation to the file dst, the write-ahead
// log folded in first; the caller holds writeMu, so the copy is one
// consistent state.
//
// The copy is the file's bytes alone: a CHECKPOINT that left part of the
// log unfolded (DuckDB's fails instead when a transaction runs, and no
// write commits under writeMu) would make a copy without the latest
// writes, so a log left non-empty fails the copy. A published copy's
// rows are then the verified ones byte for byte, which is what lets a
// replica of the same build trust its SHA-256 (package replica).
func (ix *state) copyTo(ctx context.Context, dst string) error {
	if err := ix.checkpoint(ctx); err != nil {
		return fmt.Errorf("copy %s: %w", ix.path, err)
	}
	if n := fileSize(ix.path + ".wal"); n > 0 {
		return fmt.Errorf("copy %s: its write-ahead log still holds %d bytes after a checkpoint: not copied", ix.path, n)
	}
	return layout.CopyFile(ix.path, dst)
}

// checkpointWait bounds how long checkpoint retries a CHECKPOINT that
// DuckDB refuses while a transaction runs (a variable for tests).
var checkpointWait = 10 * time.Second

// checkpoint folds the write-ahead log into the file. DuckDB refuses a
// CHECKPOINT ("Cannot CHECKPOINT: there are other write transactions
// active") while a read transaction that began before a committed update
// still runs: a search, an export. Those end, and no write commits under
// writeMu, which the caller holds: it tries again every 50 ms for up to
// checkpointWait (bounded by ctx), then returns DuckDB's error. (FORCE
// CHECKPOINT would wait without a bound, behind an export's hours.) A
// verify outside writeMu (verifyAt), beside which it would be refused the
// same way for the verify's whole length, it waits for first
// (waitVerifying).
func (ix *state) checkpoint(ctx context.Context) error {
	ix.waitVerifying()
	deadline := time.Now().Add(checkpointWait)
	for {
		_, err := ix.db.ExecContext(ctx, `CHECKPOINT`)
		if err == nil || !checkpointRefused(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitVerifying waits until no verify reads s outside writeMu
// (state.verifying, verifyAt): once a write has committed after its read
// transaction began, DuckDB refuses every CHECKPOINT until it ends. The
// caller holds writeMu, under which such a verify begins, so none begins
// meanwhile.
func (s *state) waitVerifying() {
	s.verifying.Lock()
	s.verifying.Unlock()
}

// checkpointRefused reports whether err is DuckDB's refusal of a
// CHECKPOINT beside other transactions, which ends with them; not one
// that would not clear (a transaction of this connection with changes of
// its own, a read-only database).
func checkpointRefused(err error) bool {
	m := err.Error()
	return strings.Contains(m, "Cannot CHECKPOINT") && strings.Contains(m, "other") && strings.Contains(m, "transactions active")
}

// ErrDamaged is returned, wrapped, when a file the index derives cannot be
// read: a CURRENT that names no generation or a lost one, a database file
// that DuckDB cannot open (truncated, overwritten). The blob store holds
// everything: escurel rebuild (rebuild.Run) re-derives the index from it,
// whatever state the derived files are in.
var ErrDamaged = layout.ErrDamaged

// Exists reports whether dir holds an index: a CURRENT naming a generation
// with an index file, or an index file of the older one-file layout.
func Exists(dir string) bool { return layout.Exists(dir) }
