package index

// Published generations and read replicas (package replica drives them;
// see ARCHITECTURE.md, "Past one machine"). A writer's side: a verified
// copy of the live generation (snapshot). A replica's side: an Index on a
// directory of its own whose generations are downloaded copies, checked
// against the writer's digest before they are served, and which refuses
// every write.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/hooks"
	"github.com/escurel/escurel/internal/layout"
)

// ErrReadOnly is returned, wrapped, by every write (ingest, delete, sync,
// compact, gc, purge, rollback, verify against the blob store) to a read
// replica: its generations are the writer's, and only the writer changes
// them (then publishes).
var ErrReadOnly = errors.New("index: read-only replica")

// ErrDigestMismatch is returned, wrapped, when a replica's download opens
// but the digest of its rows is not the published one: it is refused.
var ErrDigestMismatch = errors.New("index: digest differs from the published one")

// ErrUnverified is returned, wrapped in an *UnverifiedError, when a
// generation to be published does not verify against the blob store.
var ErrUnverified = errors.New("index: generation does not verify")

// UnverifiedError reports a publish refused because the live generation
// does not derive exactly from the blob store (Verification.OK is false):
// a replica would serve rows the source of truth no longer backs.
type UnverifiedError struct {
	Dir          string
	Verification *Verification
}

func (e *UnverifiedError) Error() string {
	v := e.Verification
	return fmt.Sprintf("publish %s (%s): refused: the generation does not verify against the blob store (%d records without rows, %d rows without records, %d blocks without postings, %d without vectors, %d duplicate postings, %d damaged records); run escurel verify, then escurel rebuild",
		e.Dir, v.Generation, len(v.RecordsWithoutRows), len(v.RowsWithoutRecords), len(v.BlocksWithoutPostings),
		len(v.BlocksWithoutVectors), v.DuplicatePostings, len(v.DamagedRecords))
}

// Unwrap returns ErrUnverified.
func (e *UnverifiedError) Unwrap() error { return ErrUnverified }

// ReplicaInfo is what a read replica serves: the writer's generation, its
// digest and when it was published, and the replica's last look at the
// published pointer. Staleness is explicit: Age is how old the served
// generation is; CheckedAt says whether the replica still sees the
// publisher's pointer at all.
type ReplicaInfo struct {
	// From is the URL the replica follows (escurel publish --to).
	From string `json:"from"`
	// Generation is the writer's name for the generation (gen-NNNNNN);
	// the replica's own directory numbers its copies independently.
	Generation string `json:"generation"`
	// Digest is the generation's Verification.Digest, checked on the
	// downloaded copy before it was served.
	Digest string `json:"digest"`
	// Seq is the number of the publish (the CURRENT pointer's sequence).
	Seq int64 `json:"seq"`
	// PublishedAt is when the writer published it (its clock).
	PublishedAt time.Time `json:"published_at"`
	// ServingSince is when this replica began serving it.
	ServingSince time.Time `json:"serving_since"`
	// CheckedAt is the last time the replica read the pointer; zero
	// before the first poll.
	CheckedAt time.Time `json:"checked_at"`
	// CheckError is the last poll's failure (network, a damaged
	// download, a digest that differs), "" after a good one; the replica
	// keeps serving what it has meanwhile.
	CheckError string `json:"check_error,omitempty"`
}

// Age is how long ago the served generation was published, at now.
func (r ReplicaInfo) Age(now time.Time) time.Duration { return now.Sub(r.PublishedAt) }

// Replica returns what a read replica serves; ok is false for an index
// that is not a replica (a writer's).
func (ix *Index) Replica() (info ReplicaInfo, ok bool) {
	p := ix.replica.Load()
	if p == nil {
		return ReplicaInfo{}, false
	}
	return *p, true
}

// readOnlyError says why a replica takes no write.
func (ix *Index) readOnlyError() error {
	from := ""
	if p := ix.replica.Load(); p != nil {
		from = " of " + p.From
	}
	return fmt.Errorf("index %s is a read replica%s: write to the writer's index and publish it (escurel publish): %w", ix.dir, from, ErrReadOnly)
}

