// Package rebuild re-derives an index from its blob store into a new
// generation and makes it live.
//
// The blob store is the source of truth: every document's raw bytes and its
// record. Run lists the records, re-runs the live ingest code on each blob
// (the same extraction, chunking, contextualization, analysis and embedding;
// not a copy of it) into a new generation of the index directory (see
// index.CurrentName), verifies it, and points CURRENT at it. Reembed copies
// the live generation and gives it a new embedding set instead, without
// re-extracting. They are how an operator changes a setting the manifest
// pins (embedder, chunker, analyzer, contextualize mode) or recovers a lost
// or damaged index file. Document times, titles, languages and
// sensitivities come from the records, never from the clock or the
// defaults, so a rebuild with unchanged settings reproduces the digest of
// the rows (index.Index.Verify).
//
// Without Options.Live, a rebuild holds the directory's lock
// (index.LockDir) from start to swap: no other process uses the index
// meanwhile. With Live, the caller's open index keeps serving searches and
// taking ingests while the new generation is built; the writes made
// meanwhile are caught up, with writes held back, just before the swap, and
// Live switches to the new generation when its running searches finish.
// Either way, a rebuild that fails or is killed leaves the live generation
// as it was; its unfinished generation is never served and the next
// rebuild removes it. The last Options.Keep generations stay, for
// index.Rollback.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/hooks"
	"github.com/escurel/escurel/internal/layout"
)

// DefaultKeep is how many generations a rebuild keeps, the live one
// included.
const DefaultKeep = 2

// Options configure Run and Reembed.
type Options struct {
	// Dir is the index directory.
	Dir string
	// Blobs is the blob store to rebuild from. Required.
	Blobs *blobstore.Store
	// Index holds the settings of the new generation. Zero fields keep the
	// live index's settings (from its manifest), or the defaults when there
	// is no live index. BlobURL, Blobs and Lock are ignored. Reembed needs
	// Index.Embedder.
	Index index.Options
	// AllowMissing lets the rebuild drop documents of the live index that
	// have no record in Blobs. Without it such a rebuild is refused: a
	// mistyped blob URL must not empty an index.
	AllowMissing bool
	// AllowFailures lets documents that the live index serves become
	// failed documents in the new generation (their bytes no longer
	// extract: a stricter limit, an extractor that regressed). Without it
	// such a rebuild is refused (ErrNewFailures), so that a transient
	// limit cannot take documents out of service.
	AllowFailures bool
	// Keep is how many generations stay afterwards, the new live one
	// included (≥ 1); 0 means DefaultKeep.
	Keep int
	// Live, when not nil, is the caller's open index of Dir: it keeps
	// serving during the rebuild and switches to the new generation at the
	// end (see the package comment). Its lock is the rebuild's.
	Live *index.Index
	// Progress, when not nil, is called after each batch with the number of
	// documents done and the total.
	Progress func(done, total int)
	// Batch is the number of documents per transaction; 0 means
	// DefaultBatch. Smaller batches hold less in memory at once.
	Batch int
}

// Summary reports a finished rebuild.
type Summary struct {
	Generation string // the new live generation
	Previous   string // the generation it replaced; "" when there was none
	Documents  int
	Blocks     int
	CaughtUp   int // documents written or deleted in Live during the rebuild, applied before the swap
	Dropped    int // live documents without a record, dropped under AllowMissing
	// Restored counts damaged records written anew from the live rows
	// (Plan.Restored); RepairedBlobs, damaged or missing blobs written
	// anew from their source file, whose bytes still hash to the blob id.
	Restored      int
	RepairedBlobs int
	// Failed counts the documents whose bytes still fail extraction:
	// kept as failed, with their reasons (index.Index.Failed). Documents
	// that failed before and extract now are searchable again.
	Failed int
	// Recovered counts the documents that failed in the live index and
	// extract in the new generation.
	Recovered int
	Removed   int   // old or unfinished generations removed
	Bytes     int64 // blob bytes read
	Elapsed   time.Duration
	Manifest  index.Manifest      // of the new generation
	Verify    *index.Verification // of the new generation, just before the swap
}

// DocumentError lists the documents whose blobs could not be re-derived; the
// rebuild was not swapped in.
type DocumentError struct {
	Errs []error
}

func (e *DocumentError) Error() string {
	return fmt.Sprintf("rebuild: %d documents failed, the live index was kept; first: %v", len(e.Errs), e.Errs[0])
}

// ErrMissing is returned, wrapped, when the blob store lacks records of live
// documents and Options.AllowMissing is false.
var ErrMissing = errors.New("rebuild: blob store lacks documents of the live index")

// ErrNewFailures is returned, wrapped, when documents the live index serves
// fail extraction in the new generation and Options.AllowFailures is false.
var ErrNewFailures = errors.New("rebuild: documents served now would fail")

