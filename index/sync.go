package index

// Folder sync (issue 14): make the documents under directories what the
// files there are now, reading again only what changed.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/escurel/escurel/blobstore"
)

// SyncOptions configure Sync. The zero value (and nil) syncs with
// IngestOptions' defaults.
type SyncOptions struct {
	// IngestOptions apply to the files read, as in IngestFiles. A
	// Language or Sensitivity given here also makes a file whose document
	// has another one be read again (its front matter still wins); Meta
	// given here (not nil) updates the metadata of documents given other.
	IngestOptions
	// DryRun makes the plan and changes nothing (it still reads the
	// files whose size or time changed, to compare their bytes).
	DryRun bool
	// AllowDeleteAll lets a plan delete every document under a directory
	// that is missing or holds no file to ingest; without it such a plan
	// is refused with ErrDeleteAll (an unmounted disk looks just so).
	AllowDeleteAll bool
}

// SyncPlan is what Sync does, or would do with DryRun.
type SyncPlan struct {
	// Add and Change are the sources of the files to ingest (new, and
	// changed since their document was ingested; a file that cannot be
	// read is among them, and fails as in IngestFiles); Delete the
	// sources of the documents whose file no longer exists. Each sorted.
	Add, Change, Delete []string
	// Unchanged counts the files and documents left as they are: their
	// size and modification time are those recorded, or their bytes are
	// (then only the recorded time changes: Touched counts them), or the
	// document's file exists but is not one IngestFiles picks (hidden,
	// another extension).
	Unchanged int
	Touched   int
}

// SyncSummary is what Sync did.
type SyncSummary struct {
	Plan SyncPlan
	// Ingest sums the ingest of Plan.Add and Plan.Change, as IngestFiles
	// does (Skipped lists what the walk skipped).
	Ingest Summary
	// Deleted lists the doc ids deleted: Plan.Delete's documents, less
	// those whose file came back before the delete.
	Deleted []string
	Elapsed time.Duration
}

// ErrDeleteAll is returned, wrapped, by Sync when its plan would delete
// every document under a directory that is missing or holds no file to
// ingest, and SyncOptions.AllowDeleteAll is not set. Match it with
// errors.Is.
var ErrDeleteAll = errors.New("index: sync would delete every document under a directory")

// Sync makes the documents under each directory in dirs what the files
// there are now: it ingests the files that are new or changed, as
// IngestFiles does (the same walk: hidden entries, other extensions and
// symlinked directories skipped; the same size cap and sensitivity rules:
// a document keeps its sensitivity unless its front matter or the options
// say another), and deletes the documents whose source lies under a
// directory and no longer exists (Delete). A renamed file is a deleted
// document and a new one.
//
// A file is read only when its size or modification time differs from
// what the index recorded when it was ingested; if its bytes are still the
// document's, only the recorded time changes (SyncPlan.Touched). So a sync
// of unchanged files costs a walk and one query.
//
// It ingests first, then deletes, so an error (a storage failure, a
// cancelled ctx) never leaves a renamed document deleted and its new name
// missing; the returned summary tells what was done before it. Errors:
// ErrDeleteAll (wrapped), before anything is changed; a directory in dirs
// that exists and is not a directory.
func (ix *Index) Sync(ctx context.Context, dirs []string, opts *SyncOptions) (sum SyncSummary, err error) {
	start := time.Now()
	defer func() { sum.Elapsed = time.Since(start) }()
	o := SyncOptions{}
	if opts != nil {
		o = *opts
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	s, err := ix.acquire()
	if err != nil {
		return sum, err
	}
	w, err := s.planSync(ctx, dirs, &o, &sum)
	s.unref()
	if err != nil || o.DryRun {
		return sum, err
	}
	if len(w.touch) > 0 {
		if err := ix.touch(ctx, w.touch); err != nil {
			return sum, err
		}
	}
	if len(w.ingest) > 0 {
		if err := ix.ingestListed(ctx, w.ingest, o.IngestOptions, &sum.Ingest); err != nil {
			return sum, err
		}
	}
	var gone []string
	for _, d := range w.delete {
		// The file may have come back since the plan: then it stays.
		if _, err := os.Lstat(filepath.FromSlash(d.source)); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, d.docID)
		}
	}
	if len(gone) > 0 {
		done, err := ix.Delete(ctx, gone...)
		sum.Deleted = done
		if err != nil {
			return sum, fmt.Errorf("sync: %w", err)
		}
	}
	return sum, nil
}

