package index

// An ingest batch: prepared without the writer lock (derive, embed, then
// upload its blobs and flush its records in the background), committed
// under it (the transaction's rows appended while the upload finishes;
// records published once it has; then the commit).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/duck"
)

// batch is a derived and embedded batch whose blobs are stored, ready to
// commit.
type batch struct {
	res     []Result
	errs    []error
	ids     []string
	current map[string]*storedDoc // the index's copies of the batch's documents, as read by prepareBatch
	writes  []pending
	records []*blobstore.Record // to store at commit, in order
	// recs holds records' writes, flushed with the blobs by prepareBatch
	// (durable temporary files) and published by commitBatch; drop
	// releases it when the batch is not committed.
	recs   *blobstore.Batch
	staged []string            // their doc ids, once each
	ensure []*blobstore.Record // records of unchanged documents, put back at commit if lost
	// meta are the new records of documents whose metadata alone changed
	// (same bytes, other Input.Meta): stored, then copied into their
	// rows, with nothing derived or embedded again.
	meta []*blobstore.Record
	// stored delivers the outcome of storing the batch's blobs (durable
	// and in place) and flushing its records (durable temporary files,
	// in recs), which prepareBatch starts in the background; nil when it
	// did not start. waitStored reads it once.
	stored    chan error
	storeErr  error
	storeDone bool
}

// waitStored waits for the batch's blobs to be stored and its records
// flushed (prepareBatch started it), and returns the error, if any:
// after one, nothing of the batch was published (the blobs that were are
// orphans at worst: content-addressed).
func (b *batch) waitStored() error {
	if b.stored != nil && !b.storeDone {
		b.storeErr, b.storeDone = <-b.stored, true
	}
	return b.storeErr
}