// snapshot verifies the live generation against the blob store and writes
// a copy of its file to dst (the write-ahead log folded in). The copy is
// made under writeMu, and the verify is of the copied rows (verifyAt:
// writes go on meanwhile); a generation that does not verify is refused
// with an *UnverifiedError (dst, already written, is the caller's to
// remove).
//
// With image not "", it also writes there the full-text index's image of
// those rows (saved for the live generation first when it is not
// current), for a replica to open from instead of the tables (1.4 s at 1M
// passages). The image is a cache: when it cannot be saved or copied, the
// failure is logged and image is left empty.
func (ix *Index) snapshot(ctx context.Context, dst, image string) (*Verification, error) {
	v, err := ix.verifyAt(ctx, &VerifyOptions{SkipOrphans: true}, func(s *state) error {
		// The fold first: a CHECKPOINT that fails (checkpoint) fails
		// the snapshot before the copy.
		if err := s.checkpoint(ctx); err != nil {
			return fmt.Errorf("snapshot %s: %w", s.path, err)
		}
		if err := s.copyTo(ctx, dst); err != nil {
			return err
		}
		ix.snapshotImage(ctx, s, image)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !v.OK() {
		return v, &UnverifiedError{Dir: ix.dir, Verification: v}
	}
	return v, nil
}

// snapshotImage writes the full-text index's image of the live rows to
// image ("": none), saving it first when it is not current; a failure is
// logged and leaves image empty. The caller holds writeMu: no commit runs,
// so the image, once saved, is of the rows just copied (its fingerprint,
// theirs).
func (ix *Index) snapshotImage(ctx context.Context, s *state, image string) {
	if image == "" {
		return
	}
	s.saveImage(ctx, false)
	if s.fts.ImageCurrent() {
		if err := layout.CopyFile(imagePath(s.path), image); err != nil {
			slog.Warn("index: copying the full-text index's image for a snapshot failed; replicas of it read its tables instead", "index", s.path, "err", err)
			os.Truncate(image, 0)
		}
	}
}

// digestOnly computes the digest of a generation's rows without reading
// the blob store (a replica has none): the coverage lists are not
// meaningful, the digest is.
func (s *state) digestOnly(ctx context.Context) (string, error) {
	v, err := s.verify(ctx, &VerifyOptions{Records: []*blobstore.Record{}, SkipOrphans: true})
	if err != nil {
		return "", err
	}
	return v.Digest, nil
}

// replicaKeep is how many generations a replica's directory keeps: the
// served one and the one before (running searches may still read it).
const replicaKeep = 2

// openReplica takes the lock of the replica's own directory dir, makes a
// generation there, lets fill write the downloaded file into it, opens it,
// and serves it only when its digest is info.Digest (with checkDigest:
// computed from its rows; without, the caller has established that the
// file is the publisher's verified copy byte for byte and that this build
// reads it as the publisher's did, see package replica). opts may set the blob
// store (for DocumentText of Markdown and text documents) and the
// embedder's reach; by default the replica has an empty in-memory store.
func openReplica(ctx context.Context, dir string, fill func(path string) error, info ReplicaInfo, opts *Options, checkDigest bool) (_ *Index, err error) {
	if why := writersDir(dir); why != "" {
		return nil, fmt.Errorf("replica %s: refused: the directory is a writer's index (%s); a replica needs a directory of its own: serving the published generation here would replace the writer's live one, and the replica's cleaning would remove its generations", dir, why)
	}
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	ownBlobs := false
	if o.Blobs == nil {
		// The replica opens the store itself and hands it over: a
		// replica's rows come from the published bucket, not from this
		// store, so the directory records no store and opening it checks
		// none (which the second start would otherwise refuse).
		u := o.BlobURL
		if u == "" {
			u = "mem://"
		}
		if o.Blobs, err = blobstore.Open(ctx, u); err != nil {
			return nil, fmt.Errorf("replica %s: %w", dir, err)
		}
		o.BlobURL, ownBlobs = "", true
		defer func() {
			if err != nil {
				o.Blobs.Close()
			}
		}()
	}
	d, err := layout.Lock(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Unlock()
		}
	}()
	if _, err := d.Clean(replicaKeep); err != nil {
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	gen, err := d.NewGeneration()
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", dir, err)
	}
	if err := fill(d.GenerationPath(gen)); err != nil {
		d.Abandon(gen)
		return nil, err
	}
	ix, err := openIndex(ctx, d, gen, &o, false)
	if err != nil {
		d.Abandon(gen)
		return nil, fmt.Errorf("replica %s: open %s (%s): %w", dir, info.Generation, gen, err)
	}
	ix.readOnly = true
	s := ix.cur.Load()
	digest := info.Digest
	if checkDigest {
		digest, err = s.digestOnly(ctx)
	}
	if err == nil && digest != info.Digest {
		err = fmt.Errorf("replica %s: the download of %s has digest %s, not the published %s: refused: %w", dir, info.Generation, digest, info.Digest, ErrDigestMismatch)
	}
	if err == nil {
		err = d.Publish(gen)
	}
	if err != nil {
		ix.ownDir = false
		ix.Close()
		d.Abandon(gen)
		return nil, err
	}
	ix.ownDir, ix.ownBlobs = true, ownBlobs
	info.ServingSince = ix.cfg.now()
	ix.replica.Store(&info)
	return ix, nil
}

// writersDir says why dir is a writer's index directory, "" when it is
// not: it records a blob store (BLOBS) or holds the default one (blobs/).
// A replica's directory never does: its rows come from the published
// bucket, and the store it may read documents' text from is not recorded.
func writersDir(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, layout.BlobsName)); err == nil {
		return "it records a blob store in " + layout.BlobsName
	}
	if fi, err := os.Stat(filepath.Join(dir, "blobs")); err == nil && fi.IsDir() {
		return "it holds a blob store in blobs/"
	}
	return ""
}