// syncWork is what a sync plan does.
type syncWork struct {
	ingest []fileEntry
	touch  []touched
	delete []syncDoc
}

// touched is a file whose bytes are its document's, with the size and
// time to record.
type touched struct {
	docID, blobID string
	size, mtime   int64
}

// syncDoc is a document as a sync plan compares it with its file.
type syncDoc struct {
	docID, source, blobID, status, sensitivity, language, given string
	bytes, mtime                                                int64
}

// planSync lists the files under dirs and compares them with the
// documents, filling sum.Plan and sum.Ingest.Skipped.
func (ix *state) planSync(ctx context.Context, dirs []string, o *SyncOptions, sum *SyncSummary) (*syncWork, error) {
	w := &syncWork{}
	plan := &sum.Plan
	listed := map[string]bool{} // sources of the files found, in all dirs
	for _, dir := range dirs {
		prefix, files, err := listSyncDir(ctx, dir, &sum.Ingest)
		if err != nil {
			return w, err
		}
		var outside []string // files whose source lies elsewhere (a symbolic link out of dir)
		for _, f := range files {
			if f.real != "" && !strings.HasPrefix(filepath.ToSlash(f.real), prefix) {
				outside = append(outside, filepath.ToSlash(f.real))
			}
		}
		docs, err := ix.syncDocs(ctx, prefix, outside)
		if err != nil {
			return w, err
		}
		for _, f := range files {
			src := filepath.ToSlash(f.real)
			if f.real != "" {
				if listed[src] {
					continue // in an earlier dir too
				}
				listed[src] = true
			}
			d := docs[src]
			switch {
			case f.err != nil || d == nil:
				w.ingest = append(w.ingest, f)
				if d == nil {
					plan.Add = append(plan.Add, firstNonEmpty(src, f.path))
				} else {
					plan.Change = append(plan.Change, src)
				}
			case o.Language != "" && o.Language != d.language, o.Sensitivity != "" && o.Sensitivity != d.sensitivity,
				o.Meta != nil && metaJSON(o.Meta) != d.given,
				d.status == statusFailed && d.blobID == "" && f.size <= o.MaxFileBytes: // over a cap since raised
				w.ingest = append(w.ingest, f)
				plan.Change = append(plan.Change, src)
			case d.mtime != 0 && d.mtime == f.mtime && d.bytes == f.size:
				plan.Unchanged++
			case f.size > o.MaxFileBytes:
				w.ingest = append(w.ingest, f) // recorded as over the cap, unread
				plan.Change = append(plan.Change, src)
			default:
				data, err := readFile(f, o.MaxFileBytes)
				if err == nil && d.status == statusOK && blobstore.BlobID(data) == d.blobID {
					w.touch = append(w.touch, touched{docID: d.docID, blobID: d.blobID, size: int64(len(data)), mtime: f.mtime})
					plan.Unchanged++
					plan.Touched++
					continue
				}
				w.ingest = append(w.ingest, f) // a read error fails there, as in IngestFiles
				plan.Change = append(plan.Change, src)
			}
		}
		// Documents under dir whose file was not found: gone, or not one
		// the walk picks (then it stays as it is).
		under, deleted := 0, 0
		for src, d := range docs {
			if !strings.HasPrefix(src, prefix) || listed[src] {
				continue
			}
			under++
			if _, err := os.Lstat(filepath.FromSlash(src)); errors.Is(err, fs.ErrNotExist) {
				w.delete = append(w.delete, *d)
				plan.Delete = append(plan.Delete, src)
				deleted++
			} else {
				plan.Unchanged++
			}
		}
		if len(files) == 0 && deleted > 0 && deleted == under && !o.AllowDeleteAll {
			why := "holds no file to ingest"
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				why = "is missing"
			}
			return w, fmt.Errorf("sync %s: refused: the directory %s, and the plan would delete all %d documents under it (an unmounted disk?); "+
				"if they are gone for good, sync with --allow-delete-all (SyncOptions.AllowDeleteAll): %w", dir, why, deleted, ErrDeleteAll)
		}
	}
	for _, l := range [][]string{plan.Add, plan.Change, plan.Delete} {
		sort.Strings(l)
	}
	return w, nil
}

