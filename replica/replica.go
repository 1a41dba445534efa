// Package replica publishes a writer's verified generations to an object
// store (any gocloud.dev/blob URL: s3://, gs://, azblob://, file://) and
// serves them from read replicas on other machines: one writer, any
// number of stateless readers over immutable objects, as MotherDuck read
// scaling, LanceDB on S3 and Quickwit do. See ARCHITECTURE.md, "Past one
// machine".
//
// The objects under the publish URL:
//
//	generations/<gen-NNNNNN>-<digest>-<sha16>/index.duckdb   the generation's file (immutable)
//	generations/<gen-NNNNNN>-<digest>-<sha16>/fts-image-<sha16 of the image>  its full-text index's image (optional, immutable)
//	generations/<gen-NNNNNN>-<digest>-<sha16>/manifest.json  its Pointer, without Seq (immutable)
//	current/<seq, 20 digits>                         a Pointer: publish number seq
//
// sha16 is the first 16 hex digits of the file's SHA-256: the digest
// covers the rows, not the bytes, and two copies of the same rows (a
// generation published again after a delete undid an ingest) differ, so
// each distinct file has a key of its own and an object, once written,
// never changes.
//
// The valid pointer with the highest sequence is CURRENT. A publisher reads it
// before it copies the live generation and creates the next one with a
// conditional write (gocloud's WriterOptions.IfNotExist; on file://, under
// an flock as well, since fileblob's check is not atomic): of two
// publishers that read the same CURRENT, exactly one moves it, and the
// other fails with ErrConflict, so an older generation never replaces a
// newer one that was published meanwhile. Pointers are never deleted.
//
// A replica downloads the file CURRENT names into a directory of its own,
// checks its size and SHA-256, opens it, checks the digest of its rows
// against the writer's (index.Verification.Digest), and only then serves
// it; it polls CURRENT and switches the same way, without dropping a
// request. A writer that dies leaves the objects, and the replicas go on
// serving the last published generation; index.ReplicaInfo says how old it
// is.
//
// The digest is computed from the rows (34 s and 2.4 GB at 1M passages)
// only when the publisher's build may read the file otherwise than the
// replica's: when the pointer's Build (the SHA-256 of the publisher's
// executable) is not the replica's own, or is absent (Options.CheckDigest
// forces it always). Otherwise the file's SHA-256 stands for it: the
// publisher copied the live generation's file, log folded, under its
// writer lock and verified the rows of a read transaction begun under
// the same hold (their snapshot: the copied rows), so the bytes checked
// are those of the verified rows, and the same executable reads the same
// rows from the same bytes.
//
// The full-text image, when published, is downloaded beside the file: the
// open reads it instead of the full-text tables when its fingerprint is
// the file's, and the tables when it is missing, damaged or does not
// match, as a writer's open does.
package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/memblob" // a replica's default blob store: none (mem://)
	"gocloud.dev/gcerrors"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/hooks"
)

// Pointer describes one published generation; current/<seq> holds it.
type Pointer struct {
	// Seq is the publish number: CURRENT is the pointer with the highest.
	Seq int64 `json:"seq,omitempty"`
	// Generation is the writer's name for it (gen-NNNNNN).
	Generation string `json:"generation"`
	// Digest is index.Verification.Digest of its rows.
	Digest string `json:"digest"`
	// Object is the key prefix of its objects:
	// generations/<gen>-<digest>-<first 16 hex digits of SHA256>/.
	Object string `json:"object"`
	// Bytes and SHA256 are the index file's size and hash (hex), checked
	// on download before DuckDB opens it.
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// ImageBytes and ImageSHA256 are those of the full-text index's
	// image (object fts-image-<first 16 hex digits of ImageSHA256>, under
	// Object), checked on download; absent when none was
	// published (a publisher before schema 18's image file, or one whose
	// image could not be saved): a replica then loads the full-text index
	// from the file's tables, which takes longer (1.4 s at 1M passages
	// against about 0.2 s).
	ImageBytes  int64  `json:"image_bytes,omitempty"`
	ImageSHA256 string `json:"image_sha256,omitempty"`
	// Documents and Blocks are the generation's counts.
	Documents int64 `json:"documents"`
	Blocks    int64 `json:"blocks"`
	// PublishedAt is the publisher's clock when it moved CURRENT.
	PublishedAt time.Time `json:"published_at"`
	// EscurelVersion and SchemaVersion are the publisher's.
	EscurelVersion string `json:"escurel_version"`
	SchemaVersion  int    `json:"schema_version"`
	// Build identifies the publisher's executable: "sha256:" and the
	// first 32 hex digits of its SHA-256 (buildID); absent from a
	// publisher before it, or one that could not read its executable. A
	// replica of the same Build trusts the file's SHA-256 for its digest;
	// any other computes the digest from the rows. (Version numbers
	// would not do: index.Version is not changed by every commit that
	// changes how rows are read.)
	Build string `json:"build,omitempty"`
}

