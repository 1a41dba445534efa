package index

// A verify that holds writes back for a moment, not for its length
// (verifyAt): a publish's snapshot and Index.Verify.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index/fts"
)

// verifyAt verifies the live generation's rows as they are at one moment
// under writeMu, holding writeMu for that moment only; writes go on while
// it reads every row (47 s of CPU at 1M passages). Under writeMu it runs
// under (a snapshot's CHECKPOINT and copy; nil for none); reads the
// records written since its read of them before the lock
// (ScanRecordsSince; at 1M records 0.2-0.7 s against 5.7 s for all of
// them), every time, not only when a writer released writeMu meanwhile,
// so that a record written without it (a live rebuild's restore of a
// damaged one) is seen too; lists the blobs unless opts.SkipOrphans; and
// begins the verify's read transaction and reads from it once: DuckDB
// fixes a transaction's snapshot at its first read, not at BEGIN. After
// the lock it verifies the rows of that snapshot, with a full-text index
// loaded in the same transaction (the live one's block states are of
// later writes). opts.Records must be nil and opts.Deep false (the blobs
// a deep verify reads may be gone by then: Verify holds the lock for
// those).
//
// When DuckDB runs out of memory in that verify (a retry would read other
// rows), it does the same work with writes held back throughout instead
// (verifyHeld). One verifyAt runs at a time (verifyMu).
func (ix *Index) verifyAt(ctx context.Context, opts *VerifyOptions, under func(s *state) error) (*Verification, error) {
	ix.verifyMu.Lock()
	defer ix.verifyMu.Unlock()
	read, err := ix.blobs.ScanRecordsSince(ctx, nil)
	if err != nil {
		read = nil // all read under writeMu
	}
	if verifyAtHook != nil {
		verifyAtHook("scanned")
	}
	sn, err := ix.verifyBegin(ctx, opts, under, read)
	if err != nil {
		return nil, err
	}
	if verifyAtHook != nil {
		verifyAtHook("unlocked")
	}
	v, err := func() (*Verification, error) {
		s, tx := sn.s, sn.tx
		defer s.unref()
		defer s.verifying.RUnlock()
		defer tx.Rollback()
		fx, err := fts.LoadFrom(ctx, tx, imagePath(s.path)) // the image, when it is of these rows (1.4 s from the tables at 1M passages)
		if s.outOfMemory(ctx, "verify", err) {
			return nil, errVerifyAgain
		}
		if err != nil {
			return nil, fmt.Errorf("verify %s: load the full-text index: %w", s.path, err)
		}
		o := *opts
		o.Records, o.damaged, o.blobIDs, o.blobsListed = sn.read.Records, sn.read.Damaged, sn.blobIDs, !opts.SkipOrphans
		sn.read = nil // the rest of the scan is for a later one to reuse (40 bytes a record): none follows
		v, err := s.verifyIn(ctx, tx, sn.manifest, fx, &o)
		if s.outOfMemory(ctx, "verify", err) {
			return nil, errVerifyAgain
		}
		return v, err
	}()
	if errors.Is(err, errVerifyAgain) {
		return ix.verifyHeld(ctx, opts, under)
	}
	return v, err
}

// verifyHeld is verifyAt with writes held back throughout: under, then
// the verify (which reads the records and blobs itself), both under
// writeMu. Verify's way with the caller's records or a deep verify, and
// verifyAt's after DuckDB ran out of memory.
func (ix *Index) verifyHeld(ctx context.Context, opts *VerifyOptions, under func(s *state) error) (*Verification, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.liveUnder(under)
	if err != nil {
		return nil, err
	}
	return s.verify(ctx, opts)
}

// liveUnder returns the live state after running under on it (nil: none),
// for a verify's start under writeMu, which the caller holds.
func (ix *Index) liveUnder(under func(s *state) error) (*state, error) {
	s, err := ix.live()
	if err != nil {
		return nil, err
	}
	if under != nil {
		if err := under(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// errVerifyAgain: verifyAt's verify ran out of memory and the limit was
// raised (state.outOfMemory).
var errVerifyAgain = errors.New("verify again")

// verifyAtHook, when set (tests), is called by verifyAt with "scanned"
// once it has read the records, before it takes writeMu, and with
// "unlocked" once it has released writeMu, before its verify.
var verifyAtHook func(stage string)

// verifyBegun is what verifyBegin hands verifyAt: the live state with a
// reference and its verifying held (read), the verify's read transaction,
// and the manifest, records and blobs it verifies against; verifyAt gives
// back all three.
type verifyBegun struct {
	s        *state
	tx       *sql.Tx
	manifest Manifest
	read     *blobstore.RecordScan
	blobIDs  []string
}

// verifyBegin is verifyAt's part under writeMu: under, the records written
// since read (all of them when read is nil: the read failed), the blobs
// unless opts.SkipOrphans, and the verify's read transaction, begun and
// read once. It changes no row and no record: its release is not counted
// (unlockMerge), so an ingest prepared meanwhile does not read its
// documents again.
func (ix *Index) verifyBegin(ctx context.Context, opts *VerifyOptions, under func(s *state) error, read *blobstore.RecordScan) (*verifyBegun, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.unlockMerge()
	s, err := ix.liveUnder(under)
	if err != nil {
		return nil, err
	}
	if read, err = ix.blobs.ScanRecordsSince(ctx, read); err != nil {
		return nil, fmt.Errorf("verify %s: records: %w", s.path, err)
	}
	var blobIDs []string
	if !opts.SkipOrphans {
		if blobIDs, err = ix.blobs.BlobIDs(ctx); err != nil {
			return nil, fmt.Errorf("verify %s: blobs: %w", s.path, err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", s.path, err)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM documents`).Scan(&n); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("verify %s: %w", s.path, err)
	}
	s.refs.Add(1) // s is live: the Index's own reference keeps it above zero
	s.verifying.RLock()
	return &verifyBegun{s: s, tx: tx, manifest: *s.manifest.Load(), read: read, blobIDs: blobIDs}, nil
}
