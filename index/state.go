// This file holds an Index's generations in memory: the state of one open
// generation, how readers and the writer reach it, and the writer lock.

package index

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escurel/escurel/analysis"
	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/index/fts"
)

// config is what every state of an Index shares.
type config struct {
	memLimit string // DuckDB memory_limit at open
	threads  int    // Options.DuckDBThreads, resolved
	memAuto  bool   // Options.MemoryLimit empty: state.fitMemory sets it after
	workers  int    // Options.Workers, resolved
	limits   extract.Limits
	now      func() time.Time
}

// state is one open generation: its database and the in-memory indexes
// derived from it. Its fields are set by openState and not changed after,
// except those with a guard of their own (manifest, embedder, langs, the
// full-text and dense indexes).
type state struct {
	refs    atomic.Int64 // references: the Index's own while cur, and each reader's
	closed  func()       // releases the directory hold and counts the state closed
	dir     string
	path    string
	gen     string // gen-NNNNNN
	db      *sql.DB
	blobs   *blobstore.Store
	workers int
	threads int // DuckDB's threads (config.threads); a rewrite raises them for its copy
	limits  extract.Limits
	now     func() time.Time

	manifest  atomic.Pointer[Manifest] // replaced whole by recordReach, under writeMu
	chunker   chunk.Spec
	analyzer  analysis.Analyzer
	embedMu   sync.Mutex     // guards embedder's first build; never held across a model call
	embedder  embed.Embedder // built on first use (model); nil before and for embed.None
	embedSpec embed.Spec     // the manifest's, with the configured reach
	vec       *vectors       // the active embedding set; nil for embed.None
	context   string         // ContextStructural or ContextOff

	fts     *fts.Index
	pub     publicIDs // internal block number → public id, for Rank
	docs    docSet    // which doc ids the generation may hold, for ingest
	hitDocs hitDocs   // what hits carry of their documents, for search (hitdocs.go)
	texts   textRows  // rows of document_text, so a delete skips an empty table (delete.go)
	langMu  sync.RWMutex
	langs   map[string][3]int // documents per language and sensitivity level: how a caller's queries are analyzed
	meta    metaCache         // the documents' metadata for filters (metastore.go)
	// memAuto: the memory_limit is automatic (fitMemory); memLimit is
	// its value in bytes (a fixed Options.MemoryLimit's too).
	memAuto  bool
	memLimit atomic.Int64
	memMu    sync.Mutex // orders the changes of memLimit (setMemory)

	// verifying is held (read) by a verify that reads the rows outside
	// writeMu in a transaction begun under it (Index.verifyAt). DuckDB
	// refuses a CHECKPOINT while a reader older than a commit runs, so
	// each CHECKPOINT under writeMu of a live state (checkpoint, space,
	// saveImage's fold) waits for it first (waitVerifying).
	verifying sync.RWMutex

	// wrote is set by every commit of documents' rows in this process
	// (ingest, replace, delete, a metadata update): only then may Close
	// spend time rewriting the file (index/compact.go).
	wrote atomic.Bool

	// closeErr is close's error: its checkpoint's or the database's; set
	// before closed runs, read after the Index's states.Wait.
	closeErr error

	// retired is closed once the state stops being the Index's live one
	// (a switch, a rollback, a replica's update, Close: publish), so that
	// work done for the live state alone (Prewarm) stops.
	retired    chan struct{}
	retireOnce sync.Once
	// replaced is set when a switch made another state live in s's
	// place (publish): s's close then never checkpoints. Its writes are
	// in its log for whoever opens the generation next, and a rollback
	// may have opened the generation again already, in another DuckDB
	// instance that a checkpoint from this one would write under.
	replaced atomic.Bool
}

// retire closes s.retired, once.
func (s *state) retire() {
	s.retireOnce.Do(func() {
		if s.retired != nil {
			close(s.retired)
		}
	})
}

// publish makes n the live state (nil: none, at Close) and retires the
// one it replaces, which it returns (nil if none). The caller gives back
// the Index's reference to the old state (unref) when it is done with it.
func (ix *Index) publish(n *state) *state {
	old := ix.cur.Swap(n)
	if old != nil {
		old.replaced.Store(n != nil)
		old.retire()
	}
	return old
}

