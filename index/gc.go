package index

// Garbage: orphan blobs, crash leftovers, generations kept for a rollback.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/layout"
)

// DefaultGCMinAge is GCOptions.MinAge's default.
const DefaultGCMinAge = time.Hour

// GCOptions configure GC. The zero value removes, for real, orphans and
// temporary files older than DefaultGCMinAge.
type GCOptions struct {
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
	// MinAge spares orphan blobs and temporary files of the blob store
	// younger than it: an ingest uploads its blobs before it takes the
	// writer lock to store the records that name them, so a blob that no
	// record names yet may be in use. 0 means DefaultGCMinAge; a negative
	// value spares none, for a caller that knows no ingest runs (the
	// escurel gc command: its process holds the directory alone).
	MinAge time.Duration
}

// GCResult is what GC removed (or, with DryRun, would remove).
type GCResult struct {
	DryRun bool `json:"dry_run"`
	// OrphanBlobs are blob ids no record names.
	OrphanBlobs []string `json:"orphan_blobs"`
	OrphanBytes int64    `json:"orphan_bytes"`
	// TempFiles are temporary files a crash left: paths in a file://
	// blob store, names in the index directory.
	TempFiles []string `json:"temp_files"`
	TempBytes int64    `json:"temp_bytes"`
	// Generations are unfinished generations (newer than the live one,
	// built by no one) and generations older than the last purge.
	Generations     []string `json:"generations"`
	GenerationBytes int64    `json:"generation_bytes"`
	// Repacked is, for a blob store in the pack layout, the packs GC
	// rewrote: those holding an orphan blob, those whose dead bytes
	// (older record versions, deleted records) are at least
	// GCPackDeadShare of their data, and those under GCPackFoldBelow,
	// folded together. Nil in the loose layout or a dry run.
	Repacked *blobstore.RepackResult `json:"repacked,omitempty"`
}

// GCPackDeadShare is the share of dead bytes from which GC rewrites a
// pack of a blob store in the pack layout.
const GCPackDeadShare = 0.5

// GCPackFoldBelow is the size in bytes (1 MiB) under which GC folds packs
// together (the packs of single writes and of deletions' tombstones).
const GCPackFoldBelow = 1 << 20

// autoFoldBelow is the size in bytes (64 KiB) under which a write's
// pack counts as small for foldAfter: a single document's, a removal's
// tombstone, a batch's records of a few documents. A bulk ingest's packs
// are larger, so it is not folded as it goes (GC folds up to
// GCPackFoldBelow).
const autoFoldBelow = 64 << 10

// autoFoldPacks is how many small packs (autoFoldBelow) a write leaves
// before foldAfter folds them: at 256 a Sync lists about 0.1 ms more and
// a fold rewrites at most 16 MiB (a few hundred KiB for single writes).
// Measured on a file:// store (2 cores) with a pack a write: a Sync took
// 1.1 ms at 121 packs and 5.5 ms at 6,421, an open and its records 5.6 ms
// and 155 ms. A variable for tests.
var autoFoldPacks = 256

// foldAfter starts folding the blob store's small packs in the background
// once a write has left autoFoldPacks of them (as Lucene's merge policy
// merges small segments as writes add them), so that a server taking
// single writes all day keeps a bounded number of packs without an
// operator's GC. The fold takes writeMu after the write has returned, as
// a full-text merge does (mergeAfter), and changes what no read sees:
// Repack with FoldBelow writes the small packs' live entries (records,
// tombstones, blobs, orphans too) into one pack with the highest of their
// sequence numbers, durably, before removing them; a reader that finds a
// pack gone lists the packs again (blobstore's loadPacks). Only for a
// file:// or mem:// blob store the Index opened itself (not
// Options.Blobs: its owner decides) in the pack layout: on an object
// store each pack folded is two round trips under writeMu, so GC, which
// an operator schedules, folds there. A fold that fails is logged and
// changes nothing, and is tried again once autoFoldPacks more small packs
// have come; a damaged small pack is left out (logged once) and the
// others fold. WaitForMerges runs a fold still pending. The caller holds
// writeMu.
func (ix *Index) foldAfter() {
	if !ix.ownBlobs || ix.readOnly || ix.folding || !ix.blobs.Packed() || ix.blobs.Remote() ||
		ix.blobs.SmallPacks(autoFoldBelow) < max(autoFoldPacks, ix.foldRetryAt) {
		return
	}
	ix.folding = true
	ix.merges.Add(1)
	go func() {
		defer ix.merges.Done()
		ix.writeMu.Lock()
		defer ix.writeMu.unlockMerge() // packs folded: no documents row changes
		if !ix.folding || ix.cur.Load() == nil {
			return // WaitForMerges ran it, or closed
		}
		ix.fold()
	}()
}

