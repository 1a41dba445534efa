package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"
)

// Batch collects blob and record writes that become durable together, at
// Sync: many documents cost one flush instead of an fsync per file.
//
// For file:// stores, Put and PutRecord queue their bytes; Sync writes them
// to temporary files beside their final names, flushes them all
// (syncfs(2) on Linux, an fsync per file elsewhere), then renames them into
// place and makes the renames durable (an fsync of each directory). A crash
// before Sync returns leaves at most temporary files, which listing
// ignores; it never leaves a half-written blob or record under its final
// name. For other stores (object stores: each upload is durable when it
// completes) Put and PutRecord queue too, and Sync uploads the queue
// remoteUploads at a time, a round trip's latency paid once per
// remoteUploads objects rather than once per object; Sync returns once
// every upload has completed.
//
// A Batch is not safe for concurrent use.
type Batch struct {
	s       *Store
	pending []pendingFile // file:// only
	flushed int           // how many of pending have their temporary files written and durable (Flush)
	keys    map[string]bool
	remote  []remoteWrite // other stores: the queue, one per key
	slot    map[string]int
	// The pack layout: the batch's pack (blobs under packLooseMin,
	// records), and on file:// its temporary file once flushed.
	pk     *packBuilder
	pkFile *pendingFile
}

// remoteUploads is how many uploads a Batch's Sync runs at once on an
// object store.
const remoteUploads = 16

type remoteWrite struct {
	key, what string // what: the error's prefix, e.g. "put blob sha256:…"
	data      []byte
	blob      bool // a blob (Store.Put: skipped when intact), else a record
}

// queue adds a write for an object store; a later write of a key
// replaces the earlier.
func (b *Batch) queue(w remoteWrite) {
	if b.slot == nil {
		b.slot = map[string]int{}
	}
	if i, ok := b.slot[w.key]; ok {
		b.remote[i] = w
		return
	}
	b.slot[w.key] = len(b.remote)
	b.remote = append(b.remote, w)
}

