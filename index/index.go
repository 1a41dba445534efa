// Package index is escurel's document index: DuckDB tables derived from the
// blob store, written by ingest and read by search.
//
// An index lives in a directory holding index.duckdb. Its rows (documents,
// blocks with verbatim bodies and structural context, postings, vectors) are
// all derived from the blob store (package blobstore), which is written and
// made durable first; the database never holds the only copy of anything.
//
// Open applies the numbered schema files of package sql, runs the
// ensure-column pass and checks the manifest: an index refuses to open with an
// embedder, chunker, analyzer or contextualize mode other than the one that
// built it, and a file written by a newer escurel is refused untouched.
//
// An *Index is safe for concurrent use. Writes (Ingest) go through one writer
// at a time; searches run concurrently with them and see each document
// either before or after its transaction, never half of it. DuckDB lets one
// process at a time open a file for writing.
package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/analysis"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/fts"
)

// Version is the escurel version recorded in the manifest.
const Version = "0.1.0"

// FileName is the name of the DuckDB file inside an index directory.
const FileName = "index.duckdb"

// Options configure Open. A nil *Options and zero fields mean: use what the
// index was built with, or the default for a new index. A field that is set
// must match the index's manifest, or Open fails with a *MismatchError.
type Options struct {
	// BlobURL is the blob store, any gocloud.dev/blob URL whose scheme the
	// process has registered. Default: file://<dir>/blobs.
	BlobURL string
	// Blobs, when not nil, is used instead of opening BlobURL; the caller
	// keeps ownership and closes it after the Index.
	Blobs *blobstore.Store
	// Lock, when not nil, is the caller's lock on dir (LockDir), which the
	// Index uses instead of taking its own; the caller releases it after
	// Close.
	Lock *DirLock
	// Embedder names the embedder. Default embed.Default (hash/384);
	// embed.None builds a BM25-only index.
	Embedder embed.Spec
	// Chunker is a chunk.ParseSpec string. Default "default(max_bytes=1500)".
	Chunker string
	// Analyzer is an analyzer name ("standard", "simple") or ID
	// ("standard/1"). Default "standard".
	Analyzer string
	// Contextualize is ContextStructural (default) or ContextOff.
	Contextualize string
	// MemoryLimit caps DuckDB's buffer pool, in DuckDB's notation ("512MB",
	// "4GB"). Default DefaultMemoryLimit; DuckDB's own default is 80% of
	// the machine's memory, which an embedded library should not claim.
	MemoryLimit string
}

// DefaultMemoryLimit is the default Options.MemoryLimit.
const DefaultMemoryLimit = "1GB"

// Index is an open escurel index.
type Index struct {
	dir, path string
	db        *sql.DB
	blobs     *blobstore.Store
	ownBlobs  bool
	lock      *DirLock // nil when the caller holds the lock

	manifest  Manifest
	chunker   chunk.Spec
	analyzer  analysis.Analyzer
	embedder  embed.Embedder // nil for embed.None
	embedSpec embed.Spec     // the manifest's, with the configured reach
	vec       *vectors       // the active embedding set; nil for embed.None
	context   string         // ContextStructural or ContextOff

	fts    *fts.Index
	langMu sync.RWMutex
	langs  map[string]bool // languages of the documents: how queries are analyzed

	writeMu sync.Mutex // one writer at a time
	now     func() time.Time
}

