// Package rebuild re-derives an index from its blob store.
//
// The blob store is the source of truth: every document's raw bytes and its
// record. Run lists the records, re-runs the live ingest code on each blob
// (the same extraction, chunking, contextualization, analysis and embedding;
// not a copy of it) into a new index file beside the live one, and swaps it
// in with a rename. It is how an operator changes a setting the manifest
// pins (embedder, chunker, analyzer, contextualize mode) or recovers a lost
// or damaged index file. Document times, languages and sensitivities come
// from the records, never from the clock or the defaults.
//
// Run holds the index directory's lock (index.LockDir) from start to swap:
// no other process can write the live index meanwhile, and a second rebuild
// fails at once. The live file stays untouched until the swap; a rebuild
// that fails or is interrupted leaves it as it was.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// Options configure Run.
type Options struct {
	// Dir is the index directory. The rebuilt file replaces Dir/index.duckdb.
	Dir string
	// Blobs is the blob store to rebuild from. Required.
	Blobs *blobstore.Store
	// Index holds the settings of the rebuilt index. Zero fields keep the
	// live index's settings (from its manifest), or the defaults when there
	// is no live index. BlobURL, Blobs and Lock are ignored.
	Index index.Options
	// AllowMissing lets the rebuild drop documents of the live index that
	// have no record in Blobs. Without it such a rebuild is refused: a
	// mistyped blob URL must not empty an index.
	AllowMissing bool
	// Progress, when not nil, is called after each batch with the number of
	// documents done and the total.
	Progress func(done, total int)
}

// Summary reports a finished rebuild.
type Summary struct {
	Documents int
	Blocks    int
	Dropped   int   // live documents without a record, dropped under AllowMissing
	Bytes     int64 // blob bytes read
	Elapsed   time.Duration
	Manifest  index.Manifest // of the new index
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

// batch is the number of documents per transaction.
const batch = 64

// Run rebuilds the index in opts.Dir from opts.Blobs. It fails, leaving the
// live index as it was, when the directory is locked (index.ErrLocked),
// when the blob store lacks documents of the live index (ErrMissing) or
// holds none at all, when a setting is unknown, when a record's blob is
// missing or corrupt, or when any document fails to derive
// (*DocumentError).
func Run(ctx context.Context, opts Options) (Summary, error) {
	start := time.Now()
	var sum Summary
	if opts.Blobs == nil {
		return sum, errors.New("rebuild: no blob store")
	}
	lock, err := index.LockDir(opts.Dir)
	if err != nil {
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	defer lock.Unlock()

	settings := opts.Index
	settings.BlobURL, settings.Blobs, settings.Lock = "", opts.Blobs, nil
	live, liveDocs, err := index.Inspect(ctx, opts.Dir)
	switch {
	case err == nil:
		if settings.Embedder.IsZero() {
			settings.Embedder = live.Embedder()
		}
		settings.Chunker = firstNonEmpty(settings.Chunker, live.Chunker)
		settings.Analyzer = firstNonEmpty(settings.Analyzer, live.Analyzer)
		settings.Contextualize = firstNonEmpty(settings.Contextualize, live.Contextualize)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return sum, fmt.Errorf("rebuild: %w (to rebuild a damaged file, move it away first)", err)
	}
	recs, err := opts.Blobs.Records(ctx)
	if err != nil {
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	if sum.Dropped, err = checkCoverage(recs, liveDocs, opts); err != nil {
		return sum, err
	}

	// Any other rebuild directory is a crashed rebuild's: we hold the lock.
	if stale, _ := filepath.Glob(filepath.Join(opts.Dir, "rebuild-*.tmp")); len(stale) > 0 {
		for _, d := range stale {
			if err := os.RemoveAll(d); err != nil {
				return sum, fmt.Errorf("rebuild: remove %s: %w", d, err)
			}
		}
	}
	tmp, err := os.MkdirTemp(opts.Dir, "rebuild-*.tmp")
	if err != nil {
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	ix, err := index.Open(ctx, tmp, &settings)
	if err != nil {
		os.RemoveAll(tmp)
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	dropped := sum.Dropped
	sum, err = fill(ctx, ix, recs, opts)
	sum.Dropped = dropped
	if cerr := ix.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return sum, err
	}
	if err := swap(opts.Dir, tmp); err != nil {
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// checkCoverage refuses a rebuild that would lose live documents, or that
// has nothing to rebuild from, and returns how many live documents the
// rebuild drops.
func checkCoverage(recs []*blobstore.Record, live map[string]string, opts Options) (int, error) {
	if len(recs) == 0 && len(live) == 0 {
		return 0, fmt.Errorf("rebuild: the blob store %s holds no document records: nothing to rebuild from", opts.Blobs.URL())
	}
	have := make(map[string]bool, len(recs))
	for _, r := range recs {
		have[r.DocID] = true
	}
	var missing []string
	for id, src := range live {
		if !have[id] {
			missing = append(missing, src)
		}
	}
	if len(missing) > 0 && !opts.AllowMissing {
		sort.Strings(missing)
		return 0, fmt.Errorf("%w: %s has no record of %d of the live index's %d documents (first: %s); "+
			"check the blob store URL, or allow the rebuild to drop them", ErrMissing, opts.Blobs.URL(), len(missing), len(live), missing[0])
	}
	return len(missing), nil
}

// fill ingests every record's blob into ix.
func fill(ctx context.Context, ix *index.Index, recs []*blobstore.Record, opts Options) (Summary, error) {
	sum := Summary{Manifest: ix.Manifest()}
	var failed []error
	for i := 0; i < len(recs); i += batch {
		part := recs[i:min(i+batch, len(recs))]
		ins := make([]index.Input, len(part))
		for j, rec := range part {
			data, err := opts.Blobs.Get(ctx, rec.BlobID)
			if err != nil {
				return sum, fmt.Errorf("rebuild: document %s (%s): %w", rec.DocID, rec.Source, err)
			}
			sum.Bytes += int64(len(data))
			ins[j] = index.Input{Source: rec.Source, MediaType: rec.MediaType, Data: data,
				Language: rec.Language, Sensitivity: rec.Sensitivity, IngestedAt: rec.IngestedAt}
			if rec.TitleGiven {
				ins[j].Title = rec.Title
			}
		}
		res, errs, err := ix.IngestBatch(ctx, ins)
		if err != nil {
			return sum, fmt.Errorf("rebuild: %w", err)
		}
		for j := range part {
			if errs[j] != nil {
				failed = append(failed, errs[j])
				continue
			}
			sum.Documents++
			sum.Blocks += res[j].Blocks
		}
		if opts.Progress != nil {
			opts.Progress(i+len(part), len(recs))
		}
	}
	if len(failed) > 0 {
		return sum, &DocumentError{Errs: failed}
	}
	return sum, nil
}

// swap moves dir/tmp/index.duckdb over dir/index.duckdb and makes the rename
// durable. The new file was closed cleanly, so it has no write-ahead log;
// the live file's log was folded in by Inspect, and any left is removed
// first, so DuckDB never replays an old log onto the new file.
func swap(dir, tmp string) error {
	live := filepath.Join(dir, index.FileName)
	if err := os.Remove(live + ".wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(filepath.Join(tmp, index.FileName), live); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return os.RemoveAll(tmp)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