const (
	currentPrefix = "current/"
	genPrefix     = "generations/"
	fileName      = "index.duckdb"
	imagePrefix   = "fts-image-"
	manifestName  = "manifest.json"
)

// ErrConflict is returned, wrapped in a *ConflictError, by Publish when
// CURRENT moved between the start of the publish and its last step:
// another publisher got there first, and nothing of this publish is
// served (its immutable objects stay, harmless).
var ErrConflict = errors.New("replica: another publisher moved CURRENT")

// errDamaged is wrapped by a download whose size or SHA-256 is not the
// published one's.
var errDamaged = errors.New("the object is damaged; refused")

// ErrNothingPublished is returned, wrapped, by Open when the URL holds no
// published generation yet.
var ErrNothingPublished = errors.New("replica: nothing published")

// ConflictError reports a lost publish race: Seq is the pointer this
// publisher tried to create, which another created first.
type ConflictError struct {
	To  string
	Seq int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("publish to %s: another publisher moved CURRENT to publish %d first; nothing was published by this one (publish again)", e.To, e.Seq)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// OpenBucket opens the publish URL as a gocloud bucket, as the blob store
// reads bucket URLs (blobstore.OpenBucket: a path after an object store's
// bucket is a key prefix; file:// is created, private to its owner, with
// temporary files beside their final names).
func OpenBucket(ctx context.Context, urlstr string) (*blob.Bucket, error) {
	return blobstore.OpenBucket(ctx, urlstr)
}

// Latest returns CURRENT: the valid pointer with the highest sequence
// under the bucket; ok is false when none was published. Pointers above
// it that are damaged or foreign (not JSON, over 64 KiB, fields that do
// not check) are passed over, as replicas pass them over.
func Latest(ctx context.Context, b *blob.Bucket) (p *Pointer, ok bool, err error) {
	seqs, err := pointers(ctx, b)
	if err != nil {
		return nil, false, err
	}
	p, _, err = highestValid(ctx, b, seqs)
	return p, p != nil, err
}

// pointers lists the numbers of the pointers under current/, highest
// first.
func pointers(ctx context.Context, b *blob.Bucket) ([]int64, error) {
	it := b.List(&blob.ListOptions{Prefix: currentPrefix})
	var seqs []int64
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", currentPrefix, err)
		}
		name := strings.TrimPrefix(o.Key, currentPrefix)
		if len(name) != 20 || o.IsDir {
			continue // not a pointer (a lock file)
		}
		if seq, err := strconv.ParseInt(name, 10, 64); err == nil && seq >= 0 {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	slices.Reverse(seqs)
	return seqs, nil
}

// highestValid reads the pointers seqs (highest first) until one is
// valid and returns it (nil when none is); damaged reports those passed
// over (nil when none). err is a failure to read (the network), not a
// damaged pointer.
func highestValid(ctx context.Context, b *blob.Bucket, seqs []int64) (p *Pointer, damaged, err error) {
	var bad []error
	for _, seq := range seqs {
		p, derr, err := readPointer(ctx, b, seq)
		if err != nil {
			return nil, nil, err
		}
		if derr != nil {
			bad = append(bad, derr)
			continue
		}
		if p != nil {
			return p, errors.Join(bad...), nil
		}
	}
	return nil, errors.Join(bad...), nil
}

// readPointer reads current/<seq>: p is nil when it is gone; damaged says
// why it is not a pointer; err is a failure to read it.
func readPointer(ctx context.Context, b *blob.Bucket, seq int64) (p *Pointer, damaged, err error) {
	key := pointerKey(seq)
	data, err := readSmall(ctx, b, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil, nil
	}
	if errors.Is(err, errTooBig) {
		return nil, fmt.Errorf("%s: %w: not a publish pointer, passed over", key, err), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", key, err)
	}
	p = &Pointer{}
	var why []string
	if err := json.Unmarshal(data, p); err != nil {
		why = append(why, err.Error())
	} else {
		if p.Seq != seq {
			why = append(why, fmt.Sprintf("seq is %d, not %d", p.Seq, seq))
		}
		if p.Digest == "" {
			why = append(why, "no digest")
		}
		if !strings.HasPrefix(p.Object, genPrefix) || strings.Contains(p.Object, "..") {
			why = append(why, fmt.Sprintf("object %q is not under %s", p.Object, genPrefix))
		}
		if len(p.SHA256) != 64 || p.Bytes <= 0 {
			why = append(why, "no file size or SHA-256")
		}
		if (p.ImageSHA256 != "" || p.ImageBytes != 0) && (len(p.ImageSHA256) != 64 || p.ImageBytes <= 0) {
			// The image is a cache: fields that do not check name
			// none, and the file is served from its tables.
			p.ImageSHA256, p.ImageBytes = "", 0
		}
	}
	if len(why) > 0 {
		return nil, fmt.Errorf("%s is not a publish pointer (%s): passed over", key, strings.Join(why, "; ")), nil
	}
	return p, nil, nil
}

// errTooBig is readSmall's answer to an object over maxSmall.
var errTooBig = fmt.Errorf("over %d KiB", maxSmall>>10)

// maxSmall bounds what is read of a pointer or a manifest: a few hundred
// bytes each; anything bigger is not one.
const maxSmall = 64 << 10

// readSmall reads a pointer or a manifest, refusing one over maxSmall.
func readSmall(ctx context.Context, b *blob.Bucket, key string) ([]byte, error) {
	rd, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	data, err := io.ReadAll(io.LimitReader(rd, maxSmall+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSmall {
		return nil, errTooBig
	}
	return data, nil
}

func pointerKey(seq int64) string { return fmt.Sprintf("%s%020d", currentPrefix, seq) }

// Options configure Open.
type Options struct {
	// Poll is how often Run reads CURRENT. Default DefaultPoll.
	Poll time.Duration
	// Index configures the opened generations: Blobs or BlobURL (a
	// store to read Markdown and text documents' text from, for
	// Index.DocumentText; default none, mem://), the embedder's reach
	// (its identity must be the published one's), MemoryLimit.
	Index *index.Options
	// Logger receives a line for the open, each switch and each failed
	// poll. Default slog.Default().
	Logger *slog.Logger
	// CheckDigest computes the digest of every download's rows, even
	// when the publisher runs this same executable (Pointer.Build; see
	// the package comment): 34 s and about 2.4 GB of memory at 1M
	// passages, at each open and switch.
	CheckDigest bool
	// Now is the replica's clock (CheckedAt, ServingSince). Default
	// time.Now.
	Now func() time.Time
}

// DefaultPoll is the default Options.Poll.
const DefaultPoll = 5 * time.Second

// Replica is a read replica: an *index.Index on a directory of its own,
// serving the generation CURRENT names at the URL it follows, refusing
// every write (index.ErrReadOnly). Safe for concurrent use.
type Replica struct {
	from   string // the URL followed, redacted (blobstore.Redact): only printed
	bucket *blob.Bucket
	ix     *index.Index
	poll   time.Duration
	log    *slog.Logger
	now    func() time.Time
	// checkDigest: Options.CheckDigest.
	checkDigest bool
	mu          sync.Mutex // one poll at a time
	// refused holds, by refusalKey, why a published file was refused
	// (damaged bytes, a digest that differs): a pointer names an
	// immutable object, so it is not downloaded again. Under mu.
	refused map[string]string
}

// refusalKey names a published file: its publish and its hash.
func refusalKey(p *Pointer) string { return fmt.Sprintf("%d/%s", p.Seq, p.SHA256) }

// Open downloads the generation CURRENT names at urlstr into dir (the
// replica's own directory, which it locks; never a writer's), checks it
// and opens it. Errors: ErrNothingPublished when nothing is published;
// a download whose size, SHA-256 or digest is not the published one's.
func Open(ctx context.Context, urlstr, dir string, opts *Options) (*Replica, error) {
	if opts == nil {
		opts = &Options{}
	}
	r := &Replica{from: blobstore.Redact(urlstr), poll: opts.Poll, log: opts.Logger, now: opts.Now, checkDigest: opts.CheckDigest}
	if r.poll <= 0 {
		r.poll = DefaultPoll
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	// A file:// bucket would be created when missing (OpenBucket's
	// create_dir, which a publisher wants): a reader names an empty one
	// as nothing published, and leaves nothing behind.
	if u, perr := url.Parse(urlstr); perr == nil && u.Scheme == "file" {
		if _, err := os.Stat(filepath.FromSlash(u.Path)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("replica of %s: %w (the directory does not exist; run escurel publish --to on the writer first)", blobstore.Redact(urlstr), ErrNothingPublished)
		}
	}
	b, err := OpenBucket(ctx, urlstr)
	if err != nil {
		return nil, err
	}
	seqs, err := pointers(ctx, b)
	var p *Pointer
	var damaged error
	if err == nil {
		p, damaged, err = highestValid(ctx, b, seqs)
	}
	if err == nil && p == nil {
		err = fmt.Errorf("replica of %s: %w (run escurel publish --to on the writer first)", blobstore.Redact(urlstr), errors.Join(ErrNothingPublished, damaged))
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	check := r.mustCheckDigest(p)
	ix, err := hooks.OpenReplica(ctx, dir, r.fill(ctx, b, p), r.info(p), opts.Index, check)
	if err != nil {
		b.Close()
		return nil, err
	}
	r.bucket, r.ix = b, ix.(*index.Index)
	msg := ""
	if damaged != nil {
		msg = fmt.Sprintf("replica of %s: %v", r.from, damaged)
	}
	hooks.Checked(r.ix, r.now(), msg)
	r.log.Info("replica serving", "from", r.from, "generation", p.Generation, "digest", p.Digest, "seq", p.Seq,
		"digest_computed", check, "fts_image", hooks.FromImage(r.ix))
	return r, nil
}

// mustCheckDigest reports whether a download of p must have its digest
// computed from its rows: asked (Options.CheckDigest), or a publisher
// whose executable may read the file otherwise than this one (another
// Build, or none named, or this one's unknown). Fails closed: any doubt
// computes it.
func (r *Replica) mustCheckDigest(p *Pointer) bool {
	own := buildID()
	return r.checkDigest || own == "" || p.Build != own
}

// info is the index.ReplicaInfo of pointer p.
func (r *Replica) info(p *Pointer) index.ReplicaInfo {
	return index.ReplicaInfo{From: r.from, Generation: p.Generation, Digest: p.Digest, Seq: p.Seq, PublishedAt: p.PublishedAt}
}

// fill returns the function that downloads p's file to a path, checking
// its size and SHA-256 and making it durable, then its full-text image,
// if published, beside it (imagePath).
func (r *Replica) fill(ctx context.Context, b *blob.Bucket, p *Pointer) func(string) error {
	return func(path string) error {
		key := p.Object + fileName
		n, sum, err := download(ctx, b, key, path, true)
		if err != nil {
			return fmt.Errorf("replica of %s: download %s: %w", r.from, key, err)
		}
		if n != p.Bytes || sum != p.SHA256 {
			return fmt.Errorf("replica of %s: download %s: %d bytes with SHA-256 %s, not the published %d bytes with %s: %w",
				r.from, key, n, sum, p.Bytes, p.SHA256, errDamaged)
		}
		if p.ImageSHA256 != "" {
			if err := fillImage(ctx, b, p, hooks.ImagePath(path)); err != nil {
				os.Remove(hooks.ImagePath(path))
				r.log.Warn("replica: the full-text image was not downloaded; the generation loads its full-text index from its tables instead (slower)", "from", r.from, "generation", p.Generation, "err", err)
			}
		}
		return nil
	}
}

// fillImage downloads p's full-text image to path, checking its size and
// SHA-256. It is not synced: the open checks it (its own hash, and its
// fingerprint against the file's rows) and reads the tables instead of a
// damaged or missing one.
func fillImage(ctx context.Context, b *blob.Bucket, p *Pointer, path string) error {
	key := imageKey(p)
	n, sum, err := download(ctx, b, key, path, false)
	if err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	if n != p.ImageBytes || sum != p.ImageSHA256 {
		return fmt.Errorf("download %s: %d bytes with SHA-256 %s, not the published %d bytes with %s: %w",
			key, n, sum, p.ImageBytes, p.ImageSHA256, errDamaged)
	}
	return nil
}

// download copies object key of b to the file path (created 0600, or
// truncated), synced when sync is set, and returns its size and SHA-256
// (hex).
func download(ctx context.Context, b *blob.Bucket, key, path string, sync bool) (n int64, sum string, err error) {
	in, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil && sync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// Index returns the replica's index, for searches (package serve, or a
// library user). Its writes fail with index.ErrReadOnly.
func (r *Replica) Index() *index.Index { return r.ix }

// Poll reads CURRENT once and, when it names another digest with a higher
// sequence, downloads, checks and switches to it; switched says so. When
// it names the digest served, the replica takes its sequence and
// publication time (its age). It reads the next pointers by name, from
// the served one's sequence up, and lists every pointer only when the
// served one is gone (a wiped bucket: a CURRENT below the served one is
// an error). On an error the replica serves what it served, and
// Index().Replica() reports the error until a poll succeeds; damaged
// pointers passed over are reported as an error too, even with switched
// true.
func (r *Replica) Poll(ctx context.Context) (switched bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		hooks.Checked(r.ix, r.now(), msg)
	}()
	cur, _ := r.ix.Replica()
	var seqs []int64 // above cur.Seq, highest first
	for seq := cur.Seq + 1; ; seq++ {
		ok, err := r.bucket.Exists(ctx, pointerKey(seq))
		if err != nil {
			return false, fmt.Errorf("replica of %s: %w", r.from, err)
		}
		if !ok {
			break
		}
		seqs = append([]int64{seq}, seqs...)
	}
	if len(seqs) == 0 {
		ok, err := r.bucket.Exists(ctx, pointerKey(cur.Seq))
		if err != nil {
			return false, fmt.Errorf("replica of %s: %w", r.from, err)
		}
		if ok {
			return false, nil // nothing new
		}
		if seqs, err = pointers(ctx, r.bucket); err != nil {
			return false, fmt.Errorf("replica of %s: %w", r.from, err)
		}
		p, damaged, err := highestValid(ctx, r.bucket, seqs)
		if err != nil {
			return false, fmt.Errorf("replica of %s: %w", r.from, err)
		}
		cause := "none is left"
		if p != nil {
			cause = fmt.Sprintf("CURRENT is publish %d, lower than the served one (the bucket was wiped or replaced?)", p.Seq)
		}
		return false, errors.Join(fmt.Errorf("replica of %s: the served publish %d is gone and %s; serving it until a higher one is published", r.from, cur.Seq, cause), damaged)
	}
	p, damaged, err := highestValid(ctx, r.bucket, seqs)
	if err != nil {
		return false, fmt.Errorf("replica of %s: %w", r.from, err)
	}
	if damaged != nil {
		damaged = fmt.Errorf("replica of %s: %w", r.from, damaged)
	}
	if p == nil {
		return false, damaged
	}
	if p.Digest == cur.Digest {
		hooks.Republished(r.ix, p.Seq, p.PublishedAt)
		return false, damaged
	}
	if why, ok := r.refused[refusalKey(p)]; ok {
		return false, errors.Join(fmt.Errorf("replica of %s: publish %d was refused before, not downloaded again (serving publish %d until the next publish): %s",
			r.from, p.Seq, cur.Seq, why), damaged)
	}
	check := r.mustCheckDigest(p)
	if err := hooks.Adopt(ctx, r.ix, r.fill(ctx, r.bucket, p), r.info(p), check); err != nil {
		if errors.Is(err, errDamaged) || errors.Is(err, index.ErrDigestMismatch) {
			if r.refused == nil {
				r.refused = map[string]string{}
			}
			r.refused[refusalKey(p)] = err.Error()
		}
		return false, errors.Join(err, damaged)
	}
	r.log.Info("replica switched", "from", r.from, "generation", p.Generation, "digest", p.Digest, "seq", p.Seq,
		"age", r.now().Sub(p.PublishedAt).Round(time.Millisecond), "digest_computed", check, "fts_image", hooks.FromImage(r.ix))
	return true, damaged
}

// Run polls every Options.Poll until ctx is done, logging failed polls;
// it returns ctx's error.
func (r *Replica) Run(ctx context.Context) error {
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, err := r.Poll(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("replica poll failed; serving the generation it has", "from", r.from, "err", err)
		}
	}
}

// Close closes the index (waiting for its readers) and the bucket.
func (r *Replica) Close() error {
	return errors.Join(r.ix.Close(), r.bucket.Close())
}
