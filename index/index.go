// Package index is escurel's document index: DuckDB tables derived from the
// blob store, written by ingest and read by search.
//
// An index lives in a directory of generations, each an index.duckdb, and
// a CURRENT file that names the live one; Open opens it. Its rows (documents,
// blocks with verbatim bodies and structural context, postings, vectors) are
// all derived from the blob store (package blobstore), which is written and
// made durable first; the database never holds the only copy of anything.
//
// Open applies the numbered schema files of package sql, runs the
// ensure-column pass and checks the manifest: an index refuses to open with an
// embedder, chunker, analyzer or contextualize mode other than the one that
// built it, and a file written by a newer escurel is refused untouched.
//
// An *Index is safe for concurrent use. Writes (Ingest, Delete) go through
// one writer at a time; searches run concurrently with them and see each
// document either before or after its transaction, never half of it. A
// search never waits for a generation switch (a rebuild's), nor for a
// model call it did not make. One process at a time holds an index
// directory (its LOCK); see ARCHITECTURE.md for the locking rules.
package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver

	"github.com/escurel/escurel/analysis"
	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/index/fts"
	"github.com/escurel/escurel/internal/layout"
)

// Version is the escurel version recorded in the manifest.
const Version = "0.1.0"

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
	// LooseBlobs gives a new blob store the loose layout (one object per
	// blob and record) instead of packs (blobstore.OpenOptions.Loose);
	// an existing store keeps its layout, and LooseBlobs on a store in
	// the pack layout fails with blobstore.ErrLayout.
	LooseBlobs bool
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
	// Workers is how many documents are derived (extracted, chunked,
	// analyzed) at once, and how many embedding calls run at once. 0 means
	// GOMAXPROCS. Not recorded: it changes speed, never rows.
	Workers int
	// MemoryLimit caps DuckDB's buffer pool, in DuckDB's notation ("512MB",
	// "4GB"), fixed. Default: automatic, a file is opened (its write-ahead
	// log replayed) at DefaultMemoryLimit, then the pool follows what the
	// file's indexes pin (see DefaultMemoryLimit). DuckDB's own default is
	// 80% of the machine's memory, which an embedded library should not
	// claim.
	MemoryLimit string
	// DuckDBThreads is how many threads DuckDB runs each statement on. 0
	// means 1 (see defaultDuckDBThreads in dsn.go for why and what it was
	// measured against); more gives DuckDB's parallel scans to verify,
	// export and rebuild on a machine with many cores, at a cost to each
	// small statement (a delete, a commit). Not recorded: it changes
	// speed, never rows. Negative is an error.
	DuckDBThreads int
	// Extract bounds each extraction: its time limit and how many bytes a
	// compressed container (a DOCX) may decompress to. The zero value means
	// extract's defaults (1 min, 256 MiB). A document past a limit is
	// recorded as failed (Result.Status Failed).
	Extract extract.Limits
}

// DefaultMemoryLimit is the memory_limit a file is opened with when
// Options.MemoryLimit is empty (and that of the opens that read a file
// without an Index). Once the file is open the limit is automatic
// (state.fitMemory): autoMemoryFloor, or what DuckDB's ART indexes (the
// tables' keys, fts_postings' term_id) take plus memoryHeadroom (88 MB,
// less for an index under about 300k passages) when that is more. What DuckDB does not hold within its limit spills to the
// generation's .tmp directory.
const DefaultMemoryLimit = "256MB"

// ErrClosed is returned, possibly wrapped, by a call on a closed Index.
var ErrClosed = errors.New("index: closed")

// ErrLocked is returned, wrapped, by Open when another process (or another
// Open in this process) holds the index directory. Match it with
// errors.Is.
var ErrLocked = layout.ErrLocked