// fold is foldAfter's fold; the caller holds writeMu. Its error is
// logged, and returned for WaitForMerges.
func (ix *Index) fold() error {
	ix.folding = false
	res, err := ix.blobs.Repack(context.Background(), blobstore.RepackOptions{MinDead: 2, FoldBelow: autoFoldBelow})
	if res != nil {
		for _, key := range res.Damaged {
			if !ix.foldDamaged[key] {
				if ix.foldDamaged == nil {
					ix.foldDamaged = map[string]bool{}
				}
				ix.foldDamaged[key] = true
				slog.Warn("index: a damaged pack of the blob store is left out of the folding of small packs (escurel verify reports it)", "blobs", ix.blobs.Redacted(), "pack", key)
			}
		}
	}
	// A fold that failed, or left small packs out (damaged) or too few
	// to fold, is tried again once autoFoldPacks more have come.
	ix.foldRetryAt = ix.blobs.SmallPacks(autoFoldBelow) + autoFoldPacks
	if err != nil {
		slog.Warn("index: folding the blob store's small packs failed; tried again after more writes (escurel gc folds them too)", "blobs", ix.blobs.Redacted(), "err", err)
		return fmt.Errorf("folding the blob store's small packs: %w", err)
	}
	slog.Debug("index: folded the blob store's small packs", "blobs", ix.blobs.Redacted(), "folded", res.Folded, "bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter)
	return nil
}

// Bytes is the total size of what GC removed, in bytes.
func (r *GCResult) Bytes() int64 { return r.OrphanBytes + r.TempBytes + r.GenerationBytes }

// GC removes orphan blobs (blobs no record names: the old bytes of
// replaced and deleted documents) and crash leftovers: temporary files of
// the blob store and the index directory, and unfinished generations
// (through the directory's one cleaner, layout.Dir.Clean, keeping every
// finished generation a rollback may use). It holds writes back while it
// runs. Removing an orphan blob erases it on a file:// or mem:// store; a
// versioned object store keeps the old version.
func (ix *Index) GC(ctx context.Context, opts *GCOptions) (*GCResult, error) {
	if opts == nil {
		opts = &GCOptions{}
	}
	minAge := opts.MinAge
	if minAge == 0 {
		minAge = DefaultGCMinAge
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	return ix.gcLocked(ctx, opts, minAge)
}

// gcLocked is GC's work; the caller holds writeMu.
func (ix *Index) gcLocked(ctx context.Context, opts *GCOptions, minAge time.Duration) (*GCResult, error) {
	if _, err := ix.live(); err != nil {
		return nil, err
	}
	res := &GCResult{DryRun: opts.DryRun}
	young := func(t time.Time) bool { return minAge > 0 && time.Since(t) < minAge }
	orphans, err := ix.orphans(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	if !opts.DryRun {
		// An ingest that found one of these blobs stored prepares again
		// (MinAge alone does not spare a blob an ingest re-uses: it is not
		// written again, so its time stays old).
		defer ix.blobsGone.Add(1)
	}
	var drop []string
	var dropBytes int64
	for _, b := range orphans {
		if young(b.ModTime) {
			continue
		}
		drop = append(drop, b.ID)
		dropBytes += b.Size
	}
	if !opts.DryRun {
		// One pass over the packs for all of them.
		r, err := ix.blobs.Repack(ctx, blobstore.RepackOptions{DropBlobs: drop, MinDead: GCPackDeadShare, FoldBelow: GCPackFoldBelow})
		if ix.blobs.Packed() {
			res.Repacked = r
		}
		if err != nil {
			return res, fmt.Errorf("gc: %w", err)
		}
	}
	res.OrphanBlobs, res.OrphanBytes = drop, dropBytes
	tmps, err := ix.blobs.TempFiles(ctx)
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	for _, f := range tmps {
		if young(f.ModTime) {
			continue
		}
		if !opts.DryRun {
			if err := ix.blobs.RemoveTemp(f.Path); err != nil {
				return res, fmt.Errorf("gc: %w", err)
			}
		}
		res.TempFiles = append(res.TempFiles, f.Path)
		res.TempBytes += f.Size
	}
	r, err := ix.layout.CleanFiles(math.MaxInt, opts.DryRun)
	res.TempFiles = append(res.TempFiles, r.Temp...)
	res.TempBytes += r.TempBytes
	res.Generations, res.GenerationBytes = r.Generations, r.GenerationBytes
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	return res, nil
}

// orphans lists the blobs no record names. The caller holds writeMu, so
// no record is stored meanwhile.
func (ix *Index) orphans(ctx context.Context) ([]blobstore.BlobInfo, error) {
	recs, err := ix.blobs.Records(ctx)
	if err != nil {
		return nil, err
	}
	named := make(map[string]bool, len(recs))
	for _, r := range recs {
		named[r.BlobID] = true
	}
	all, err := ix.blobs.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []blobstore.BlobInfo
	for _, b := range all {
		if !named[b.ID] {
			out = append(out, b)
		}
	}
	return out, nil
}

// Reclaimable is the disk space that garbage takes, in bytes and counts.
// It reveals sizes: show it only to callers cleared for restricted
// documents (as escurel status does).
type Reclaimable struct {
	// Orphan blobs: no record names them (escurel gc removes them).
	OrphanBlobs     int   `json:"orphan_blobs"`
	OrphanBlobBytes int64 `json:"orphan_blob_bytes"`
	// Generations older than the live one, kept for a rollback (a
	// rebuild keeps --keep of them; a purge removes them all).
	OldGenerations     int   `json:"old_generations"`
	OldGenerationBytes int64 `json:"old_generation_bytes"`
	// Crash leftovers: temporary files and unfinished generations
	// (escurel gc removes them).
	Leftovers     int   `json:"leftovers"`
	LeftoverBytes int64 `json:"leftover_bytes"`
	// PackDeadBytes is, in a blob store in the pack layout, the data of
	// packed entries that no longer count (older record versions,
	// removed records; blobstore.PackStats): escurel gc rewrites the
	// packs past half dead, a purge all of them.
	PackDeadBytes int64 `json:"pack_dead_bytes"`
}

// Bytes is the total, in bytes.
func (r *Reclaimable) Bytes() int64 {
	return r.OrphanBlobBytes + r.OldGenerationBytes + r.LeftoverBytes + r.PackDeadBytes
}

// Reclaimable measures the garbage: orphan blobs, crash leftovers (what GC
// would remove, whatever their age) and the older generations. It holds
// writes back while it lists the blob store.
func (ix *Index) Reclaimable(ctx context.Context) (*Reclaimable, error) {
	g, err := ix.GC(ctx, &GCOptions{DryRun: true, MinAge: -1})
	if err != nil {
		return nil, err
	}
	r := &Reclaimable{OrphanBlobs: len(g.OrphanBlobs), OrphanBlobBytes: g.OrphanBytes,
		Leftovers: len(g.TempFiles) + len(g.Generations), LeftoverBytes: g.TempBytes + g.GenerationBytes}
	ps, err := ix.blobs.PackStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("reclaimable: %w", err)
	}
	r.PackDeadBytes = ps.DeadBytes
	live := ix.Generation()
	gens, err := layout.Generations(ix.dir)
	if err != nil {
		return nil, fmt.Errorf("reclaimable: %w", err)
	}
	leftover := map[string]bool{}
	for _, gen := range g.Generations {
		leftover[gen] = true
	}
	for _, gen := range gens {
		if gen < live && !leftover[gen] {
			r.OldGenerations++
			r.OldGenerationBytes += layout.GenerationBytes(ix.dir, gen)
		}
	}
	return r, nil
}
