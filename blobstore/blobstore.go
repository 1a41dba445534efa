// Package blobstore keeps escurel's source of truth: every ingested
// document's raw bytes, content-addressed, and a small JSON record per
// document. Everything in the DuckDB index is derived from these two and can
// be rebuilt from them.
//
// Layout inside the bucket (keys are built by BlobKey and RecordKey):
//
//	LAYOUT                       "packs/1" or "loose/1" (none: an older, loose store)
//	packs/<seq>-<random>.pack    a batch's blobs under 4 MiB, records and removals (pack layout)
//	packs/multi-pack-index-2     the packs' merged footers, a cache (midx.go; -2: ESCMIDX2)
//	blobs/sha256/<64 hex>        raw bytes, named by their SHA-256 (loose layout; large blobs)
//	documents/<doc_id>.json      one Record per document (loose layout)
//
// A new store is in the pack layout unless opened with OpenOptions.Loose;
// Pack converts a loose one.
//
// The bucket is any gocloud.dev/blob URL whose scheme is registered in the
// process. escurel's command registers file:// and mem://; a Go program
// registers what it needs with a blank import (for example
// gocloud.dev/blob/s3blob for s3://).
//
// Durability: Put and PutRecord return only once the object is durable. For
// file:// buckets the store fsyncs the file before the driver renames it into
// place and fsyncs the directory afterwards (gocloud's fileblob renames
// without fsync). Object stores make a completed upload durable themselves.
package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrNotFound is returned, possibly wrapped, when a blob or record does not
// exist. Match it with errors.Is.
var ErrNotFound = errors.New("blobstore: not found")

// ErrCorrupt is returned, possibly wrapped, when stored bytes do not hash to
// their blob id or a record does not decode. Match it with errors.Is.
var ErrCorrupt = errors.New("blobstore: corrupt object")

// Record is the document record stored at documents/<doc_id>.json. Times are
// UTC with microsecond precision, so that they round-trip through DuckDB
// TIMESTAMP columns unchanged.
type Record struct {
	DocID       string    `json:"doc_id"`                // 32 hex digits, see DocID
	Source      string    `json:"source"`                // where the bytes came from: absolute path or URI
	MediaType   string    `json:"media_type"`            // e.g. "text/markdown"
	Title       string    `json:"title"`                 // as extracted at ingest, or as given (TitleGiven)
	TitleGiven  bool      `json:"title_given,omitempty"` // the ingest caller set Title, over extraction
	Sensitivity string    `json:"sensitivity"`           // "public", "internal" or "restricted"
	BlobID      string    `json:"blob_id"`               // "sha256:<64 hex>"; "" only with Error
	Language    string    `json:"language"`              // BCP 47 tag, e.g. "en"
	IngestedAt  time.Time `json:"ingested_at"`           // when this version of the document was ingested
	// Error says why the document's bytes were never stored (a file over
	// the ingest size cap); BlobID is then "". A document whose bytes are
	// stored but fail extraction has no Error here: whether bytes extract
	// is derived, by the index, and retried by a rebuild.
	Error string `json:"error,omitempty"`
	// Bytes is the size of the raw bytes (the blob); for a document
	// whose bytes were never stored (Error), the size its file had.
	// SourceMTime is the modification time of the file the bytes were
	// read from, in nanoseconds since the Unix epoch, 0 when they did not
	// come from a file. escurel sync compares both with the file, to
	// read again only what changed. 0 in records from before they
	// existed.
	Bytes       int64 `json:"bytes,omitempty"`
	SourceMTime int64 `json:"source_mtime_ns,omitempty"`
	// Meta is the metadata the ingest caller gave (index.Input.Meta), as
	// canonical JSON; "" when none. Metadata read from the document's
	// front matter is derived, not recorded.
	Meta Meta `json:"meta,omitempty"`
}

// Meta is a JSON object of metadata in canonical form (keys sorted, as
// encoding/json writes a map[string]any), so that records stay comparable
// with ==; "" is no metadata. In a record it is the object itself, not a
// string.
type Meta string

// MarshalJSON writes the object ("null" for none).
func (m Meta) MarshalJSON() ([]byte, error) {
	if m == "" {
		return []byte("null"), nil
	}
	return []byte(m), nil
}