// Index is an open escurel index: the live generation of an index
// directory, and the blob store it derives from.
//
// Locking rules (pebble's read_state.go is the model):
//   - Readers (Search, Rank, Expand, Stats, the document reads) load cur
//     once and take a reference to that generation's state (acquire). They
//     never wait for a switch, and hold no lock while they embed a query or
//     call a reranker: a reference blocks no one.
//   - writeMu is the one writer lock: Ingest, Delete, Compact, Verify, a
//     switch of generation (Reload, a live rebuild's swap) and Close take
//     it. Under it a writer reads cur without a reference: only holders of
//     writeMu replace cur.
//   - A verify (a publish's snapshot, Verify) holds writeMu to begin its
//     read transaction (and, for a snapshot, to copy the generation), not
//     for its reads: those run after, with a reference, in the
//     transaction's snapshot (Index.verifyAt). The CHECKPOINTs of writers
//     wait for it (state.verifying); Compact, Close and a reembed's copy
//     wait for it before they take writeMu (verifyMu).
//   - A switch opens the new state, stores it in cur, and drops the old
//     state's own reference; it never waits for readers. The last
//     reference to leave closes the old state's database and lets the
//     directory's cleaner remove its generation (layout.Dir.Hold).
//   - Within a generation, the full-text index's own read-write lock makes
//     a commit and its in-memory update one step for searches (fts.View,
//     fts.CommitWith): held for the commit, never across a model call.
type Index struct {
	dir      string
	layout   *layout.Dir
	ownDir   bool // Close unlocks the directory
	blobs    *blobstore.Store
	ownBlobs bool // Close closes the blob store
	cfg      config

	writeMu writerLock // one writer; see the locking rules
	// verifyMu orders the verifies that run outside writeMu (verifyAt:
	// a publish's snapshot, Verify): one at a time, each held from its
	// read of the records to its end. A writer whose CHECKPOINT would
	// wait for such a verify (Compact, Close, a reembed's copy) takes it
	// before writeMu, so that it waits without holding writes back;
	// never taken under writeMu.
	verifyMu sync.Mutex
	stale    string // guarded by writeMu: a published generation this process failed to switch to
	// mergeErr, guarded by writeMu, is the error of the last background
	// merge (mergeAfter), until the next ingest or Close reports it;
	// mergePending, also, says a merge was started and has not run yet
	// (Close runs it).
	mergeErr     error
	mergePending bool
	merges       sync.WaitGroup // background merges and folds not yet finished (mergeAfter, foldAfter)
	// folding, foldRetryAt and foldDamaged, guarded by writeMu: a fold of
	// small packs started and not run yet; the small packs from which the
	// next one starts (after one, the packs left plus autoFoldPacks); the
	// damaged packs a fold left out, logged once (foldAfter).
	folding     bool
	foldRetryAt int
	foldDamaged map[string]bool
	// blobsGone counts the removals of blobs (Purge, GC), each added under
	// writeMu after its last blob is deleted. An ingest reads it before it
	// uploads its blobs without the lock, and prepares again when it
	// changed by the time it holds writeMu: a blob it found already stored
	// (not written again) may be gone.
	blobsGone atomic.Uint64
	cur       atomic.Pointer[state] // the live generation's state; nil once closed
	// readOnly marks a read replica (replica.go): every write is refused.
	// Set before the Index is shared.
	readOnly bool
	replica  atomic.Pointer[ReplicaInfo] // what a replica serves; nil for a writer
	states   sync.WaitGroup              // one count per state not yet closed
}

// Open opens the live generation of the index in dir (see ARCHITECTURE.md,
// "Generations"), creating the directory, the first generation and its
// manifest when there is no index, and moving an index file of the older
// one-file layout into gen-000001. ctx bounds the open only.
//
// Errors: an invalid setting in opts; *SchemaError (ErrSchemaTooNew) when the
// file is newer than this binary; *MismatchError (ErrManifestMismatch) when a
// set option differs from the manifest; ErrLocked when another process
// holds the directory; the blob store's error when BlobURL cannot be opened.
func Open(ctx context.Context, dir string, opts *Options) (*Index, error) {
	if _, err := parseOptions(opts); err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	d, err := layout.Lock(dir)
	if err != nil {
		return nil, err
	}
	ix, err := openIndex(ctx, d, "", opts, false)
	if err != nil {
		d.Unlock()
		return nil, err
	}
	ix.ownDir = true
	return ix, nil
}