// MissingError is a rebuild refused because the blob store Store has no
// record of some live documents (Missing: their sources, sorted; Live: how
// many documents the live index has). A mistyped store must not empty an
// index: check Store, or set Options.AllowMissing to drop them. It wraps
// ErrMissing.
type MissingError struct {
	Store   string // the blob store's URL, redacted (blobstore.Redact)
	Missing []string
	Live    int
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%v: %s has no record of %d of the live index's %d documents (first: %s); check the blob store URL, or allow the rebuild to drop them (Options.AllowMissing)",
		ErrMissing, e.Store, len(e.Missing), e.Live, e.Missing[0])
}

// Unwrap returns ErrMissing.
func (e *MissingError) Unwrap() error { return ErrMissing }

// NewFailuresError is a rebuild refused because documents the live index
// serves fail extraction in the new generation (Lost, with their reasons,
// read at restricted clearance: for the operator). If a limit was too
// tight (index.Options.Extract), rebuild again without it; to take them
// out of service, set Options.AllowFailures. It wraps ErrNewFailures.
type NewFailuresError struct {
	Lost []index.FailedDocument
}

func (e *NewFailuresError) Error() string {
	return fmt.Sprintf("%v: %d documents the live index serves fail extraction in the new generation (first: %s: %s); the live index was kept; if a limit was too tight, rebuild again without it, or take them out of service (Options.AllowFailures)",
		ErrNewFailures, len(e.Lost), e.Lost[0].Source, e.Lost[0].Reason)
}

// Unwrap returns ErrNewFailures.
func (e *NewFailuresError) Unwrap() error { return ErrNewFailures }

// DefaultBatch is the number of documents per transaction: as many as
// escurel eval's ingest uses (fewer, larger transactions: 64 took 1.8× as
// long on SciFact).
const DefaultBatch = 512

// Run rebuilds the index in opts.Dir from opts.Blobs into a new generation
// and makes it live. It fails, leaving the live generation as it was, when
// the directory is locked (index.ErrLocked), when the blob store lacks
// documents of the live index (ErrMissing) or holds none at all, when
// documents it serves fail extraction in the new generation
// (ErrNewFailures), when a
// setting is unknown, when a record's blob is missing or corrupt, when any
// document fails to derive (*DocumentError), or when the new generation
// does not verify against the blob store.
func Run(ctx context.Context, opts Options) (Summary, error) {
	return run(ctx, opts, false)
}

// Reembed gives the index in opts.Dir a new embedding set, of
// opts.Index.Embedder, in a new generation, without re-extracting: it
// copies the live generation, embeds every block's stored context and body
// with the new model, drops the old set, and makes the copy live. Searches
// meanwhile answer from the old generation, with the old model only; the
// manifest guard then expects the new model. With opts.Live, documents
// ingested meanwhile are caught up before the swap. Errors as Run's.
func Reembed(ctx context.Context, opts Options) (Summary, error) {
	if opts.Index.Embedder.IsZero() {
		return Summary{}, errors.New("reembed: no embedder given")
	}
	return run(ctx, opts, true)
}