// listSyncDir lists the files IngestFiles would ingest in dir, and returns
// the source prefix of the documents under dir (its absolute path with
// symbolic links resolved, in slash form, ending in "/"). A missing
// directory has no files, and its prefix is its absolute path.
func listSyncDir(ctx context.Context, dir string, sum *Summary) (string, []fileEntry, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", nil, fmt.Errorf("sync %s: %w", dir, err)
		}
		return dirPrefix(abs), nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("sync: %w", err)
	case !fi.IsDir():
		return "", nil, fmt.Errorf("sync %s: not a directory (escurel ingest takes files)", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", nil, fmt.Errorf("sync %s: %w", dir, err)
	}
	files, err := listFiles(ctx, []string{dir}, sum)
	if err != nil {
		return "", nil, err
	}
	return dirPrefix(real), files, nil
}

// dirPrefix is the source prefix of the documents under the absolute
// directory dir.
func dirPrefix(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// syncDocs reads, by source, the documents under prefix and those whose
// source is one of sources, in one query.
func (ix *state) syncDocs(ctx context.Context, prefix string, sources []string) (map[string]*syncDoc, error) {
	if sources == nil {
		sources = []string{}
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT doc_id, source, blob_id, status, sensitivity, language, bytes, source_mtime, meta_given
		FROM documents WHERE starts_with(source, ?) OR source IN (SELECT unnest(?::VARCHAR[]))`, prefix, sources)
	if err != nil {
		return nil, fmt.Errorf("sync: read documents: %w", err)
	}
	defer rows.Close()
	out := map[string]*syncDoc{}
	for rows.Next() {
		var d syncDoc
		if err := rows.Scan(&d.docID, &d.source, &d.blobID, &d.status, &d.sensitivity, &d.language, &d.bytes, &d.mtime, &d.given); err != nil {
			return nil, fmt.Errorf("sync: read documents: %w", err)
		}
		out[d.source] = &d
	}
	return out, rows.Err()
}

// touch records the size and time of files whose bytes are still their
// documents': in the records first (the source of truth), then in the
// rows. A document changed since the plan is left to the next sync.
func (ix *Index) touch(ctx context.Context, ts []touched) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return err
	}
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.docID
	}
	docs, err := s.currentDocs(ctx, ids)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	recs := s.blobs.NewBatch()
	defer recs.Abort() // a no-op once synced
	var sizes, mtimes []int64
	ids = ids[:0]
	for _, t := range ts {
		d := docs[t.docID]
		if d == nil || d.status != statusOK || d.rec.BlobID != t.blobID {
			continue
		}
		r := *d.rec
		r.Bytes, r.SourceMTime = t.size, t.mtime
		if err := recs.PutRecord(ctx, &r); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		ids, sizes, mtimes = append(ids, t.docID), append(sizes, t.size), append(mtimes, t.mtime)
	}
	if len(ids) == 0 {
		return nil
	}
	if err := recs.Sync(ctx); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `UPDATE documents SET bytes = t.bytes, source_mtime = t.mtime
		FROM (SELECT unnest(?::VARCHAR[]) AS doc_id, unnest(?::BIGINT[]) AS bytes, unnest(?::BIGINT[]) AS mtime) t
		WHERE documents.doc_id = t.doc_id`, ids, sizes, mtimes)
	if err != nil {
		// The records say the new times and the rows the old ones: the
		// next sync reads these files again and finds them unchanged.
		return fmt.Errorf("sync: record file times: %w", err)
	}
	return nil
}