// Open opens the index in dir, creating the directory, the file and the
// manifest when they do not exist. ctx bounds the open only.
//
// Errors: an invalid setting in opts; *SchemaError (ErrSchemaTooNew) when the
// file is newer than this binary; *MismatchError (ErrManifestMismatch) when a
// set option differs from the manifest; DuckDB's error when another process
// holds the file; the blob store's error when BlobURL cannot be opened.
func Open(ctx context.Context, dir string, opts *Options) (_ *Index, err error) {
	want, err := parseOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	if opts == nil {
		opts = &Options{}
	}
	ix := &Index{dir: dir, path: filepath.Join(dir, FileName), blobs: opts.Blobs, now: time.Now}
	defer func() {
		if err != nil {
			ix.release()
		}
	}()
	if opts.Lock == nil {
		if ix.lock, err = LockDir(dir); err != nil {
			return nil, err
		}
	}
	// The blob store first: a bad URL fails before any index file exists.
	if ix.blobs == nil {
		blobURL := opts.BlobURL
		if blobURL == "" {
			if blobURL, err = DefaultBlobURL(dir); err != nil {
				return nil, fmt.Errorf("open index: %w", err)
			}
		}
		if ix.blobs, err = blobstore.Open(ctx, blobURL); err != nil {
			return nil, err
		}
		ix.ownBlobs = true
	}
	if ix.db, err = sql.Open("duckdb", dsn(ix.path)+"&memory_limit="+want.memoryLimit); err == nil {
		err = ix.db.PingContext(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", ix.path, err)
	}
	if err := ix.init(ctx, want); err != nil {
		return nil, err
	}
	return ix, nil
}

func (ix *Index) init(ctx context.Context, want settings) error {
	from, err := migrate(ctx, ix.db, ix.path)
	if err != nil {
		return err
	}
	m, ok, err := readManifest(ctx, ix.db)
	if err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	now := ix.now().UTC().Truncate(time.Microsecond)
	var got settings
	switch {
	case !ok:
		var blocks int
		if err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM blocks`).Scan(&blocks); err != nil {
			return fmt.Errorf("open %s: %w", ix.path, err)
		}
		if blocks > 0 {
			return fmt.Errorf("open %s: %d blocks but no manifest: the file is damaged; run escurel rebuild", ix.path, blocks)
		}
		got = want.defaults()
		if got.embedder.Dim == 0 && got.embedder != embed.None {
			// A remote model without a configured dimension: ask it.
			e, err := embed.New(got.embedder)
			if err != nil {
				return err
			}
			if got.embedder.Dim, err = embed.Probe(ctx, e); err != nil {
				return fmt.Errorf("open %s: %w", ix.path, err)
			}
		}
		m = Manifest{SchemaVersion: SchemaVersion, EmbedderModel: got.embedder.Model, EmbedderDim: got.embedder.Dim,
			EmbedderSpec: got.embedder.String(), Chunker: got.chunker.String(), Analyzer: got.analyzer,
			Contextualize: got.contextualize, EscurelVersion: Version, CreatedAt: now, UpdatedAt: now}
		if err := writeManifest(ctx, ix.db, m); err != nil {
			return err
		}
	default:
		if got, err = want.against(m, ix.path); err != nil {
			return err
		}
		if from < SchemaVersion || m.SchemaVersion != SchemaVersion || m.EmbedderSpec != got.embedder.String() {
			// An upgrade, or the model reached another way (a new url):
			// record it, so the next open without settings does the same.
			m.SchemaVersion, m.EscurelVersion, m.UpdatedAt = SchemaVersion, Version, now
			m.EmbedderSpec = got.embedder.String()
			if err := writeManifest(ctx, ix.db, m); err != nil {
				return err
			}
		}
	}
	ix.manifest = m
	ix.chunker = got.chunker
	ix.context = got.contextualize
	if ix.analyzer, err = analysis.ByID(got.analyzer); err != nil {
		return err
	}
	if ix.embedder, err = embed.New(got.embedder); err != nil {
		return err
	}
	ix.embedSpec = got.embedder
	if ix.fts, err = fts.Load(ctx, ix.db); err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	if err := ix.reindex(ctx); err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	if ix.embedder != nil {
		if err := ix.openVectors(ctx); err != nil {
			return fmt.Errorf("open %s: %w", ix.path, err)
		}
	}
	ix.langs = map[string]bool{}
	rows, err := ix.db.QueryContext(ctx, `SELECT DISTINCT language FROM documents`)
	if err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return err
		}
		ix.langs[l] = true
	}
	return rows.Err()
}

// Close closes the database and, unless the caller supplied them, the blob
// store and the directory lock. It waits for a running write to finish.
func (ix *Index) Close() error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	return ix.release()
}

func (ix *Index) release() error {
	var err error
	if ix.db != nil {
		err = ix.db.Close()
	}
	if ix.ownBlobs && ix.blobs != nil {
		err = errors.Join(err, ix.blobs.Close())
	}
	return errors.Join(err, ix.lock.Unlock())
}

// Manifest returns the manifest as of Open.
func (ix *Index) Manifest() Manifest { return ix.manifest }

// Path returns the DuckDB file's path.
func (ix *Index) Path() string { return ix.path }

// Blobs returns the blob store the index derives from.
func (ix *Index) Blobs() *blobstore.Store { return ix.blobs }

var memoryLimit = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$`)

// DefaultBlobURL returns the blob store of an index directory when none is
// configured: file://<absolute dir>/blobs.
func DefaultBlobURL(dir string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(dir, "blobs"))
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

// dsn is the DuckDB data source for an index file. Extensions are never
// installed or loaded on demand: nothing may reach the network.
func dsn(path string) string {
	return path + "?autoinstall_known_extensions=false&autoload_known_extensions=false"
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}