// prepareBatch reads the batch's documents from the index, derives and
// embeds what changed and starts storing the blobs and flushing the
// records in the background (batch.waitStored), taking no lock: nothing
// it stores is referenced until commitBatch, which appends the rows
// meanwhile and commits once they are durable. A model error fails the
// batch with nothing stored. memo keeps the vectors across the tries of
// one ingest (embedMemo).
func (ix *state) prepareBatch(ctx context.Context, ins []input, memo *embedMemo) (*batch, error) {
	b := &batch{res: make([]Result, len(ins)), errs: make([]error, len(ins)), ids: make([]string, len(ins))}
	for i, in := range ins {
		b.ids[i] = blobstore.DocID(in.Source)
	}
	var err error
	if b.current, err = ix.currentDocs(ctx, b.ids); err != nil {
		return b, err
	}
	res, errs := b.res, b.errs
	var blobs [][]byte
	slot := map[string]int{} // doc id → index in b.writes
	derived := ix.deriveAll(ctx, ins, b.ids, b.current)
	for i, in := range ins {
		docID := b.ids[i]
		res[i] = Result{DocID: docID, Source: in.Source}
		old := b.current[docID]
		exists := old != nil
		if j, ok := slot[docID]; ok { // the batch already replaces it
			w := b.writes[j]
			old, exists = &storedDoc{rec: w.rec, status: w.status, extractor: w.extractor}, w.exists
		}
		if derived[i].unchanged {
			res[i].Title, res[i].Status, res[i].MediaType = old.rec.Title, Unchanged, old.rec.MediaType
			res[i].Blocks, res[i].Pages, res[i].Extractor = old.blocks, old.pages, old.extractor
			res[i].TextlessPages = old.textless
			given, err := CheckMeta(in.Meta)
			if err != nil {
				res[i].Status, errs[i] = "", &DocumentError{Source: in.Source, Err: err}
				continue
			}
			if m := recordMeta(metaJSON(given)); in.Meta != nil && m != old.rec.Meta {
				// A metadata-only update: a new record, the same rows.
				rec := *old.rec
				rec.Meta = m
				b.meta = append(b.meta, &rec)
				res[i].Status = MetaUpdated
				if rec.BlobID != "" {
					blobs = append(blobs, in.Data)
				}
				continue
			}
			b.keep(in.Data, old.rec, &blobs)
			continue
		}
		p, err := derived[i].p, derived[i].err
		if err != nil {
			var de *DocumentError
			if !errors.As(err, &de) {
				return b, err
			}
			errs[i] = err
			continue
		}
		p.exists = exists
		res[i].Title, res[i].Blocks, res[i].Status = p.rec.Title, len(p.blocks), Added
		res[i].MediaType, res[i].Pages, res[i].Extractor, res[i].Reason, res[i].ExtractTime = p.rec.MediaType, p.pages, p.extractor, p.reason(), p.took
		res[i].TextlessPages = p.textless
		if p.status == statusFailed {
			errs[i] = &DocumentError{Source: in.Source, Err: p.failure}
			res[i].Status = Failed
			if old != nil && old.status == statusOK && !in.rederive && !errors.Is(p.failure, extract.ErrFrontMatter) {
				// A new version that fails must not take down the one
				// being served: nothing of it is stored. Unless it fails
				// on its declared sensitivity: that fails closed, and the
				// served version (read before escurel refused such front
				// matter, perhaps as public) goes.
				errs[i] = &DocumentError{Source: in.Source, Err: fmt.Errorf("%w (the version ingested at %s stays indexed)",
					p.failure, old.rec.IngestedAt.Format(time.RFC3339))}
				res[i] = Result{DocID: docID, Source: in.Source, Title: old.rec.Title, MediaType: p.rec.MediaType,
					Extractor: p.extractor, Reason: p.reason(), ExtractTime: p.took}
				continue
			}
		}
		if old != nil {
			// A rebuild's catch-up re-derives a document re-ingested with
			// the same bytes: its rows must take the record's new time.
			if sameDocument(old.rec, p.rec) && old.status == p.status && old.extractor == p.extractor &&
				(!in.rederive || old.rec.IngestedAt.Equal(p.rec.IngestedAt)) {
				if p.status == statusOK {
					res[i].Status = Unchanged
				}
				// The rows are current; make sure the blob store still
				// holds what they derive from.
				if !in.rederive {
					b.keep(in.Data, old.rec, &blobs)
				}
				continue
			}
			if p.status == statusOK {
				res[i].Status = Replaced
			}
		}
		if !in.rederive {
			if p.rec.BlobID != "" {
				blobs = append(blobs, in.Data)
			}
			b.records = append(b.records, p.rec)
			if !slices.Contains(b.staged, docID) {
				b.staged = append(b.staged, docID)
			}
		}
		if j, ok := slot[docID]; ok {
			b.writes[j] = p
		} else {
			slot[docID] = len(b.writes)
			b.writes = append(b.writes, p)
		}
	}
	// Embed before anything is stored: a model that fails or times out
	// fails the batch with nothing written.
	if err := ix.embedAll(ctx, b.writes, memo); err != nil {
		return b, fmt.Errorf("ingest: embed: %w", err)
	}
	if len(blobs) == 0 && len(b.records) == 0 {
		return b, nil
	}
	if len(b.records) > 0 {
		b.recs = ix.blobs.NewBatch()
	}
	b.stored = make(chan error, 1)
	go func() { b.stored <- storeBatch(ctx, ix.blobs, blobs, b.records, b.recs) }()
	return b, nil
}