// adopt switches a replica to a newly published generation without a
// moment of downtime: a new local generation, filled by fill, opened and
// warmed, served only when its digest is info.Digest (computed with
// checkDigest, as openReplica); running searches finish on the old one.
// On any error the replica keeps serving what it served.
func (ix *Index) adopt(ctx context.Context, fill func(path string) error, info ReplicaInfo, checkDigest bool) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	old := ix.cur.Load()
	if old == nil {
		return ErrClosed
	}
	if !ix.readOnly {
		return fmt.Errorf("index %s: not a replica: a writer's generations come from its own writes", ix.dir)
	}
	gen, err := ix.layout.NewGeneration()
	if err != nil {
		return fmt.Errorf("replica %s: %w", ix.dir, err)
	}
	if err := fill(ix.layout.GenerationPath(gen)); err != nil {
		ix.layout.Abandon(gen)
		return err
	}
	n, err := ix.openWarm(ctx, gen)
	if err != nil {
		ix.layout.Abandon(gen)
		return fmt.Errorf("replica %s: open %s (%s): %w", ix.dir, info.Generation, gen, err)
	}
	digest := info.Digest
	if checkDigest {
		digest, err = n.digestOnly(ctx)
	}
	if err == nil && digest != info.Digest {
		err = fmt.Errorf("replica %s: the download of %s has digest %s, not the published %s: refused: %w", ix.dir, info.Generation, digest, info.Digest, ErrDigestMismatch)
	}
	if err == nil {
		err = ix.layout.Publish(gen)
	}
	if err != nil {
		n.unref()
		ix.layout.Abandon(gen)
		return err
	}
	ix.publish(n)
	old.unref()
	prev := ix.replica.Load()
	info.ServingSince = ix.cfg.now()
	if prev != nil {
		info.CheckedAt, info.CheckError = prev.CheckedAt, prev.CheckError
	}
	ix.replica.Store(&info)
	ix.layout.Clean(replicaKeep) // best effort: the next switch cleans again
	return nil
}

// checked records a replica's look at the published pointer: when, and
// what failed ("" for nothing).
func (ix *Index) checked(at time.Time, failure string) {
	ix.updateReplica(func(n *ReplicaInfo) { n.CheckedAt, n.CheckError = at, failure })
}

// republished records that the digest the replica serves was published
// again, as publish seq at publishedAt: its age is that publish's.
func (ix *Index) republished(seq int64, publishedAt time.Time) {
	ix.updateReplica(func(n *ReplicaInfo) { n.Seq, n.PublishedAt = seq, publishedAt })
}

// updateReplica replaces the replica's info by a copy that change has
// edited, atomically against other updates (compare and swap, retried); a
// no-op when the index is not a replica.
func (ix *Index) updateReplica(change func(*ReplicaInfo)) {
	for {
		p := ix.replica.Load()
		if p == nil {
			return
		}
		n := *p
		change(&n)
		if ix.replica.CompareAndSwap(p, &n) {
			return
		}
	}
}

func init() {
	hooks.Snapshot = func(ctx context.Context, ix any, dst, image string) (any, error) {
		v, err := ix.(*Index).snapshot(ctx, dst, image)
		return v, err
	}
	hooks.ImagePath = imagePath
	hooks.FromImage = func(ix any) bool {
		s, err := ix.(*Index).acquire()
		if err != nil {
			return false
		}
		defer s.unref()
		return s.fts.FromImage()
	}
	hooks.OpenReplica = func(ctx context.Context, dir string, fill func(string) error, info any, opts any, checkDigest bool) (any, error) {
		o, _ := opts.(*Options)
		return openReplica(ctx, dir, fill, info.(ReplicaInfo), o, checkDigest)
	}
	hooks.Adopt = func(ctx context.Context, ix any, fill func(string) error, info any, checkDigest bool) error {
		return ix.(*Index).adopt(ctx, fill, info.(ReplicaInfo), checkDigest)
	}
	hooks.Checked = func(ix any, at time.Time, failure string) { ix.(*Index).checked(at, failure) }
	hooks.Republished = func(ix any, seq int64, at time.Time) { ix.(*Index).republished(seq, at) }
}