// acquire returns the live state with a reference the caller gives back
// with unref. It never blocks.
func (ix *Index) acquire() (*state, error) {
	for {
		s := ix.cur.Load()
		if s == nil {
			return nil, ErrClosed
		}
		n := s.refs.Load()
		if n > 0 && s.refs.CompareAndSwap(n, n+1) {
			return s, nil
		}
		// s lost its last reference after a switch replaced it in cur:
		// load again.
	}
}

// unref gives back a reference; the last one closes the state, in the
// background, so no reader waits for a database to close.
func (s *state) unref() {
	if s.refs.Add(-1) == 0 {
		go s.close()
	}
}

// closeCheckpointBytes is the size, in bytes, of the write-ahead log from
// which a state's close folds it into the file (a CHECKPOINT); below it
// the log is left for the next open to replay (a variable for tests).
// DuckDB appends to the last row group of a table with an index and
// rewrites that whole row group, and re-serializes the index, at every
// checkpoint after an append (duckdb PR #18829, restricted to tables
// without indexes by PR #21316; issue #24848): a one-file ingest into a
// 100k-passage index wrote a few KB of log and then spent 1.9-2.3 s in
// its close's checkpoint, every time. Left in the log, the next open
// replays those few KB instead; SQLite in WAL mode does the same, folding
// its log once it passes wal_autocheckpoint. Replaying costs an open about
// 15 ms per MB of log, and 20-40 MB of RSS (DuckDB loads the keys'
// indexes to insert into them; README): at 4 MiB, about 400 one-file
// ingests of a few KB of log each share one fold, and an open replays at
// most about 60 ms.
var closeCheckpointBytes int64 = 4 << 20

// foldsLog reports whether closing s checkpoints: its write-ahead log has
// reached closeCheckpointBytes, or is empty (a checkpoint then rewrites
// nothing, and Close may measure the file: index/compact.go).
func (s *state) foldsLog() bool {
	n := fileSize(s.path + ".wal")
	return n == 0 || n >= closeCheckpointBytes
}

// close closes the database, first folding the write-ahead log into the
// file when foldsLog and no switch replaced s, else leaving it for the
// next open (openState turned DuckDB's own checkpoint on close off). The
// committed writes are safe in the log either way, and the next open
// replays it; a CHECKPOINT that fails (a full disk) is reported by
// Index.Close.
func (s *state) close() {
	var err error
	if !s.replaced.Load() && s.foldsLog() {
		_, err = s.db.Exec(`CHECKPOINT`)
	}
	if err != nil {
		err = fmt.Errorf("checkpoint %s: %w (the committed writes are in its write-ahead log; free space, and the next open applies them)", s.path, err)
	}
	s.closeErr = errors.Join(err, s.db.Close())
	s.closed()
}

// live returns the state under writeMu for a write, or ErrClosed, or an
// error while the directory serves a generation this process failed to
// switch to (a write to the old one would never reach the live one).
func (ix *Index) live() (*state, error) {
	s := ix.cur.Load()
	if s == nil {
		return nil, ErrClosed
	}
	if ix.readOnly {
		return nil, ix.readOnlyError()
	}
	if ix.stale != "" {
		return nil, fmt.Errorf("index %s: %s is live, but this process still serves %s and takes no writes until Reload succeeds", ix.dir, ix.stale, s.gen)
	}
	return s, nil
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// writerLock is Index.writeMu: a mutex that counts its releases, so that
// a writer that read the index without it (an ingest's prepareBatch) can
// tell, once it holds it, whether any other writer held it meanwhile.
// Every write to a generation's rows is made under writeMu (the locking
// rules) by this process, the only writer of the directory (its LOCK).
type writerLock struct {
	sync.Mutex
	released atomic.Uint64
}

// Unlock counts the release, then unlocks.
func (l *writerLock) Unlock() {
	l.released.Add(1)
	l.Mutex.Unlock()
}

// unlockMerge unlocks without counting the release: for a holder that
// ran only the full-text merges (state.maintain), which rewrite the
// full-text tables (fts_*), folded small packs of the blob store
// (foldAfter), or began a verify (verifyBegin: a CHECKPOINT, a copy,
// reads), which change nothing read; no documents row, the rows an
// ingest's recheck reads (unchangedSince). Counted, the merge that every
// batch starts in the background (mergeAfter) made the next batch read
// its documents twice.
func (l *writerLock) unlockMerge() { l.Mutex.Unlock() }

// releases returns how many times the lock has been released.
func (l *writerLock) releases() uint64 { return l.released.Load() }