// UnmarshalJSON reads an object (or null) into canonical form.
func (m *Meta) UnmarshalJSON(b []byte) error {
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("record meta: %w", err)
	}
	if len(v) == 0 {
		*m = ""
		return nil
	}
	c, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("record meta: %w", err)
	}
	*m = Meta(c)
	return nil
}

// checkBlobRef accepts a record's BlobID: a blob id, or "" when the
// record carries an Error instead of bytes.
func checkBlobRef(rec *Record) error {
	if rec.BlobID == "" && rec.Error != "" {
		return nil
	}
	_, err := BlobKey(rec.BlobID)
	return err
}

// Store is a blob bucket holding escurel's blobs and document records. It is
// safe for concurrent use.
type Store struct {
	bucket   *blob.Bucket
	url      string
	localDir string // root directory for file:// buckets, else ""
	remote   bool   // an object store: neither file:// nor mem:// (Remote)
	// px indexes the packs of a store in the pack layout (UsePacks);
	// nil in the loose layout. looseBlobs and looseRecs say whether the
	// store held loose blobs, records when it was opened (written before
	// UsePacks): when not, nothing looks for them.
	px                    *packIndex
	looseBlobs, looseRecs bool
}

// Open opens escurel's blob store at urlstr, a bucket opened as OpenBucket
// does. For file:// URLs it also creates the key directories (blobs/sha256,
// documents) and makes their entries durable. Errors name the URL without
// its secrets (Redact), and never the secrets themselves.
//
// A new store (a bucket holding no blob, record or pack) is put in the
// pack layout (see UsePacks), unless OpenWith's options say otherwise; an
// existing store keeps its layout.
func Open(ctx context.Context, urlstr string) (*Store, error) {
	return OpenWith(ctx, urlstr, nil)
}

// OpenWith opens the store at urlstr as Open does, with options (nil:
// Open's). It fails with ErrLayout when opts.Loose names a store in the
// pack layout.
func OpenWith(ctx context.Context, urlstr string, opts *OpenOptions) (*Store, error) {
	u, err := bucketURL(urlstr)
	if err != nil {
		return nil, fmt.Errorf("open blob store: %w", err)
	}
	s := &Store{url: urlstr, remote: u.Scheme != "file" && u.Scheme != "mem"}
	if u.Scheme == "file" {
		s.localDir = u.Path
		if u.Host == "." {
			s.localDir = "." + u.Path
		}
		// Create the key directories up front and make their entries
		// durable, so that each later write needs one directory fsync.
		for _, d := range []string{"blobs/sha256", "documents"} {
			if err := mkdirDurable(s.localDir, d); err != nil {
				return nil, fmt.Errorf("open blob store %s: %w", Redact(urlstr), scrubError(err, urlstr))
			}
		}
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", Redact(urlstr), scrubError(err, urlstr))
	}
	s.bucket = b
	if err := s.openLayout(ctx, opts); err != nil {
		b.Close()
		return nil, fmt.Errorf("open blob store %s: %w", Redact(urlstr), scrubError(err, urlstr))
	}
	return s, nil
}

// Close releases the bucket. In the pack layout it first writes the
// multi-pack index when this Store's view of the packs moved away from
// the stored one's (packs removed, or 16 added or read from footers the
// stored one does not cover): a cache, whose write failing costs the next
// open footer reads, no error.
func (s *Store) Close() error {
	if s.px != nil {
		// A cache: bounded, so an unreachable object store does not
		// hold Close (the next open reads the footers instead).
		ctx, cancel := context.WithTimeout(context.Background(), closeMidxTimeout)
		s.writeMidx(ctx, closeMidxAdded)
		cancel()
	}
	return s.bucket.Close()
}

// URL returns the URL the store was opened with, secrets included: to
// open it again or record it, not to print (see Redacted).
func (s *Store) URL() string { return s.url }

// Redacted returns the store's URL fit to print: Redact(URL()).
func (s *Store) Redacted() string { return Redact(s.url) }

// BlobID returns the content address of data: "sha256:" and 64 hex digits.
func BlobID(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DocID returns the document id for a source: the first 16 bytes of the
// SHA-256 of the source, as 32 hex digits. The same source always names the
// same document, so re-ingesting it replaces that document.
func DocID(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:16])
}