// openIndex opens generation gen of d (the live one when gen is ""); d's
// lock stays the caller's. With reembed, an existing generation takes
// opts.Embedder although its manifest names another (see openState).
func openIndex(ctx context.Context, d *layout.Dir, gen string, opts *Options, reembed bool) (_ *Index, err error) {
	want, err := parseOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", d.Path(), err)
	}
	want.reembed = reembed
	if opts == nil {
		opts = &Options{}
	}
	dir := d.Path()
	ix := &Index{dir: dir, layout: d, blobs: opts.Blobs,
		cfg: config{memLimit: want.memoryLimit, memAuto: opts.MemoryLimit == "", workers: opts.Workers, threads: opts.DuckDBThreads, limits: opts.Extract, now: time.Now}}
	if ix.cfg.workers <= 0 {
		ix.cfg.workers = runtime.GOMAXPROCS(0)
	}
	if ix.cfg.threads == 0 {
		ix.cfg.threads = defaultDuckDBThreads
	}
	defer func() {
		if err != nil && ix.ownBlobs {
			ix.blobs.Close()
		}
	}()
	// The blob store first: a bad URL fails before any index file exists.
	if ix.blobs == nil {
		recorded, err := layout.StoreURL(dir)
		if err != nil {
			return nil, fmt.Errorf("open index: %w", err)
		}
		blobURL := opts.BlobURL
		switch {
		case blobURL == "":
			blobURL = recorded
		case !blobstore.SameURL(blobURL, recorded) && !strings.HasPrefix(blobURL, "mem:") && layout.Exists(dir):
			return nil, fmt.Errorf("open index %s: it derives from the blob store %s, not %s; give that store (or none), or rebuild from the other one with escurel rebuild --blobs",
				dir, blobstore.Redact(recorded), blobstore.Redact(blobURL))
		}
		if ix.blobs, err = blobstore.OpenWith(ctx, blobURL, &blobstore.OpenOptions{Loose: opts.LooseBlobs}); err != nil {
			return nil, err
		}
		ix.ownBlobs = true
		if gen == "" && !layout.Exists(dir) && blobURL != recorded {
			// A new index on a store of its own choosing: remember it, so
			// that later commands without --blobs use it.
			if err := d.SetStoreURL(blobURL); err != nil {
				return nil, fmt.Errorf("open index %s: %w", dir, err)
			}
		}
	}
	created := false
	if gen == "" {
		if gen, created, err = d.Resolve(); err != nil {
			return nil, fmt.Errorf("open index %s: %w", dir, err)
		}
	} else if err := os.MkdirAll(filepath.Join(dir, gen), 0o700); err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	s, err := ix.openState(ctx, gen, want)
	if err != nil {
		if created {
			d.Abandon(gen)
		}
		return nil, err
	}
	if created {
		if err := d.Publish(gen); err != nil {
			s.unref()
			ix.states.Wait()
			d.Abandon(gen)
			return nil, fmt.Errorf("open index %s: %w", dir, err)
		}
	}
	ix.publish(s)
	return ix, nil
}

// openState opens generation gen's database, migrates it, checks or
// writes its manifest and loads the in-memory indexes. The state starts
// with one reference, the caller's.
func (ix *Index) openState(ctx context.Context, gen string, want settings) (_ *state, err error) {
	s := &state{dir: ix.dir, gen: gen, path: layout.GenerationPath(ix.dir, gen), blobs: ix.blobs,
		workers: ix.cfg.workers, threads: ix.cfg.threads, limits: ix.cfg.limits, now: ix.cfg.now, memAuto: ix.cfg.memAuto,
		retired: make(chan struct{})}
	_, statErr := os.Stat(s.path)
	if s.db, err = sql.Open("duckdb", dsn(s.path, ix.cfg.threads)+"&memory_limit="+ix.cfg.memLimit); err == nil {
		err = s.db.PingContext(ctx)
	}
	if err == nil {
		// DuckDB checkpoints when it closes a database: the state's close
		// does when it should (foldsLog), and an open that fails (a file
		// of a newer schema, a damaged one) leaves the file as it was.
		_, err = s.db.ExecContext(ctx, `PRAGMA disable_checkpoint_on_shutdown`)
	}
	if err == nil && errors.Is(statErr, fs.ErrNotExist) {
		// DuckDB created the file 0666 less the umask: private, as
		// everything of the index is (its WAL lies in a 0700 directory).
		err = os.Chmod(s.path, 0o600)
	}
	if err != nil {
		if s.db != nil {
			s.db.Close()
		}
		return nil, fmt.Errorf("open index %s: %v: %w", s.path, err, ErrDamaged)
	}
	if err := s.init(ctx, want); err != nil {
		s.db.Close()
		return nil, err
	}
	s.memLimit.Store(memoryBytes(ix.cfg.memLimit)) // DefaultMemoryLimit when automatic
	if err := s.fitMemory(ctx, 1, true, true); err != nil {
		s.db.Close()
		return nil, err
	}
	release := ix.layout.Hold(gen)
	ix.states.Add(1)
	s.closed = func() { release(); ix.states.Done() }
	s.refs.Store(1)
	return s, nil
}

