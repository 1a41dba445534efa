// Package index is escurel's document index: DuckDB tables derived from the
// blob store, written by ingest and read by search.
//
// An index lives in a directory of generations, each an index.duckdb (see
// CurrentName); Open opens the live one. Its rows (documents,
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
	"runtime"
	"strings"
	"sync"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/analysis"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/extract"
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
	// Reembed, with Embedder set, makes an existing index take Embedder
	// although its manifest names another: Open creates the new embedding
	// set, embeds every block into it from the stored body and context,
	// drops the other sets and records the embedder in the manifest. Only
	// for a generation no one serves yet (rebuild.Reembed works on a copy).
	Reembed bool
	// Workers is how many documents are derived (extracted, chunked,
	// analyzed) at once, and how many embedding calls run at once. 0 means
	// GOMAXPROCS. Not recorded: it changes speed, never rows.
	Workers int
	// MemoryLimit caps DuckDB's buffer pool, in DuckDB's notation ("512MB",
	// "4GB"). Default DefaultMemoryLimit; DuckDB's own default is 80% of
	// the machine's memory, which an embedded library should not claim.
	MemoryLimit string
	// Extract bounds each extraction: its time limit and how many bytes a
	// compressed container (a DOCX) may decompress to. The zero value means
	// extract's defaults (1 min, 256 MiB). A document past a limit is
	// recorded as failed (Result.Status Failed).
	Extract extract.Limits
}

// DefaultMemoryLimit is the default Options.MemoryLimit.
const DefaultMemoryLimit = "1GB"

// Index is an open escurel index.
type Index struct {
	dir, path string
	gen       string // the generation open: gen-NNNNNN
	db        *sql.DB
	blobs     *blobstore.Store
	ownBlobs  bool
	lock      *DirLock // nil when the caller holds the lock

	manifest  Manifest
	chunker   chunk.Spec
	analyzer  analysis.Analyzer
	embedMu   sync.Mutex
	embedder  embed.Embedder // built on first use (model); nil before and for embed.None
	embedSpec embed.Spec     // the manifest's, with the configured reach
	vec       *vectors       // the active embedding set; nil for embed.None
	context   string         // ContextStructural or ContextOff

	fts    *fts.Index
	langMu sync.RWMutex
	langs  map[string]bool // languages of the documents: how queries are analyzed

	writeMu  sync.Mutex   // one writer at a time; taken before genMu
	genMu    sync.RWMutex // read-held by every use of the generation's state; held by Reload to switch it
	memLimit string       // DuckDB memory_limit, for the generations Reload opens
	workers  int          // Options.Workers, resolved
	limits   extract.Limits
	now      func() time.Time
}

// Open opens the live generation of the index in dir (see CurrentName),
// creating the directory, the first generation and its manifest when there
// is no index, and moving an index file of the older one-file layout into
// gen-000001. ctx bounds the open only.
//
// Errors: an invalid setting in opts; *SchemaError (ErrSchemaTooNew) when the
// file is newer than this binary; *MismatchError (ErrManifestMismatch) when a
// set option differs from the manifest; ErrLocked when another process
// holds the directory; the blob store's error when BlobURL cannot be opened.
func Open(ctx context.Context, dir string, opts *Options) (*Index, error) {
	return open(ctx, dir, "", opts)
}

// OpenGeneration opens generation gen of dir, live or not, creating its
// file when it has none; it never reads or writes CURRENT. It takes no
// lock: the caller holds the directory's lock (LockDir, or an open Index of
// dir). Rebuilds use it to build a generation beside the live one.
func OpenGeneration(ctx context.Context, dir, gen string, opts *Options) (*Index, error) {
	if !genPattern.MatchString(gen) {
		return nil, fmt.Errorf("open generation %q: not a generation name (gen-NNNNNN)", gen)
	}
	return open(ctx, dir, gen, opts)
}

