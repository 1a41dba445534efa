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
	// (one in dirs, or any directory below it) that is missing or holds
	// no file to ingest; without it such a plan is refused with
	// ErrDeleteAll (an unmounted disk or share looks just so, and the
	// documents deleted would lose the sensitivity their records keep).
	AllowDeleteAll bool
	// AllowDowngrade lets IngestOptions.Sensitivity lower the sensitivity
	// of documents that have a higher one; without it such a plan is
	// refused with ErrDowngrade.
	AllowDowngrade bool
}

// SyncPlan is what Sync does, or would do with DryRun.
type SyncPlan struct {
	// Add and Change are the sources of the files to ingest (new, and
	// changed since their document was ingested; a file that cannot be
	// read is among them, and fails as in IngestFiles); Delete the
	// sources of the documents whose file no longer exists. Each sorted.
	Add, Change, Delete []string
	// Raised lists the sources in Add whose bytes are those of a document
	// with a higher sensitivity than the options give (a renamed or moved
	// file): they are ingested at that document's level. Sorted.
	Raised []string
	// NotFromFiles lists the sources of documents under a directory whose
	// file does not exist and that no file walk stored (Ingest, HTTP and
	// MCP uploads, whose source only looks like a path; documents stored
	// before escurel recorded file times and not synced since): Sync
	// leaves them alone (Delete removes them). Sorted.
	NotFromFiles []string
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

// ErrDowngrade is returned, wrapped, when a change would lower the
// sensitivity of documents: by Sync when SyncOptions gives a Sensitivity
// lower than that of a document under a directory and
// SyncOptions.AllowDowngrade is not set; by Rollback and Index.Rollback,
// even with Force, for a generation whose rows rank a document below its
// record. Match it with errors.Is.
var ErrDowngrade = errors.New("index: would lower the sensitivity of documents")

// Sync makes the documents under each directory in dirs what the files
// there are now: it ingests the files that are new or changed, as
// IngestFiles does (the same walk: hidden entries, other extensions and
// symlinked directories skipped; the same size cap and sensitivity rules:
// a document keeps its sensitivity unless its front matter or the options
// say another), and deletes the documents whose source lies under a
// directory and no longer exists (Delete). A renamed file is a deleted
// document and a new one; the new one takes at least the sensitivity of
// any document whose bytes are the file's (SyncPlan.Raised). Only the
// documents a file walk stored (IngestFiles, Sync) are deleted: the
// others are listed in SyncPlan.NotFromFiles and left alone.
//
// A file is read only when its size or modification time differs from
// what the index recorded when it was ingested; if its bytes are still the
// document's, only the recorded time changes (SyncPlan.Touched). So a sync
// of unchanged files costs a walk and one query.
//
// It ingests first, then deletes, so an error (a storage failure, a
// cancelled ctx) never leaves a renamed document deleted and its new name
// missing; the returned summary tells what was done before it. Errors:
// ErrDeleteAll and ErrDowngrade (wrapped), before anything is changed; a
// directory in dirs that exists and is not a directory.
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
	var adds []int              // indexes in w.ingest of the files with no document
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
		// found holds the directories under prefix (prefix included, each
		// ending in "/") in which a file exists: they are not missing.
		found := map[string]bool{}
		if len(files) > 0 {
			found[prefix] = true
		}
		for _, f := range files {
			src := filepath.ToSlash(f.real)
			if f.real != "" {
				markFound(found, prefix, src)
				if listed[src] {
					continue // in an earlier dir too
				}
				listed[src] = true
			}
			d := docs[src]
			if d != nil && o.Sensitivity != "" && level(o.Sensitivity) < level(d.sensitivity) && !o.AllowDowngrade {
				return w, fmt.Errorf("sync %s: refused: %s is %s, and --sensitivity %s would lower it; "+
					"to lower it, sync with --allow-downgrade (SyncOptions.AllowDowngrade): %w", dir, src, d.sensitivity, o.Sensitivity, ErrDowngrade)
			}
			switch {
			case f.err != nil || d == nil:
				w.ingest = append(w.ingest, f)
				if d == nil {
					if f.err == nil {
						adds = append(adds, len(w.ingest)-1)
					}
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
		// the walk picks (then it stays as it is). Only a document a file
		// walk stored (its record has the file's time) is deleted: another
		// one's source merely looks like a path.
		var gone []syncDoc
		for src, d := range docs {
			if !strings.HasPrefix(src, prefix) || listed[src] {
				continue
			}
			if _, err := os.Lstat(filepath.FromSlash(src)); !errors.Is(err, fs.ErrNotExist) {
				markFound(found, prefix, src)
				plan.Unchanged++
				continue
			}
			if d.mtime == 0 {
				plan.NotFromFiles = append(plan.NotFromFiles, src)
				continue
			}
			gone = append(gone, *d)
		}
		if err := guardDeleteAll(dir, prefix, gone, found, o.AllowDeleteAll); err != nil {
			return w, err
		}
		for _, d := range gone {
			w.delete = append(w.delete, d)
			plan.Delete = append(plan.Delete, d.source)
		}
	}
	if err := ix.raiseAdds(ctx, w, adds, o, plan); err != nil {
		return w, err
	}
	for _, l := range [][]string{plan.Add, plan.Change, plan.Delete, plan.Raised, plan.NotFromFiles} {
		sort.Strings(l)
	}
	return w, nil
}

// markFound records in found that the directories holding src, from
// prefix down, exist.
func markFound(found map[string]bool, prefix, src string) {
	if !strings.HasPrefix(src, prefix) {
		return
	}
	for d := src[:strings.LastIndexByte(src, '/')+1]; len(d) >= len(prefix) && !found[d]; d = d[:strings.LastIndexByte(d[:len(d)-1], '/')+1] {
		found[d] = true
	}
}

// guardDeleteAll refuses, unless allow, to delete gone when that deletes
// every document under a directory (dir, or one below it) in which no
// file exists: the directory is missing or empty, as an unmounted disk or
// share is for a while, and its documents would come back as new ones,
// with the options' sensitivity instead of their records'.
func guardDeleteAll(dir, prefix string, gone []syncDoc, found map[string]bool, allow bool) error {
	if allow {
		return nil
	}
	lost := map[string]int{} // the highest directory without a file, from prefix down: documents deleted under it
	for _, d := range gone {
		for p := prefix; ; {
			if !found[p] {
				lost[p]++
				break
			}
			i := strings.IndexByte(d.source[len(p):], '/')
			if i < 0 {
				break
			}
			p = d.source[:len(p)+i+1]
		}
	}
	if len(lost) == 0 {
		return nil
	}
	ds := make([]string, 0, len(lost))
	for d := range lost {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	what := ds[0]
	if what == prefix {
		what = dir
	} else {
		what = filepath.FromSlash(strings.TrimSuffix(what, "/"))
	}
	why := "holds no file to ingest"
	if _, err := os.Stat(what); errors.Is(err, fs.ErrNotExist) {
		why = "is missing"
	}
	more := ""
	if len(ds) > 1 {
		more = fmt.Sprintf(" (and %d more such directories)", len(ds)-1)
	}
	return fmt.Errorf("sync %s: refused: the directory %s %s, and the plan would delete all %d documents under it%s (an unmounted disk?); "+
		"if they are gone for good, sync with --allow-delete-all (SyncOptions.AllowDeleteAll): %w", dir, what, why, lost[ds[0]], more, ErrDeleteAll)
}

// raiseAdds gives each file in w.ingest[adds] (files with no document)
// the highest sensitivity of the documents whose blob is the file's
// bytes, when it is above what o gives: a renamed or moved file, whose
// old document Sync deletes, keeps its level. Only read when some
// document is above that level.
func (ix *state) raiseAdds(ctx context.Context, w *syncWork, adds []int, o *SyncOptions, plan *SyncPlan) error {
	if len(adds) == 0 {
		return nil
	}
	base := level(firstNonEmpty(o.Sensitivity, Public))
	var higher []string
	for _, s := range []string{Internal, Restricted} {
		if level(s) > base {
			higher = append(higher, s)
		}
	}
	var above bool
	if len(higher) > 0 {
		err := ix.db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM documents WHERE sensitivity IN (SELECT unnest(?::VARCHAR[]))`, higher).Scan(&above)
		if err != nil {
			return fmt.Errorf("sync: read documents: %w", err)
		}
	}
	if !above {
		return nil
	}
	ids := make([]string, len(adds))
	for j, i := range adds {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := readFile(w.ingest[i], o.MaxFileBytes)
		if err != nil {
			continue // fails in the ingest, as in IngestFiles (over the cap: no bytes stored)
		}
		ids[j] = blobstore.BlobID(data)
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT blob_id, sensitivity FROM documents WHERE blob_id IN (SELECT unnest(?::VARCHAR[]))`, ids)
	if err != nil {
		return fmt.Errorf("sync: read documents: %w", err)
	}
	defer rows.Close()
	highest := map[string]string{}
	for rows.Next() {
		var id, sens string
		if err := rows.Scan(&id, &sens); err != nil {
			return fmt.Errorf("sync: read documents: %w", err)
		}
		if h, ok := highest[id]; !ok || level(sens) > level(h) {
			highest[id] = sens
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sync: read documents: %w", err)
	}
	for j, i := range adds {
		h, ok := highest[ids[j]]
		if !ok || ids[j] == "" || level(h) <= base {
			continue
		}
		w.ingest[i].sensitivity = h
		plan.Raised = append(plan.Raised, filepath.ToSlash(w.ingest[i].real))
	}
	return nil
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