// IsDocID reports whether s has the shape of a document id (DocID's: 32
// lower-case hex digits), so that a name given to a delete or a read can
// be taken as an id rather than a source.
func IsDocID(s string) bool { return docIDPattern.MatchString(s) }

// The id patterns, matched by hand: a regexp cost a quarter of a batch's
// CPU time (BenchmarkBatch1000).
var (
	blobIDPattern = idPattern{"sha256:", 64} // sha256:<64 lower-case hex>
	docIDPattern  = idPattern{"", 32}        // 32 lower-case hex digits
)

// idPattern is a prefix followed by n lower-case hex digits.
type idPattern struct {
	prefix string
	n      int
}

// MatchString reports whether s is the prefix and n lower-case hex digits.
func (p idPattern) MatchString(s string) bool {
	h, ok := strings.CutPrefix(s, p.prefix)
	if !ok || len(h) != p.n {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// BlobKey returns the bucket key of a blob id, or an error when id is not
// "sha256:" and 64 lower-case hex digits.
func BlobKey(id string) (string, error) {
	if !blobIDPattern.MatchString(id) {
		return "", fmt.Errorf("blob id %q: want sha256:<64 hex digits>", id)
	}
	return "blobs/sha256/" + strings.TrimPrefix(id, "sha256:"), nil
}

// RecordKey returns the bucket key of a document's record, or an error when
// docID is not 32 lower-case hex digits.
func RecordKey(docID string) (string, error) {
	if !docIDPattern.MatchString(docID) {
		return "", fmt.Errorf("document id %q: want 32 hex digits", docID)
	}
	return "documents/" + docID + ".json", nil
}

// Put stores data under its content address and returns the blob id. Storing
// bytes that are already present writes nothing; a stored blob that is
// damaged (its bytes no longer hash to its id) is written again. It returns
// once the blob is durable.
func (s *Store) Put(ctx context.Context, data []byte) (string, error) {
	if s.px != nil {
		return s.putPacked(ctx, data)
	}
	return s.putLoose(ctx, data)
}

// putLoose is Put of a loose blob (blobs/sha256/<hex>).
func (s *Store) putLoose(ctx context.Context, data []byte) (string, error) {
	id := BlobID(data)
	key, _ := BlobKey(id)
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return "", fmt.Errorf("put blob %s: %w", id, err)
	}
	if ok {
		_, err := s.Get(ctx, id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) {
			return "", fmt.Errorf("put blob %s: %w", id, err)
		}
	}
	if err := s.write(ctx, key, data, "application/octet-stream"); err != nil {
		return "", fmt.Errorf("put blob %s: %w", id, err)
	}
	return id, nil
}

// Get returns the bytes of blob id. It fails with ErrNotFound when the blob is
// absent and with ErrCorrupt when the bytes no longer hash to id. In the
// pack layout a blob not found looks again in the packs that other Stores
// wrote since (refreshPacks).
func (s *Store) Get(ctx context.Context, id string) ([]byte, error) {
	data, err := s.get(ctx, id)
	if errors.Is(err, ErrNotFound) && s.px != nil {
		if rerr := s.refreshPacks(ctx, true); rerr != nil {
			return nil, fmt.Errorf("get blob %s: %w", id, rerr)
		}
		data, err = s.get(ctx, id)
	}
	return data, err
}

// get is Get without the refresh.
func (s *Store) get(ctx context.Context, id string) ([]byte, error) {
	key, err := BlobKey(id)
	if err != nil {
		return nil, fmt.Errorf("get blob: %w", err)
	}
	if s.px != nil {
		data, ok, err := s.packedBlob(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("get blob %s: %w", id, err)
		}
		if ok {
			if got := BlobID(data); got != id {
				return nil, fmt.Errorf("get blob %s: packed bytes hash to %s: %w", id, got, ErrCorrupt)
			}
			return data, nil
		}
	}
	data, err := s.read(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", id, err)
	}
	if got := BlobID(data); got != id {
		return nil, fmt.Errorf("get blob %s: bytes hash to %s: %w", id, got, ErrCorrupt)
	}
	return data, nil
}

// BlobIDs returns the ids ("sha256:<hex>") of every blob in the store,
// sorted. Objects under blobs/ that are not blobs (a crashed write's
// temporary file) are left out.
func (s *Store) BlobIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.list(ctx, "blobs/sha256/", false, func(name string, _ int64, _ time.Time) {
		if _, err := BlobKey("sha256:" + name); err == nil {
			ids = append(ids, "sha256:"+name)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	sort.Strings(ids)
	if s.px != nil {
		packed, err := s.packedBlobs(ctx)
		if err != nil {
			return nil, fmt.Errorf("list blobs: %w", err)
		}
		loose := make([]BlobInfo, len(ids))
		for i, id := range ids {
			loose[i].ID = id
		}
		ids = ids[:0]
		for _, b := range mergeBlobInfos(packed, loose) {
			ids = append(ids, b.ID)
		}
	}
	return ids, nil
}

// list calls fn with the name (below prefix, a key directory such as
// "documents/"), and with info its size and time, of each object whose key
// starts with prefix, in key order. On a file:// store it reads the
// directory itself: fileblob's listing fails when a concurrent write's
// temporary file is renamed between its directory read and its lstat,
// where an entry that vanished meanwhile is simply not listed here.
func (s *Store) list(ctx context.Context, prefix string, info bool, fn func(name string, size int64, mod time.Time)) error {
	if s.localDir == "" {
		it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			fn(strings.TrimPrefix(obj.Key, prefix), obj.Size, obj.ModTime)
		}
	}
	entries, err := os.ReadDir(s.localPath(prefix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries { // sorted by name
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		var size int64
		var mod time.Time
		if info {
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted since the directory was read
			}
			if err != nil {
				return err
			}
			size, mod = fi.Size(), fi.ModTime()
		}
		fn(e.Name(), size, mod)
	}
	return nil
}

func (s *Store) read(ctx context.Context, key string) ([]byte, error) {
	data, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return data, err
}

// write stores data at key and returns once it is durable. For file://
// buckets it fsyncs the temporary file before the driver's rename and the
// directory after it (litestream's WriteLTXFile does the same).
func (s *Store) write(ctx context.Context, key string, data []byte, contentType string) error {
	return s.writeWith(ctx, key, contentType, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeWith is write with the data written by fill, called once unless
// the object's writer cannot be opened; an error of fill's abandons the
// write (nothing is stored) and is returned.
func (s *Store) writeWith(ctx context.Context, key, contentType string, fill func(w io.Writer) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.localDir != "" {
		// fileblob's temporary file (key.<hex>.tmp) is under way from
		// its creation to Close's rename or removal.
		final := s.localPath(key)
		writeStarted(final)
		defer writeDone(final)
	}
	var f *os.File
	w, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{
		ContentType: contentType,
		BeforeWrite: func(as func(any) bool) error {
			if s.localDir == "" {
				return nil
			}
			if !as(&f) {
				return fmt.Errorf("file bucket did not expose its temporary file")
			}
			return f.Chmod(0o600) // fileblob creates it 0666 less the umask
		},
	})
	if err != nil {
		return err
	}
	err = fill(w)
	if err == nil && f != nil {
		err = f.Sync()
	}
	if err != nil {
		cancel() // abandons the write: Close removes the temporary file
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if s.localDir != "" {
		return syncDir(filepath.Join(s.localDir, filepath.FromSlash(key), ".."))
	}
	return nil
}

// mkdirDurable creates root/rel and fsyncs each directory whose entry it
// added, so the directories survive a crash.
func mkdirDurable(root, rel string) error {
	dir := root
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, part := range strings.Split(rel, "/") {
		next := filepath.Join(dir, part)
		if _, err := os.Stat(next); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(next, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			if err := syncDir(dir); err != nil {
				return err
			}
		}
		dir = next
	}
	return nil
}

// syncDirFault, when not nil (tests), is called by syncDir first; an
// error it returns is syncDir's.
var syncDirFault func(dir string) error

func syncDir(dir string) error {
	if syncDirFault != nil {
		if err := syncDirFault(dir); err != nil {
			return err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