func run(ctx context.Context, opts Options, reembed bool) (sum Summary, err error) {
	start := time.Now()
	what := kind(reembed)
	if opts.Batch == 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	d, release, err := acquireDir(opts, what)
	if err != nil {
		return sum, err
	}
	defer release()
	p, err := plan(ctx, d, opts, reembed)
	if err != nil {
		return sum, err
	}
	sum.Previous, sum.Dropped = p.From, len(p.Dropped)
	recs := p.recs
	// Damaged records the live rows restore are written anew first: the
	// blob store stays the source of truth of what is derived.
	for _, r := range p.restore {
		if err := opts.Blobs.PutRecord(ctx, r); err != nil {
			return sum, fmt.Errorf("%s: restore the damaged record of %s: %w", what, strconv.Quote(r.Source), err)
		}
	}
	sum.Restored = len(p.restore)
	// Generations newer than the live one are unfinished rebuilds: the
	// cleaner removes them (never one this process is building). When the
	// live generation itself is lost they may be the intact ones (after a
	// rollback): the cleaner keeps them.
	if p.hasLive {
		removed, err := d.Clean(math.MaxInt)
		if err != nil {
			return sum, fmt.Errorf("%s: %w", what, err)
		}
		sum.Removed = len(removed)
	}
	gen, err := d.NewGeneration()
	if err != nil {
		return sum, fmt.Errorf("%s: %w", what, err)
	}
	sum.Generation = gen
	var ix *index.Index
	defer func() {
		if ix != nil {
			ix.Close()
		}
		// Removed unless it was published: a publish whose caller saw
		// an error (a cancelled switch) still made it live.
		d.Abandon(gen)
	}()
	if reembed {
		// The copy starts the generation; ingest then re-embeds nothing,
		// and the open embeds every block into the new set.
		path := d.GenerationPath(gen)
		if opts.Live != nil {
			err = hooks.CopyTo(ctx, opts.Live, path)
		} else {
			err = copyLive(opts.Dir, path)
		}
		if err != nil {
			return sum, fmt.Errorf("reembed: %w", err)
		}
		// recs was read before the copy: what changed in between is caught
		// up like what changes after.
	}
	settings := p.Settings
	x, err := hooks.OpenGeneration(ctx, d, gen, &settings, reembed)
	if err != nil {
		return sum, fmt.Errorf("%s: %w", what, err)
	}
	ix = x.(*index.Index)
	if !reembed {
		if err = fill(ctx, ix, recs, opts, &sum); err != nil {
			return sum, err
		}
	}
	finish := func(ctx context.Context) (string, error) {
		current := recs // without Live, no one else writes: recs is current
		if opts.Live != nil {
			var n int
			var err error
			current, n, err = catchUp(ctx, ix, recs, opts, &sum)
			sum.CaughtUp = n
			if err != nil {
				return "", err
			}
		}
		if !reembed {
			served, failedBefore := p.liveDocs, p.liveFail
			if opts.Live != nil {
				// Writes are held back now: what the live index serves
				// at the swap, documents ingested during the rebuild
				// included.
				var err error
				if served, failedBefore, err = liveState(ctx, opts.Live); err != nil {
					return "", fmt.Errorf("%s: %w", what, err)
				}
			}
			if err := checkFailures(ctx, ix, served, failedBefore, opts, &sum); err != nil {
				return "", err
			}
		}
		v, err := ix.Verify(ctx, &index.VerifyOptions{Records: current, SkipOrphans: true})
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if !v.OK() {
			return "", fmt.Errorf("%s: the new generation %s does not verify against the blob store (records without rows %d, rows without records %d, blocks without postings %d, without vectors %d, duplicate postings %d); the live index was kept",
				what, gen, len(v.RecordsWithoutRows), len(v.RowsWithoutRecords), len(v.BlocksWithoutPostings), len(v.BlocksWithoutVectors), v.DuplicatePostings)
		}
		sum.Verify, sum.Manifest = v, ix.Manifest()
		sum.Documents, sum.Blocks, sum.Failed = int(v.Documents), int(v.Blocks), int(v.Failed)
		err = ix.Close()
		ix = nil
		return gen, err
	}
	if opts.Live != nil {
		err = hooks.Swap(ctx, opts.Live, finish)
	} else if _, err = finish(ctx); err == nil {
		err = d.Publish(gen)
	}
	if err != nil {
		return sum, err
	}
	if err := d.SetStoreURL(opts.Blobs.URL()); err != nil {
		return sum, fmt.Errorf("%s: swapped in %s, but recording the blob store failed: %w", what, gen, err)
	}
	if !p.hasLive {
		sum.Elapsed = time.Since(start)
		return sum, nil // a lost live generation: leave the others for the operator
	}
	removed, cerr := d.Clean(opts.Keep)
	sum.Removed += len(removed)
	sum.Elapsed = time.Since(start)
	if cerr != nil {
		return sum, fmt.Errorf("%s: swapped in %s, but removing old generations failed: %w", what, gen, cerr)
	}
	return sum, nil
}