func (ix *state) init(ctx context.Context, want settings) error {
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
	ix.manifest.Store(&m)
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
	if ix.fts, err = fts.LoadFrom(ctx, ix.db, imagePath(ix.path)); err != nil {
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
	langs, err := ix.countLanguages(ctx, ix.db)
	if err != nil {
		return fmt.Errorf("open %s: %w", ix.path, err)
	}
	ix.setLanguages(langs)
	return nil
}

// probed returns spec with its dimension asked of the model when the spec
// gives none (a remote or onnx model), and an onnx model's fingerprint, for
// a new index or a re-embed to record.
func probed(ctx context.Context, spec embed.Spec) (embed.Spec, error) {
	if spec.Fingerprint == "" && !spec.IsZero() {
		fp, err := embed.Fingerprint(spec)
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

// Close waits for the running write, then for the readers of the live
// generation (and an ingest that is preparing on it) to leave, and closes
// its database and, unless the caller supplied them, the blob store and
// the directory lock. Any call afterwards fails with ErrClosed; a second
// Close returns nil at once, without waiting for the first.
//
// A write-ahead log under closeCheckpointBytes (4 MiB) is left for the
// next Open to replay; a larger one is folded into the file (a
// CHECKPOINT). Close saves the full-text index's image (a file beside the
// database, 11 MB at 100k passages) when the one there is not current:
// after a write, or when this open read the tables (an upgraded or copied
// index): about 0.2 s at 1M passages, once. When this Index committed
// documents' rows (ingest, delete, a metadata update), the close folds
// the log, and a fifth or more of the live generation's file is
// reclaimable (free blocks, deleted rows DuckDB keeps; at least 16 MB),
// Close first rewrites it into a new generation (index/compact.go), which
// the next Open opens, and removes the replaced one.
//
// Errors: the rewrite's (the old generation stays live), the final
// checkpoint's when the close folds the log (a full disk: the committed
// writes stay in the write-ahead log, and the next Open applies them),
// closing the blob store's, releasing the lock's.
func (ix *Index) Close() error {
	// A verify reading outside writeMu ends first (verifyMu): Close's
	// CHECKPOINT would wait for it under writeMu.
	ix.verifyMu.Lock()
	defer ix.verifyMu.Unlock()
	ix.writeMu.Lock()
	var replaced string
	var rerr error
	if s := ix.cur.Load(); s != nil && ix.mergePending {
		// A batch's merges, not run yet: the index is left merged, as
		// the batch would have left it.
		ix.mergePending = false
		if err := s.maintain(context.Background()); err != nil {
			ix.mergeErr = err
		}
	}
	if s := ix.cur.Load(); s != nil && ix.ownDir && !ix.readOnly && ix.stale == "" {
		fold := s.foldsLog()
		// The full-text index's image first, so that the next Open reads
		// it (and a rewrite copies it) instead of the tables' rows: after
		// a write, or when this open read the tables (an image stale or
		// missing: a file from an older version, a rebuild's copy). Not
		// a replica's: each of its opens downloads a new generation.
		s.saveImage(context.Background(), fold)
		// A file with a fifth or more reclaimable is rewritten into a new
		// generation, which the next Open opens (index/compact.go); only
		// by a process that wrote documents, so a reader's Close stays
		// quick, and only when the close folds the log: its measure
		// needs a checkpoint, and a log below closeCheckpointBytes left
		// for the next open holds little to reclaim.
		if fold && s.wrote.Load() {
			if replaced, rerr = ix.rewriteLive(context.Background(), s, closeRewriteShare, closeRewriteMin, false); rerr != nil {
				rerr = fmt.Errorf("close: the writes are committed and durable, but rewriting the file to reclaim its free space failed (escurel compact tries again): %w", rerr)
			}
		}
	}
	if ix.mergeErr != nil {
		rerr = errors.Join(rerr, fmt.Errorf("close: the writes are committed and durable, but merging the full-text segments failed (the next write merges again): %w", ix.mergeErr))
		ix.mergeErr = nil
	}
	s := ix.publish(nil)
	// Not held while readers leave: an ingest that prepared on s waits
	// for writeMu, then sees cur changed and gives up with ErrClosed.
	ix.writeMu.Unlock()
	if s == nil {
		return nil
	}
	s.unref()
	ix.states.Wait()
	ix.merges.Wait() // each has seen cur nil and left
	err := errors.Join(rerr, s.closeErr)
	if replaced != "" {
		err = errors.Join(err, ix.layout.RemoveReplaced(replaced)) // no reader is left
	}
	if ix.ownBlobs {
		err = errors.Join(err, ix.blobs.Close())
	}
	if ix.ownDir {
		err = errors.Join(err, ix.layout.Unlock())
	}
	return err
}

// Manifest returns the manifest of the live generation.
func (ix *Index) Manifest() Manifest {
	s, err := ix.acquire()
	if err != nil {
		return Manifest{}
	}
	defer s.unref()
	return *s.manifest.Load()
}

// Path returns the live generation's DuckDB file:
// dir/<generation>/index.duckdb; "" once closed.
func (ix *Index) Path() string {
	s, err := ix.acquire()
	if err != nil {
		return ""
	}
	defer s.unref()
	return s.path
}

// Generation returns the name of the live generation, e.g. "gen-000001";
// "" once closed.
func (ix *Index) Generation() string {
	s, err := ix.acquire()
	if err != nil {
		return ""
	}
	defer s.unref()
	return s.gen
}

// Dir returns the index directory.
func (ix *Index) Dir() string { return ix.dir }

// Blobs returns the blob store the index derives from.
func (ix *Index) Blobs() *blobstore.Store { return ix.blobs }