// storeBatch stores blobs and flushes records into recs (nil when there
// are none). The blobs and the records are staged at once (a lookup per
// blob; a record encoded and checked), written to temporary files (a
// pack each) and flushed together; the blobs are then renamed into place
// (content-addressed: an orphan at worst), the records only at commit,
// under writeMu (commitBatch). It runs beside the caller's transaction,
// touching nothing the transaction reads; recs is the caller's again once
// it returns.
func storeBatch(ctx context.Context, store *blobstore.Store, blobs [][]byte, records []*blobstore.Record, recs *blobstore.Batch) error {
	up := store.NewBatch()
	defer up.Abort() // a no-op once synced
	var g errgroup.Group
	g.Go(func() error {
		for _, data := range blobs {
			if _, err := up.Put(ctx, data); err != nil {
				return err
			}
		}
		return nil
	})
	if recs != nil {
		g.Go(func() error {
			for _, rec := range records {
				// Always written: staged without the lock, "already
				// stored" could be stale at commit.
				if err := recs.StageRecord(ctx, rec); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := blobstore.FlushBatches(ctx, up, recs); err != nil {
		return err
	}
	return up.Sync(ctx)
}

// drop releases what the batch flushed and did not publish (its records'
// temporary files), once its background store has finished; call it when
// the batch is not committed. It may be called more than once.
func (b *batch) drop() {
	b.waitStored()
	if b.recs != nil {
		b.recs.Abort()
		b.recs = nil
	}
}

// keep notes an unchanged document: its blob is stored again with the
// batch's (a no-op when present) and its record checked at commit.
func (b *batch) keep(data []byte, rec *blobstore.Record, blobs *[][]byte) {
	if rec.BlobID != "" {
		*blobs = append(*blobs, data)
	}
	b.ensure = append(b.ensure, rec)
}

// unchangedSince reports whether the index still holds the batch's
// documents as prepareBatch read them (no other writer changed them
// meanwhile). The caller holds writeMu.
func (ix *state) unchangedSince(ctx context.Context, b *batch) (bool, error) {
	now, err := ix.currentDocs(ctx, b.ids)
	if err != nil || len(now) != len(b.current) {
		return false, err
	}
	for id, d := range now {
		was := b.current[id]
		if was == nil || !sameDocument(was.rec, d.rec) || !was.rec.IngestedAt.Equal(d.rec.IngestedAt) ||
			was.status != d.status || was.extractor != d.extractor || was.pages != d.pages || was.blocks != d.blocks {
			return false, nil
		}
	}
	return true, nil
}

// writeFault, when not nil (tests), is called by commitBatch after the
// batch's metadata-only updates committed and before its rows'
// transaction begins; an error it returns fails the batch there, as a
// failure of that transaction before anything was stored would.
var writeFault func() error

// commitBatch stores the batch's records durably, and writes its rows in
// one transaction that commits once they are. The caller holds writeMu. A
// batch that fails after its records were stored takes them back
// (restoreRecords), so the blob store still describes what the index
// serves.
func (ix *state) commitBatch(ctx context.Context, b *batch) error {
	if len(b.ensure) > 0 || len(b.meta) > 0 || len(b.writes) == 0 {
		// Unchanged documents, and metadata updates, rely on blobs the
		// batch stores again (a repair, when one was lost): stored first.
		if err := b.waitStored(); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	for _, rec := range b.ensure {
		if err := ix.ensureRecord(ctx, rec); err != nil {
			return err
		}
	}
	if err := ix.updateMeta(ctx, b.meta, b.current); err != nil {
		return err
	}
	if len(b.writes) == 0 {
		return nil
	}
	if writeFault != nil {
		if err := writeFault(); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	undo := func(err error) error {
		err = fmt.Errorf("ingest: %w", err)
		if uerr := ix.restoreRecords(context.WithoutCancel(ctx), b.staged, b.current); uerr != nil {
			err = fmt.Errorf("%w; and the batch's records could not be taken back (escurel verify lists them): %v", err, uerr)
		}
		return err
	}
	// Source of truth first: the blobs and then the records are durable
	// before the transaction that derives from them commits. The blobs
	// are stored, and the records' temporary files flushed, in the
	// background (prepareBatch) while the transaction appends the rows;
	// once it has appended them all, Sync renames the records into place,
	// and then it commits. A failure to store, or a transaction that
	// fails before, publishes no record: nothing to take back then.
	publishing := false // the records' Sync began: on failure, take them back
	published := func() error {
		if err := b.waitStored(); err != nil || b.recs == nil {
			return err
		}
		publishing = true
		return b.recs.Sync(ctx)
	}
	committed, err := ix.write(ctx, b.writes, published)
	b.drop() // a no-op once synced
	if err != nil {
		if committed {
			// The rows are in, and the records describe them: nothing to
			// take back.
			return afterCommit(fmt.Errorf("ingest: committed, then: %w", err))
		}
		if !publishing {
			return fmt.Errorf("ingest: %w", err)
		}
		return undo(err)
	}
	if ix.vec != nil {
		if err := ix.recordReach(ctx); err != nil {
			return afterCommit(fmt.Errorf("ingest: %w", err))
		}
	}
	return nil
}

// updateMeta stores the records of a batch's metadata-only updates, then
// copies their metadata into the rows, in one transaction: the blocks, the
// full-text index and the vectors are not touched. If the transaction
// fails the records are taken back. The caller holds writeMu.
func (ix *state) updateMeta(ctx context.Context, recs []*blobstore.Record, current map[string]*storedDoc) error {
	if len(recs) == 0 {
		return nil
	}
	ids, given := make([]string, len(recs)), make([]string, len(recs))
	up := ix.blobs.NewBatch()
	defer up.Abort() // a no-op once synced
	for i, rec := range recs {
		if err := up.PutRecord(ctx, rec); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		ids[i], given[i] = rec.DocID, givenJSON(rec.Meta)
	}
	if err := up.Sync(ctx); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	// Committed under the full-text write lock, with the hits' documents
	// (hitdocs.go): a search never sees the one without the other.
	err := func() error {
		tx, err := duck.Begin(ctx, ix.db)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE documents SET meta_given = t.given
		FROM (SELECT unnest(?::VARCHAR[]) AS doc_id, unnest(?::VARCHAR[]) AS given) t
		WHERE documents.doc_id = t.doc_id`, ids, given); err != nil {
			return err
		}
		return ix.fts.CommitWith(ctx, tx, func() {
			ix.hitDocs.setGiven(ids, given)
			ix.metaChanged(ids)
			ix.wrote.Store(true)
		})
	}()
	if err != nil {
		err = fmt.Errorf("ingest: metadata: %w", err)
		if uerr := ix.restoreRecords(context.WithoutCancel(ctx), ids, current); uerr != nil {
			err = fmt.Errorf("%w; and the records could not be taken back (escurel verify lists them): %v", err, uerr)
		}
		return err
	}
	return nil
}

// restoreRecords takes back the records a batch stored when its
// transaction failed: each document's record becomes the index's copy
// again (what the index still serves), or is deleted for a document the
// index does not hold. The blobs stay: content-addressed, they may be
// shared, and an unreferenced one is harmless (Verification.OrphanBlobs).
func (ix *state) restoreRecords(ctx context.Context, docIDs []string, current map[string]*storedDoc) error {
	var errs []error
	for _, id := range docIDs {
		var err error
		if d := current[id]; d != nil {
			err = ix.blobs.PutRecord(ctx, d.rec)
		} else if err = ix.blobs.DeleteRecord(ctx, id); errors.Is(err, blobstore.ErrNotFound) {
			err = nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ensureRecord puts back the record of an unchanged document if the blob
// store lost it or holds another.
func (ix *state) ensureRecord(ctx context.Context, rec *blobstore.Record) error {
	got, err := ix.blobs.GetRecord(ctx, rec.DocID)
	if err == nil && sameDocument(got, rec) && got.IngestedAt.Equal(rec.IngestedAt) {
		return nil
	}
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) && !errors.Is(err, blobstore.ErrCorrupt) {
		return fmt.Errorf("ingest %s: %w", rec.Source, err)
	}
	// Lost, another's, or damaged: this ingest writes it anew.
	if err := ix.blobs.PutRecord(ctx, rec); err != nil {
		return fmt.Errorf("ingest %s: %w", rec.Source, err)
	}
	return nil
}