func open(ctx context.Context, dir, gen string, opts *Options) (_ *Index, err error) {
	want, err := parseOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	if opts == nil {
		opts = &Options{}
	}
	ix := &Index{dir: dir, blobs: opts.Blobs, now: time.Now}
	created := false
	defer func() {
		if err != nil {
			ix.release()
			if created {
				os.RemoveAll(filepath.Join(dir, ix.gen))
			}
		}
	}()
	if opts.Lock == nil && gen == "" {
		if ix.lock, err = LockDir(dir); err != nil {
			return nil, err
		}
	}
	// The blob store first: a bad URL fails before any index file exists.
	if ix.blobs == nil {
		recorded, err := StoreURL(dir)
		if err != nil {
			return nil, fmt.Errorf("open index: %w", err)
		}
		blobURL := opts.BlobURL
		switch {
		case blobURL == "":
			blobURL = recorded
		case blobURL != recorded && !strings.HasPrefix(blobURL, "mem:") && Exists(dir):
			return nil, fmt.Errorf("open index %s: it derives from the blob store %s, not %s; give that store (or none), or rebuild from the other one with escurel rebuild --blobs",
				dir, recorded, blobURL)
		}
		if ix.blobs, err = blobstore.Open(ctx, blobURL); err != nil {
			return nil, err
		}
		ix.ownBlobs = true
		if gen == "" && !Exists(dir) && blobURL != recorded && !strings.HasPrefix(blobURL, "mem:") {
			// A new index on a store of its own choosing: remember it, so
			// that later commands without --blobs use it.
			if err := os.WriteFile(filepath.Join(dir, BlobsName), []byte(blobURL+"\n"), 0o644); err != nil {
				return nil, fmt.Errorf("open index %s: %w", dir, err)
			}
		}
	}
	ix.gen = gen
	if gen == "" {
		if ix.gen, created, err = resolve(dir); err != nil {
			return nil, fmt.Errorf("open index %s: %w", dir, err)
		}
	} else if err := os.MkdirAll(filepath.Join(dir, gen), 0o755); err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	ix.path = GenerationPath(dir, ix.gen)
	ix.memLimit = want.memoryLimit
	ix.workers = opts.Workers
	ix.limits = opts.Extract
	if ix.workers <= 0 {
		ix.workers = runtime.GOMAXPROCS(0)
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
	if created {
		if err := SetCurrent(dir, ix.gen); err != nil {
			return nil, fmt.Errorf("open index %s: %w", dir, err)
		}
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
		if got.embedder, err = probed(ctx, got.embedder); err != nil {
			return fmt.Errorf("open %s: %w", ix.path, err)
		}
		m = Manifest{SchemaVersion: SchemaVersion, EmbedderModel: got.embedder.Model, EmbedderDim: got.embedder.Dim,
			EmbedderSpec: got.embedder.String(), Chunker: got.chunker.String(), Analyzer: got.analyzer,
			Contextualize: got.contextualize, Extractors: extract.IDs(), EscurelVersion: Version, CreatedAt: now, UpdatedAt: now}
		if err := writeManifest(ctx, ix.db, m); err != nil {
			return err
		}
	case want.reembed:
		cfg := want
		cfg.embedder = embed.Spec{}
		if got, err = cfg.against(m, ix.path); err != nil {
			return err
		}
		if got.embedder, err = probed(ctx, want.embedder); err != nil {
			return fmt.Errorf("open %s: %w", ix.path, err)
		}
		m.EmbedderModel, m.EmbedderDim, m.EmbedderSpec = got.embedder.Model, got.embedder.Dim, got.embedder.String()
		m.SchemaVersion, m.EscurelVersion, m.UpdatedAt = SchemaVersion, Version, now
		if err := writeManifest(ctx, ix.db, m); err != nil {
			return err
		}
	default:
		if got, err = want.against(m, ix.path); err != nil {
			return err
		}
		if from < SchemaVersion || m.SchemaVersion != SchemaVersion || m.EmbedderSpec == "" {
			// An upgrade. A new way to reach the model (a url) is recorded
			// only once it has worked (recordReach).
			m.SchemaVersion, m.EscurelVersion, m.UpdatedAt = SchemaVersion, Version, now
			if m.EmbedderSpec == "" {
				m.EmbedderSpec = m.Embedder().String()
			}
			if m.Extractors == "" {
				m.Extractors = extract.IDs()
			}
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
	if got.embedder != embed.None {
		// Checked now, built on first use (model): an embedder that cannot
		// be built (a key missing from the environment) fails dense search
		// and ingest, not BM25 search, status or delete.
		if _, err := embed.ParseSpec(got.embedder.String()); err != nil {
			return fmt.Errorf("open %s: %w", ix.path, err)
		}
	}
	ix.embedSpec = got.embedder
	if ix.fts, err = fts.Load(ctx, ix.db); err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	if err := ix.reindex(ctx); err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	if got.embedder != embed.None {
		if err := ix.openVectors(ctx); err != nil {
			return fmt.Errorf("open %s: %w", ix.path, err)
		}
	}
	if want.reembed {
		if err := ix.dropOtherSets(ctx); err != nil {
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

// probed returns spec with its dimension asked of the model when the spec
// gives none (a remote or onnx model), and an onnx model's fingerprint, for
// a new index or a re-embed to record.
func probed(ctx context.Context, spec embed.Spec) (embed.Spec, error) {
	if spec.Provider() == "onnx" && spec.Fingerprint == "" && spec.Path != "" {
		fp, err := embed.FingerprintONNX(spec.Path)
		if err != nil {
			return spec, err
		}
		spec.Fingerprint = fp
	}
	if spec.Dim != 0 || spec == embed.None {
		return spec, nil
	}
	e, err := embed.New(spec)
	if err != nil {
		return spec, err
	}
	spec.Dim, err = embed.Probe(ctx, e)
	return spec, err
}

// Close closes the database and, unless the caller supplied them, the blob
// store and the directory lock. It waits for a running write to finish.
func (ix *Index) Close() error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.genMu.Lock()
	defer ix.genMu.Unlock()
	return ix.release()
}

// Reload switches to the generation CURRENT names when it is not the one
// open (after a rebuild or rollback by another holder of the lock, or by
// this process), between operations: it waits for running searches and
// writes, opens the new generation, and closes the old one. Settings come
// from the new generation's manifest; a configured way to reach the same
// embedder (url, path) is kept.
func (ix *Index) Reload(ctx context.Context) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	gen, ok, err := Current(ix.dir)
	if err != nil {
		return fmt.Errorf("reload %s: %w", ix.dir, err)
	}
	if !ok {
		return fmt.Errorf("reload %s: no %s", ix.dir, CurrentName)
	}
	ix.genMu.Lock()
	defer ix.genMu.Unlock()
	if gen == ix.gen {
		return nil
	}
	return ix.switchTo(ctx, gen)
}

// SwapGeneration makes a generation live without a moment of downtime:
// with writes held back, it runs prepare (which brings the new generation
// up to date with the live one and returns its name), points CURRENT at
// it, and switches this Index to it once running searches finish. An
// error from prepare leaves everything as it was.
func (ix *Index) SwapGeneration(ctx context.Context, prepare func(ctx context.Context) (string, error)) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	gen, err := prepare(ctx)
	if err != nil {
		return err
	}
	if err := SetCurrent(ix.dir, gen); err != nil {
		return err
	}
	ix.genMu.Lock()
	defer ix.genMu.Unlock()
	return ix.switchTo(ctx, gen)
}

// switchTo opens generation gen and moves its state into ix, closing the
// old database. The caller holds writeMu and genMu.
func (ix *Index) switchTo(ctx context.Context, gen string) error {
	opts := &Options{Blobs: ix.blobs, Embedder: ix.embedSpec, MemoryLimit: ix.memLimit, Workers: ix.workers}
	n, err := open(ctx, ix.dir, gen, opts)
	if errors.Is(err, ErrManifestMismatch) { // another model (a re-embed): adopt it
		opts.Embedder = embed.Spec{}
		n, err = open(ctx, ix.dir, gen, opts)
	}
	if err != nil {
		return fmt.Errorf("switch to %s: %w", gen, err)
	}
	old := ix.db
	ix.db, ix.path, ix.gen, ix.manifest = n.db, n.path, n.gen, n.manifest
	ix.chunker, ix.analyzer, ix.context = n.chunker, n.analyzer, n.context
	ix.embedMu.Lock()
	ix.embedder = n.embedder
	ix.embedMu.Unlock()
	ix.embedSpec, ix.vec, ix.fts = n.embedSpec, n.vec, n.fts
	ix.langMu.Lock()
	ix.langs = n.langs
	ix.langMu.Unlock()
	return old.Close()
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

// Manifest returns the manifest of the generation open, as of its open.
func (ix *Index) Manifest() Manifest {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	return ix.manifest
}

// Path returns the DuckDB file's path: dir/<generation>/index.duckdb.
func (ix *Index) Path() string {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	return ix.path
}

// Generation returns the name of the generation open, e.g. "gen-000001".
func (ix *Index) Generation() string {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	return ix.gen
}

// Dir returns the index directory.
func (ix *Index) Dir() string { return ix.dir }

// Blobs returns the blob store the index derives from.
func (ix *Index) Blobs() *blobstore.Store { return ix.blobs }

var memoryLimit = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$`)

// BlobsName is the file of an index directory that records its blob store
// when it is not the default (DefaultBlobURL).
const BlobsName = "BLOBS"

// StoreURL returns the blob store an index directory derives from: the URL
// its BLOBS file records, or DefaultBlobURL.
func StoreURL(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, BlobsName))
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return DefaultBlobURL(dir)
}

// RecordStore records url as the blob store dir derives from (a rebuild
// from another store): the BLOBS file, removed when url is the default. A
// mem:// store is never recorded. The caller holds the directory's lock.
func RecordStore(dir, url string) error {
	if strings.HasPrefix(url, "mem:") {
		return nil
	}
	def, err := DefaultBlobURL(dir)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, BlobsName)
	if url == def {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(path, []byte(url+"\n"), 0o644)
}

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
