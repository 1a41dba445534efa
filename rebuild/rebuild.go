// Package rebuild re-derives an index from its blob store.
//
// The blob store is the source of truth: every document's raw bytes and its
// record. Run lists the records, re-runs the live ingest code on each blob
// (the same extraction, chunking, contextualization, analysis and embedding;
// not a copy of it) into a new index file beside the live one, and swaps it
// in with a rename. It is how an operator changes a setting the manifest
// pins (embedder, chunker, analyzer, contextualize mode) or recovers a lost
// or damaged index file. Document times come from the records, never from
// the clock, so a rebuild with unchanged settings reproduces the ingested
// rows.
//
// The live file stays untouched until the swap; a rebuild that fails or is
// interrupted leaves it as it was.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	// is no readable live index. BlobURL and Blobs are ignored.
	Index index.Options
	// Progress, when not nil, is called after each batch with the number of
	// documents done and the total.
	Progress func(done, total int)
}

// Summary reports a finished rebuild.
type Summary struct {
	Documents int
	Blocks    int
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

// batch is the number of documents per transaction.
const batch = 64

// tmpName is the directory the new index is built in, inside Dir.
const tmpName = "rebuild.tmp"

// Run rebuilds the index in opts.Dir from opts.Blobs. It fails, leaving the
// live index as it was, when the live index is in use by another process,
// when a setting is unknown, when a record's blob is missing or corrupt, or
// when any document fails to derive (*DocumentError).
func Run(ctx context.Context, opts Options) (Summary, error) {
	start := time.Now()
	var sum Summary
	if opts.Blobs == nil {
		return sum, errors.New("rebuild: no blob store")
	}
	settings := opts.Index
	settings.BlobURL, settings.Blobs = "", opts.Blobs
	live, err := index.ReadManifest(ctx, opts.Dir)
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
		return sum, fmt.Errorf("rebuild: %w (close other escurel processes; to rebuild a damaged file, move it away first)", err)
	}

	tmp := filepath.Join(opts.Dir, tmpName)
	if err := os.RemoveAll(tmp); err != nil { // a crashed rebuild's leftovers
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	ix, err := index.Open(ctx, tmp, &settings)
	if err != nil {
		return sum, fmt.Errorf("rebuild: %w", err)
	}
	sum, err = fill(ctx, ix, opts)
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

// fill ingests every record's blob into ix.
func fill(ctx context.Context, ix *index.Index, opts Options) (Summary, error) {
	sum := Summary{Manifest: ix.Manifest()}
	recs, err := opts.Blobs.Records(ctx)
	if err != nil {
		return sum, fmt.Errorf("rebuild: %w", err)
	}
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
// the live file's log was folded in by ReadManifest, and any left is removed
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