// syncRemote runs the queued object store writes, remoteUploads at a time.
func (b *Batch) syncRemote(ctx context.Context) error {
	queued := b.remote
	b.remote, b.slot = nil, nil
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(remoteUploads)
	for _, w := range queued {
		g.Go(func() error {
			if w.blob {
				_, err := b.s.Put(gctx, w.data)
				return err
			}
			if err := b.s.write(gctx, w.key, w.data, "application/json"); err != nil {
				return fmt.Errorf("%s: %w", w.what, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("sync blob store %s: %w", b.s.Redacted(), err)
	}
	return nil
}

type pendingFile struct {
	tmp, final string
	data       []byte
}

// NewBatch starts a batch of writes to s.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, keys: map[string]bool{}} }

// Put stores data under its content address, as Store.Put does, durable at
// Sync. It returns the blob id. A blob already stored is written again when
// its file is not data (another size, or bytes that hash to another id: a
// damaged blob is repaired by putting its original bytes).
func (b *Batch) Put(ctx context.Context, data []byte) (string, error) {
	id := BlobID(data)
	key, _ := BlobKey(id)
	if b.s.px != nil && len(data) < packLooseMin {
		k, _ := blobKeyBytes(id)
		if b.pk != nil && b.pk.has(kindBlob, k) {
			return id, nil
		}
		ok, err := b.s.hasBlob(ctx, id, data)
		if err != nil {
			return "", fmt.Errorf("put blob %s: %w", id, err)
		}
		if ok {
			return id, nil
		}
		if err := b.addPacked(kindBlob, k, data); err != nil {
			return "", fmt.Errorf("put blob %s: %w", id, err)
		}
		return id, nil
	}
	if b.s.localDir == "" {
		b.queue(remoteWrite{key: key, what: "put blob " + id, data: data, blob: true})
		return id, nil
	}
	if b.keys[key] {
		return id, nil
	}
	if intact(b.s.localPath(key), data) {
		return id, nil
	}
	if err := b.stage(key, data); err != nil {
		return "", fmt.Errorf("put blob %s: %w", id, err)
	}
	return id, nil
}

// PutRecord writes rec, as Store.PutRecord does, durable at Sync. A record
// whose stored bytes are already equal is not written again.
func (b *Batch) PutRecord(ctx context.Context, rec *Record) error {
	return b.putRecord(ctx, rec, true)
}

// addPacked adds an entry to the batch's pack; a pack already flushed is
// written again at the next flush.
func (b *Batch) addPacked(kind byte, key [32]byte, data []byte) error {
	if b.pk == nil {
		b.pk = newPackBuilder()
	}
	if b.pkFile != nil {
		removeTemp(b.pkFile.tmp)
		b.pkFile = nil
	}
	return b.pk.add(kind, key, data)
}

// packPending reports whether the batch has a pack to write to a
// temporary file (file:// only).
func (b *Batch) packPending() bool {
	return b.s.localDir != "" && b.pk != nil && len(b.pk.entries) > 0 && b.pkFile == nil
}

// StageRecord writes rec at Sync as PutRecord does, but whatever is
// stored: for a batch staged before its writer holds the lock, where
// "already equal" could be stale by the time the batch commits (another
// writer may delete the stored record meanwhile).
func (b *Batch) StageRecord(ctx context.Context, rec *Record) error {
	return b.putRecord(ctx, rec, false)
}

// putRecord stages rec; with skipEqual, not when the stored bytes are
// already equal (and the batch does not write the key).
func (b *Batch) putRecord(ctx context.Context, rec *Record, skipEqual bool) error {
	key, data, err := encodeRecordAs(rec, b.s.px != nil)
	if err != nil {
		return err
	}
	if b.s.px != nil {
		k, _ := docKeyBytes(rec.DocID)
		if skipEqual && (b.pk == nil || !b.pk.has(kindRecord, wide(k))) {
			if old, err := b.s.storedRecord(ctx, rec.DocID); err == nil && bytes.Equal(old, data) {
				return nil
			}
		}
		if err := b.addPacked(kindRecord, wide(k), data); err != nil {
			return fmt.Errorf("put record %s: %w", rec.DocID, err)
		}
		return nil
	}
	if b.s.localDir == "" {
		b.queue(remoteWrite{key: key, what: "put record " + rec.DocID, data: data})
		return nil
	}
	if skipEqual {
		if old, err := os.ReadFile(b.s.localPath(key)); err == nil && bytes.Equal(old, data) && !b.keys[key] {
			return nil
		}
	}
	if err := b.stage(key, data); err != nil {
		return fmt.Errorf("put record %s: %w", rec.DocID, err)
	}
	return nil
}

// intact reports whether the file at path holds exactly data: its size
// first (a stat), then its bytes.
func intact(path string, data []byte) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != int64(len(data)) {
		return false
	}
	got, err := os.ReadFile(path)
	return err == nil && bytes.Equal(got, data)
}

// stage queues data for key; Sync writes it. A second write of the same key
// in the batch replaces the first.
func (b *Batch) stage(key string, data []byte) error {
	final := b.s.localPath(key)
	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := final + "." + hex.EncodeToString(suffix[:]) + ".tmp"
	b.keys[key] = true
	tempStarted(tmp)
	b.pending = append(b.pending, pendingFile{tmp: tmp, final: final, data: data})
	return nil
}

// writeTemps writes the queued files. (Writing several at a time gained
// nothing here: file creation in one directory serializes in the kernel.)
func writeTemps(pending []pendingFile) error {
	for _, p := range pending {
		if err := os.WriteFile(p.tmp, p.data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes the batch's queued files to their temporary files and makes
// them durable, publishing nothing: a later Sync only renames them into
// place and makes the renames durable. Flush early (without a lock, beside
// other work) and Sync when the writes may be published. On stores other
// than file:// it does nothing (Sync uploads). On error the temporary
// files are removed and the batch is empty.
func (b *Batch) Flush(ctx context.Context) error { return FlushBatches(ctx, b) }

// FlushBatches flushes several batches together (see Batch.Flush): each
// batch's temporary files are written by its own goroutine (the creates of
// one directory serialize in the kernel, those of different directories,
// such as blobs' and records', do not), then all are made durable by one
// flush of the file system (syncfs(2) on Linux) instead of one each. A
// batch's files already flushed are not written again. On error every
// batch given is emptied and its temporary files removed.
func FlushBatches(ctx context.Context, batches ...*Batch) error {
	var todo []*Batch
	for _, b := range batches {
		if b != nil && (b.flushed < len(b.pending) || b.packPending()) {
			todo = append(todo, b)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	fail := func(err error) error {
		for _, b := range batches {
			if b != nil {
				b.dropTemps()
			}
		}
		return fmt.Errorf("sync blob store %s: %w", todo[0].s.Redacted(), err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	var g errgroup.Group
	files := make([][]pendingFile, len(todo))
	for i, b := range todo {
		files[i] = b.pending[b.flushed:]
		if b.packPending() {
			b.pkFile = &pendingFile{tmp: filepath.Join(b.s.localDir, "packs", randSuffix()+".pack.tmp"), data: b.pk.bytes()}
			tempStarted(b.pkFile.tmp)
			files[i] = append(slices.Clip(files[i]), *b.pkFile)
		}
		g.Go(func() error { return writeTemps(files[i]) })
	}
	if err := g.Wait(); err != nil {
		return fail(err)
	}
	// One flush per file system (a store's directory), however many batches.
	byDir := map[string][]pendingFile{}
	for i, b := range todo {
		byDir[b.s.localDir] = append(byDir[b.s.localDir], files[i]...)
	}
	for dir, pending := range byDir {
		if err := syncFiles(dir, pending); err != nil {
			return fail(err)
		}
	}
	for _, b := range todo {
		b.flushed = len(b.pending)
	}
	return nil
}

// dropTemps empties the batch, removing the temporary files it may have
// written.
func (b *Batch) dropTemps() {
	for _, p := range b.pending {
		removeTemp(p.tmp)
	}
	if b.pkFile != nil {
		removeTemp(b.pkFile.tmp)
	}
	b.pending, b.keys, b.flushed = nil, map[string]bool{}, 0
	b.pk, b.pkFile = nil, nil
}

// Sync makes every write of the batch durable under its final name, and
// returns once it is. On error the batch's temporary files are removed and
// nothing was published that was not durable.
func (b *Batch) Sync(ctx context.Context) error {
	if b.s.localDir == "" {
		if len(b.remote) > 0 {
			if err := b.syncRemote(ctx); err != nil {
				b.pk = nil
				return err
			}
		}
		return b.syncPack(ctx)
	}
	if len(b.pending) == 0 && (b.pk == nil || len(b.pk.entries) == 0) {
		b.pk = nil
		return nil
	}
	if err := b.Flush(ctx); err != nil {
		return err
	}
	pending := b.pending
	b.pending, b.keys, b.flushed = nil, map[string]bool{}, 0
	fail := func(err error) error {
		for _, p := range pending {
			removeTemp(p.tmp)
		}
		b.dropTemps()
		return fmt.Errorf("sync blob store %s: %w", b.s.Redacted(), err)
	}
	dirs := map[string]bool{}
	for _, p := range pending {
		if err := os.Rename(p.tmp, p.final); err != nil {
			return fail(err)
		}
		tempDone(p.tmp)
		dirs[filepath.Dir(p.final)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			b.dropTemps()
			return fmt.Errorf("sync blob store %s: %w", b.s.Redacted(), err)
		}
	}
	return b.syncPack(ctx)
}

// syncPack publishes the batch's pack under the next sequence number: on
// file:// by renaming its flushed temporary file (and an fsync of
// packs/), elsewhere by one upload. The batch is empty afterwards.
func (b *Batch) syncPack(ctx context.Context) error {
	pk, file := b.pk, b.pkFile
	b.pk, b.pkFile = nil, nil
	if pk == nil || len(pk.entries) == 0 {
		return nil
	}
	fail := func(err error) error {
		if file != nil {
			removeTemp(file.tmp)
		}
		return fmt.Errorf("sync blob store %s: %w", b.s.Redacted(), err)
	}
	seq, err := b.s.nextSeq(ctx)
	if err != nil {
		return fail(err)
	}
	if file == nil { // an object store
		if _, err := b.s.writePack(ctx, pk, seq); err != nil {
			return fail(err)
		}
	} else {
		p := &packInfo{name: packName(seq, randSuffix()), seq: seq, size: int64(len(file.data)), mod: time.Now()}
		if err := b.s.publishPackFile(file.tmp, p); err != nil {
			return fail(err)
		}
		b.s.addPack(p, pk.entries)
	}
	var docs []string
	for _, e := range pk.entries {
		if e.kind == kindRecord {
			k := e.docKey()
			docs = append(docs, hex.EncodeToString(k[:]))
		}
	}
	b.s.dropLooseRecords(ctx, docs)
	b.s.midxDue(ctx)
	return nil
}

// Abort drops the batch's queued writes, and the temporary files a Flush
// wrote; nothing of it is published.
func (b *Batch) Abort() {
	b.dropTemps()
	b.remote, b.slot = nil, nil
}

// fsyncEach makes each temporary file durable, one fsync each: the portable
// way, used where syncfs is missing.
func fsyncEach(pending []pendingFile) error {
	for _, p := range pending {
		f, err := os.Open(p.tmp)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// localPath is the file of key in a file:// store.
func (s *Store) localPath(key string) string {
	return filepath.Join(s.localDir, filepath.FromSlash(key))
}

// encodeRecord returns rec's key and stored bytes in the loose layout
// (indented JSON, a file a person may read).
func encodeRecord(rec *Record) (string, []byte, error) {
	return encodeRecordAs(rec, false)
}

// encodeRecordAs returns rec's key and stored bytes; packed, compact JSON
// (no indentation: a tenth of a record's bytes, in an object no one reads
// by eye).
func encodeRecordAs(rec *Record, packed bool) (string, []byte, error) {
	key, err := RecordKey(rec.DocID)
	if err != nil {
		return "", nil, fmt.Errorf("put record: %w", err)
	}
	if err := checkBlobRef(rec); err != nil {
		return "", nil, fmt.Errorf("put record %s: %w", rec.DocID, err)
	}
	var data []byte
	if packed {
		data, err = json.Marshal(rec)
	} else {
		data, err = json.MarshalIndent(rec, "", "  ")
	}
	if err != nil {
		return "", nil, fmt.Errorf("put record %s: %w", rec.DocID, err)
	}
	// Store only what reads back as a record.
	if err := checkRecord(rec); err != nil {
		return "", nil, fmt.Errorf("put record %s: %w", rec.DocID, err)
	}
	return key, append(data, '\n'), nil
}

// checkRecord reports why rec's encoding would not read back as a record
// of rec.DocID (decodeRecordOf), from its fields, without decoding it (the
// decoding was half the cost of staging a batch's records): the source
// must be non-empty valid UTF-8 (encoding/json writes U+FFFD for invalid
// bytes, and the source read back would hash to another id) hashing to
// DocID, the sensitivity known and the metadata a JSON object or null.
// The caller checked DocID and BlobID; json.Marshal checked the time.
// Errors wrap ErrCorrupt, as decodeRecordOf's.
func checkRecord(rec *Record) error {
	if rec.Source == "" {
		return fmt.Errorf("empty source: %w", ErrCorrupt)
	}
	if !utf8.ValidString(rec.Source) || DocID(rec.Source) != rec.DocID {
		return fmt.Errorf("source %s does not hash to the document id (damaged): %w", strconv.Quote(rec.Source), ErrCorrupt)
	}
	switch rec.Sensitivity {
	case "public", "internal", "restricted":
	default:
		return fmt.Errorf("sensitivity %s: want public, internal or restricted: %w", strconv.Quote(rec.Sensitivity), ErrCorrupt)
	}
	if rec.Meta != "" {
		var m Meta
		if err := m.UnmarshalJSON([]byte(rec.Meta)); err != nil {
			return fmt.Errorf("decode: %v: %w", err, ErrCorrupt)
		}
	}
	return nil
}