// copyLive copies the live generation's file of dir to dst. The caller
// holds the directory's lock, and no process has the index open.
func copyLive(dir, dst string) error {
	src, err := layout.LivePath(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(src + ".wal"); err == nil {
		return fmt.Errorf("copy %s: it has a write-ahead log; fold it into the file first (escurel compact)", src)
	}
	return layout.CopyFile(src, dst)
}

// liveState returns the documents of a live index (doc id → source) and
// which of them failed.
func liveState(ctx context.Context, live *index.Index) (map[string]string, map[string]bool, error) {
	docs, err := live.Documents(ctx)
	if err != nil {
		return nil, nil, err
	}
	failed, err := live.Failed(ctx, index.Restricted)
	if err != nil {
		return nil, nil, err
	}
	ids := map[string]bool{}
	for _, f := range failed {
		ids[f.DocID] = true
	}
	return docs, ids, nil
}

// checkFailures compares the failed documents of the new generation ix
// with the live index's: documents served now that fail refuse the rebuild
// (unless opts.AllowFailures); documents that failed and extract now are
// counted in sum.Recovered.
func checkFailures(ctx context.Context, ix *index.Index, liveDocs map[string]string, liveFailed map[string]bool, opts Options, sum *Summary) error {
	failed, err := ix.Failed(ctx, index.Restricted)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	now := map[string]bool{}
	var lost []index.FailedDocument
	for _, f := range failed {
		now[f.DocID] = true
		if _, served := liveDocs[f.DocID]; served && !liveFailed[f.DocID] {
			lost = append(lost, f)
		}
	}
	sum.Recovered = 0
	for id := range liveFailed {
		if !now[id] {
			sum.Recovered++
		}
	}
	if len(lost) > 0 && !opts.AllowFailures {
		return &NewFailuresError{Lost: lost}
	}
	return nil
}

// catchUp applies to ix what changed in the blob store since recs was
// read: documents added or replaced are ingested, documents deleted are
// deleted. The caller holds back the live index's writes. It returns the
// records as of now and how many documents changed.
func catchUp(ctx context.Context, ix *index.Index, recs []*blobstore.Record, opts Options, sum *Summary) (now []*blobstore.Record, changes int, err error) {
	// Damaged records were restored or, under AllowMissing, left out
	// (the plan refused otherwise): left out here too. A pack damaged
	// since refuses (its documents would read as older versions).
	var damaged []blobstore.DamagedRecord
	if now, damaged, err = opts.Blobs.ScanRecords(ctx); err != nil {
		return nil, 0, fmt.Errorf("rebuild: catch up: %w", err)
	}
	if err := damagedPack(damaged); err != nil {
		return nil, 0, fmt.Errorf("rebuild: catch up: %w", err)
	}
	before := make(map[string]blobstore.Record, len(recs))
	for _, r := range recs {
		before[r.DocID] = *r
	}
	var changed []*blobstore.Record
	for _, r := range now {
		if old, ok := before[r.DocID]; !ok || old != *r {
			changed = append(changed, r)
		}
		delete(before, r.DocID)
	}
	have, err := ix.Documents(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("rebuild: catch up: %w", err)
	}
	var gone []string
	for id := range before {
		if _, ok := have[id]; ok {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	if len(changed) > 0 {
		saved := opts.Progress
		opts.Progress = nil
		err := fill(ctx, ix, changed, opts, sum)
		opts.Progress = saved
		if err != nil {
			return nil, 0, err
		}
	}
	if len(gone) > 0 {
		if _, err := ix.Delete(ctx, gone...); err != nil {
			return nil, 0, fmt.Errorf("rebuild: catch up: %w", err)
		}
	}
	return now, len(changed) + len(gone), nil
}

// repairBlob writes anew the damaged or missing blob of rec from its
// source, when that is a local file whose bytes hash to the blob id, and
// returns the bytes; else nil.
func repairBlob(ctx context.Context, blobs *blobstore.Store, rec *blobstore.Record) []byte {
	if !filepath.IsAbs(rec.Source) {
		return nil
	}
	fi, err := os.Stat(rec.Source)
	if err != nil || !fi.Mode().IsRegular() || (rec.Bytes > 0 && fi.Size() != rec.Bytes) {
		return nil
	}
	data, err := os.ReadFile(rec.Source)
	if err != nil || blobstore.BlobID(data) != rec.BlobID {
		return nil
	}
	if _, err := blobs.Put(ctx, data); err != nil {
		return nil
	}
	return data
}

// fill derives every record's blob into ix.
func fill(ctx context.Context, ix *index.Index, recs []*blobstore.Record, opts Options, sum *Summary) error {
	var failed []error
	var repaired atomic.Int64
	defer func() { sum.RepairedBlobs += int(repaired.Load()) }()
	for i := 0; i < len(recs); i += opts.Batch {
		part := recs[i:min(i+opts.Batch, len(recs))]
		data := make([][]byte, len(part))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8) // reading a blob is a round trip: overlap them
		for j, rec := range part {
			if rec.BlobID == "" { // never stored: over the size cap at ingest
				continue
			}
			g.Go(func() error {
				var err error
				if data[j], err = opts.Blobs.Get(gctx, rec.BlobID); err != nil {
					if errors.Is(err, blobstore.ErrCorrupt) || errors.Is(err, blobstore.ErrNotFound) {
						if data[j] = repairBlob(gctx, opts.Blobs, rec); data[j] != nil {
							repaired.Add(1)
							return nil
						}
					}
					src := strconv.Quote(rec.Source)
					return fmt.Errorf("rebuild: document %s (%s): %w; the live index was kept; repair: escurel ingest %s (its original bytes), or escurel delete %s",
						rec.DocID, src, err, src, src)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for _, b := range data {
			sum.Bytes += int64(len(b))
		}
		isFailed, errs, err := hooks.Rederive(ctx, ix, part, data)
		if err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		for j := range part {
			if errs[j] != nil && !isFailed[j] { // a failed document is recorded, as at ingest
				failed = append(failed, errs[j])
			}
		}
		if opts.Progress != nil {
			opts.Progress(i+len(part), len(recs))
		}
	}
	if len(failed) > 0 {
		return &DocumentError{Errs: failed}
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
