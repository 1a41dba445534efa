package index

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/fts"
)

// Sensitivity levels of a document, lowest first.
const (
	Public     = "public"
	Internal   = "internal"
	Restricted = "restricted"
)

// DefaultLanguage is a document's language when neither its front matter nor
// the ingest input gives one.
const DefaultLanguage = "en"

// Input is one document to ingest.
type Input struct {
	// Source names the document: an absolute path or a URI. The same source
	// is the same document (blobstore.DocID), so ingesting it again replaces
	// its blocks.
	Source string
	// Name is the file name used for the media type and as the title of last
	// resort. Default: the last segment of Source.
	Name string
	// MediaType overrides detection by Name's extension.
	MediaType string
	// Title, when not empty, is the document's title over what extraction
	// finds (a BEIR corpus carries titles beside its texts). The record keeps
	// it, and rebuild passes it again.
	Title string
	// Data is the raw content, stored as a blob unchanged.
	Data []byte
	// Language and Sensitivity apply when the document's front matter does
	// not set them. When neither sets them, a document already in the index
	// keeps its language and sensitivity (so re-ingesting a restricted
	// document without the flag never makes it public), and a new one gets
	// DefaultLanguage and Public.
	Language    string
	Sensitivity string
	// Meta is the document's metadata, over its front matter's key by key
	// (see CheckMeta for keys and values; Filter for searching by it). The
	// record keeps it. nil keeps what a document already in the index was
	// given (as Language and Sensitivity); an empty map clears it.
	// Ingesting the same bytes with other Meta is a metadata-only update:
	// nothing is extracted or embedded again.
	Meta map[string]any
	// IngestedAt, when not zero, is recorded instead of the current time
	// (rebuild passes the record's time, so rebuilt rows equal ingested ones).
	IngestedAt time.Time
}

// input is an Input with what only escurel itself sets.
type input struct {
	Input
	// rederive says the bytes and the record are already in the blob
	// store (a rebuild reading them back): only the index rows are
	// written. A rebuild must not write records, or it would bring back a
	// document deleted from the live index while it ran.
	rederive bool
	// failure, when not empty, records the document as failed for this
	// reason without storing or extracting Data, which must be empty:
	// IngestFiles sets it for a file over the size cap, which it never
	// reads, and a rebuild for the record of such a file
	// (blobstore.Record.Error).
	failure string
	// size and mtime are the file's (blobstore.Record Bytes, for a file
	// never read, and SourceMTime): IngestFiles sets them from the
	// listing, a rebuild from the record.
	size, mtime int64
}

func inputs(ins []Input) []input {
	out := make([]input, len(ins))
	for i, in := range ins {
		out[i].Input = in
	}
	return out
}

// Status says what Ingest did with a document.
type Status string

// Statuses of an ingested document.
const (
	Added     Status = "added"     // a new document
	Replaced  Status = "replaced"  // a changed document: its old blocks are gone
	Unchanged Status = "unchanged" // same bytes and settings: nothing written
	// MetaUpdated: the same bytes with other metadata (Input.Meta): the
	// record and the document's row changed, nothing was extracted or
	// embedded again.
	MetaUpdated Status = "meta_updated"
	// Failed: the bytes could not be extracted (corrupt, encrypted, over a
	// limit, …). The blob and the record are stored and the document is
	// listed with its reason (Index.Failed), but it has no blocks until a
	// rebuild or a new version extracts.
	Failed Status = "failed"
)

// Document statuses in the index (documents.status).
const (
	statusOK     = "ok"
	statusFailed = "failed"
)

// Result is the outcome of ingesting one document.
type Result struct {
	DocID  string
	Source string
	Title  string
	// Status is "" when nothing of the document was stored (the error
	// says why).
	Status    Status
	Blocks    int    // blocks the document has now
	MediaType string // as detected (extract.Detect) or given
	Pages     int    // pages of a paged format (PDF), else 0
	Extractor string // the extractor's ID, e.g. "pdf/1"
	// Reason says why the document Failed; "" otherwise.
	Reason string
	// ExtractTime is the wall time of extraction.
	ExtractTime time.Duration
	// TextlessPages counts the pages on which no block lies: pages
	// without a text layer (scanned, which escurel does not OCR). 0 for
	// a failed document and a format without pages.
	TextlessPages int
}

// DocumentError is a problem with one input document: one that cannot be
// read (unsupported type, bad metadata), of which nothing was stored, or
// one whose bytes fail extraction (empty, binary, invalid UTF-8, bad front
// matter, corrupt, encrypted, over a limit), which is stored as Failed
// (see Result.Status). Err wraps an extract error where there is one.
type DocumentError struct {
	Source string
	Err    error
}

// Error is "<source>: <reason>"; a source that is not valid UTF-8 is
// quoted with Go escapes (strconv.Quote).
func (e *DocumentError) Error() string {
	if !utf8.ValidString(e.Source) {
		return strconv.Quote(e.Source) + ": " + e.Err.Error()
	}
	return e.Source + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *DocumentError) Unwrap() error { return e.Err }

// block is a derived block, ready to write.
type block struct {
	chunk.Block
	id            string // the public id (blockID)
	body, context string
	// The small-to-big columns: "" without a window.
	parentID, window, locator string
	terms                     [fts.NumFields][]string // analyzed body and context
	vector                    []float32               // unit length; nil without an embedder (set by embedAll)
}

// Ingest stores in's bytes and record in the blob store, durably, and then
// replaces the document's rows in one transaction: either all of the new
// blocks, postings and vectors are visible afterwards, or (on error) the old
// ones still are. Re-ingesting identical bytes with identical settings
// writes nothing and reports Unchanged.
//
// Errors: a *DocumentError for a problem with the input; otherwise a storage
// error, after which the index still serves the document's previous
// version.
func (ix *Index) Ingest(ctx context.Context, in Input) (Result, error) {
	res, errs, err := ix.IngestBatch(ctx, []Input{in})
	if err != nil {
		return Result{Source: in.Source}, err
	}
	return res[0], errs[0]
}

// pending is a derived document waiting for its transaction.
type pending struct {
	rec    *blobstore.Record
	blocks []block
	exists bool // the index has rows of the document to delete first
	// status is statusOK or statusFailed; failure is the extraction error
	// of a failed document.
	status    string
	failure   error
	extractor string // extract.Extractor ID; "" when extraction never ran
	pages     int
	textless  int    // pages without a block (textlessPages)
	text      string // the extracted text to keep, for formats whose text is not the blob
	took      time.Duration
	meta      map[string]any // the front matter's metadata (derived)
}

// reason is what documents.reason holds: the failure, or "".
func (p *pending) reason() string {
	if p.failure == nil {
		return ""
	}
	return p.failure.Error()
}

// storedDoc is a document as the index holds it.
type storedDoc struct {
	rec           *blobstore.Record
	status        string
	extractor     string
	pages, blocks int
	textless      int // pages without a block
}

// IngestBatch ingests ins as Ingest does, with one transaction for all of
// them, which is much faster than one each. res[i] and errs[i] are the
// outcome of ins[i]: errs[i] is a *DocumentError or nil. err is a storage
// error, after which none of the batch's rows were written; when the
// transaction itself failed, the records the batch stored are taken back
// (restoreRecords), so the blob store still describes what the index
// serves. A source given twice is ingested as
// its last version. Batches commit one at a time; calls from several
// goroutines are safe, and each prepares its documents (extraction,
// analysis, embedding, blobs) without the writer lock, so a loader that
// keeps two batches under way keeps a second core busy while one commits
// (as IngestFiles does: BenchmarkIngestFiles).
func (ix *Index) IngestBatch(ctx context.Context, ins []Input) (res []Result, errs []error, err error) {
	return ix.ingest(ctx, inputs(ins))
}

// ingest is IngestBatch for inputs escurel builds itself (IngestFiles,
// Sync, a rebuild's rederive): ingestOnce, run once more after DuckDB ran
// out of memory and the automatic limit was raised (outOfMemory; an error
// after the rows' commit is not tried again). The batch's metadata-only
// updates commit in their own transaction before the rows' (updateMeta):
// when the rows' failed, the retry finds that metadata stored and would
// report the document Unchanged, so the first try's MetaUpdated stands.
func (ix *Index) ingest(ctx context.Context, ins []input) (res []Result, errs []error, err error) {
	memo := &embedMemo{} // every try's vectors, so no text is embedded twice
	res, errs, err = ix.ingestOnce(ctx, ins, memo)
	if ix.outOfMemory(ctx, "ingest", err) {
		first := res
		res, errs, err = ix.ingestOnce(ctx, ins, memo)
		for i := range min(len(first), len(res)) {
			if first[i].Status == MetaUpdated && res[i].Status == Unchanged {
				res[i].Status = MetaUpdated
			}
		}
	}
	return res, errs, err
}

// ingestHook, when not nil (tests), is called by ingestOnce with
// "prepared" once a batch is prepared, before it takes writeMu, and with
// "recheck" when it reads the batch's documents again under writeMu.
var ingestHook func(stage string)

// ingestOnce is ingest, tried once.
//
// The work that may take long runs without the writer lock, on a reference
// to the live state: derivation, the embedding calls and the blob uploads
// (content-addressed, so an upload that is never committed is only an
// orphan blob). Under writeMu it then checks that the live state and the
// batch's documents are as prepare read them, and commits: records, then
// the transaction. When another writer got there first it prepares again;
// after a few tries it prepares under the lock.
func (ix *Index) ingestOnce(ctx context.Context, ins []input, memo *embedMemo) (res []Result, errs []error, err error) {
	const tries = 3
	if ix.readOnly {
		return nil, nil, ix.readOnlyError()
	}
	for range tries {
		s, err := ix.acquire()
		if err != nil {
			return nil, nil, err
		}
		gone := ix.blobsGone.Load()
		// Read before prepareBatch reads the documents: a writer that
		// held writeMu then, or took it since, releases it after.
		released := ix.writeMu.releases()
		b, err := s.prepareBatch(ctx, ins, memo)
		if err != nil {
			s.unref()
			return b.res, b.errs, err
		}
		if ingestHook != nil {
			ingestHook("prepared")
		}
		ix.writeMu.Lock()
		ok := ix.cur.Load() == s && ix.blobsGone.Load() == gone // else a blob the batch found stored may be gone
		if ok && ix.stale != "" {
			_, err = ix.live() // says why no write is taken
			ok = false
		}
		if ok && ix.writeMu.releases() != released {
			// Another writer held the lock while the batch was
			// prepared: read its documents again. Else every commit
			// prepareBatch could have missed had ended before it read
			// (a commit is made under writeMu), and the documents are as
			// it read them: at 1M documents the second read was a
			// semi-join of 35-100 ms while the set of documents is not
			// loaded (docSet).
			if ingestHook != nil {
				ingestHook("recheck")
			}
			ok, err = s.unchangedSince(ctx, b)
		}
		if ok && err == nil {
			err = ix.commit(ctx, s, b)
		}
		b.drop() // records flushed and not published: another writer got there first, or an error
		ix.writeMu.Unlock()
		s.unref()
		if ok || err != nil {
			return b.res, b.errs, err
		}
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return nil, nil, err
	}
	b, err := s.prepareBatch(ctx, ins, memo)
	if err == nil {
		err = ix.commit(ctx, s, b)
	}
	b.drop()
	return b.res, b.errs, err
}

// commit commits the batch b prepared on the live state s (commitBatch),
// then starts what a committed write calls for: the folding of the blob
// store's small packs (foldAfter) and, when it wrote rows, the full-text
// merges (mergeAfter). The caller holds writeMu.
func (ix *Index) commit(ctx context.Context, s *state, b *batch) error {
	if err := s.commitBatch(ctx, b); err != nil {
		return err
	}
	ix.foldAfter()
	if len(b.writes) > 0 {
		return ix.mergeAfter(s)
	}
	return nil
}

// mergeAfter starts the full-text merges that a committed batch calls
// for (fts.Index.Maintain) in the background: they take writeMu, as
// before, but once the batch has returned, so they overlap with the
// caller's next batch, which derives and stores its blobs without the
// lock and waits for them only to commit. The caller holds writeMu, and
// s is the live state. A merge has its own transaction; one that fails leaves
// the segments it would have merged, and its error is reported by the
// next batch, which merges again after its commit (synchronously, as
// before), or by Close, which also runs a merge still pending.
func (ix *Index) mergeAfter(s *state) error {
	if err := ix.mergeErr; err != nil {
		ix.mergeErr = nil
		if err := s.maintain(context.Background()); err != nil {
			return fmt.Errorf("ingest: committed, then merging the full-text segments: %w", afterCommit(err))
		}
		return nil
	}
	s.refs.Add(1) // the Index's own reference (s is live) keeps it above zero
	ix.mergePending = true
	ix.merges.Add(1)
	go func() {
		defer ix.merges.Done()
		defer s.unref()
		ix.writeMu.Lock()
		defer ix.writeMu.unlockMerge() // merges only: no documents row changes
		if ix.cur.Load() != s || !ix.mergePending {
			// Closed, or another generation is live (s takes no more
			// writes), or a later batch's merge, Close or an earlier
			// goroutine ran it.
			return
		}
		ix.mergePending = false
		ix.mergeErr = s.maintain(context.Background())
	}()
	return nil
}

// WaitForMerges runs the full-text merges the last write left pending
// (they run in the background once IngestBatch has returned; see
// Index.IngestBatch) and waits for one already running, then returns the
// error of the last background merge, if it failed, and forgets it (as
// the next write would; a failed merge leaves its segments as they were,
// and a later write merges again). As Lucene's IndexWriter.waitForMerges:
// searches never need it, every committed write is visible without it;
// it is for a caller that times a write with the work it caused
// (benchmarks), or wants the index merged before copying its files. It
// also runs a fold of the blob store's small packs that a write started
// and that has not run yet (foldAfter), so that no fold runs under a copy
// of the blob store made after it returns.
// Errors: the merge's or the fold's; ErrClosed after Close.
func (ix *Index) WaitForMerges(ctx context.Context) error {
	ix.writeMu.Lock()
	defer ix.writeMu.unlockMerge() // merges only: no documents row changes
	s := ix.cur.Load()
	if s == nil {
		return ErrClosed
	}
	var err error
	if ix.mergePending {
		ix.mergePending = false
		err = s.maintain(ctx)
	}
	if err == nil {
		err, ix.mergeErr = ix.mergeErr, nil // the last background merge's
	}
	if err != nil {
		err = fmt.Errorf("merging the full-text segments: %w", err)
	}
	if ix.folding {
		// A fold of small packs started (foldAfter), whatever the merge
		// did: its goroutine finds it done.
		err = errors.Join(err, ix.fold())
	}
	return err
}

var languageTag = regexp.MustCompile(`^[a-z]{2,3}(-[A-Za-z0-9]{1,8})*$`)

// CheckLanguage accepts a BCP 47 language tag with a lower-case primary
// subtag, such as "en" or "pt-BR".
func CheckLanguage(tag string) error {
	if !languageTag.MatchString(tag) {
		return fmt.Errorf("language %q: want a BCP 47 tag such as en or pt-BR", tag)
	}
	return nil
}

// CheckSensitivity accepts Public, Internal and Restricted.
func CheckSensitivity(s string) error {
	if s != Public && s != Internal && s != Restricted {
		return fmt.Errorf("sensitivity %q: want %s, %s or %s", s, Public, Internal, Restricted)
	}
	return nil
}

// embedMemo holds the vectors of one ingest call, by the text embedded,
// across its tries: a batch prepared again (another writer changed one of
// its documents meanwhile, or DuckDB ran out of memory and the limit was
// raised) sends the embedder only the texts no earlier try sent, so that
// with a paid model a retry is not paid twice. Its vectors are of one
// embedder identity (embed.Spec.Identity): a try on a generation with
// another (a reembed switched meanwhile) starts it afresh. It lives for
// the call and keys a vector by its text's SHA-256, not the text, so it
// keeps no copy of a batch's texts (up to 32 MiB) past the embedding.
type embedMemo struct {
	spec embed.Spec
	vecs map[[32]byte][]float32 // by sha256 of the text; normalized, never written after they are stored
}

// embedAll embeds the blocks of docs, in batches across documents and
// several batches at once (embedTexts); a text memo holds (a vector from
// an earlier try of the same ingest) is not sent again, and those sent
// are added to memo. An embedder error fails them all.
func (ix *state) embedAll(ctx context.Context, docs []pending, memo *embedMemo) error {
	if ix.vec == nil {
		return nil
	}
	if memo.vecs == nil || memo.spec != ix.embedSpec.Identity() {
		memo.spec, memo.vecs = ix.embedSpec.Identity(), map[[32]byte][]float32{}
	}
	var send []string
	var keys, sent [][32]byte // every block's text's key, and those of send
	for _, d := range docs {
		for _, b := range d.blocks {
			t := ix.embeddingText(b.context, b.body)
			k := sha256.Sum256([]byte(t))
			keys = append(keys, k)
			if memo.vecs[k] == nil {
				send = append(send, t)
				sent = append(sent, k)
			}
		}
	}
	vecs, err := ix.embedTexts(ctx, send)
	if err != nil {
		return err
	}
	for i, k := range sent {
		memo.vecs[k] = vecs[i]
	}
	i := 0
	for _, d := range docs {
		for j := range d.blocks {
			d.blocks[j].vector = memo.vecs[keys[i]]
			i++
		}
	}
	return nil
}

// embedText is what the dense leg embeds and the full-text index analyzes:
// the context, a newline and the body, or the body alone.
func embedText(context, body string) string {
	if context == "" {
		return body
	}
	return context + "\n" + body
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// sameDocument reports whether two records describe the same version of a
// document (ingestion time aside).
func sameDocument(a, b *blobstore.Record) bool {
	x, y := *a, *b
	x.IngestedAt, y.IngestedAt = time.Time{}, time.Time{}
	return x == y
}

// rowRecord completes a record scanned from its documents row (the
// record's columns as read) with what the row stores otherwise: the title's
// origin, the failure reason of a document whose bytes were never stored,
// and the metadata given.
func rowRecord(r *blobstore.Record, titleFrom, reason, given string) {
	r.Meta = recordMeta(given)
	r.TitleGiven = titleFrom == titleFromInput
	r.IngestedAt = r.IngestedAt.UTC()
	if r.BlobID == "" {
		r.Error = reason // a document whose bytes were never stored
	}
}

// currentDocs returns the index's copies of the records of docIDs, with
// their status, by doc id; documents the index does not hold are absent.
func (ix *state) currentDocs(ctx context.Context, docIDs []string) (map[string]*storedDoc, error) {
	out := map[string]*storedDoc{}
	docIDs, err := ix.candidates(ctx, docIDs) // new documents read no row
	if err != nil || len(docIDs) == 0 {
		return out, err
	}
	// The block count is the row's block_count when known; only documents
	// without it, or with pages (textless pages: which pages hold blocks),
	// read their blocks, in a second query of the same snapshot.
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("read documents: %w", err)
	}
	defer tx.Rollback()
	which, args := `doc_id IN (SELECT unnest(?::VARCHAR[]))`, []any{docIDs}
	if len(docIDs) <= 64 { // a few keys: filtered in the scan
		which, args = `doc_id IN (`+placeholders(len(docIDs))+`)`, make([]any, len(docIDs))
		for i, id := range docIDs {
			args[i] = id
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT doc_id, source, media_type, title, title_from, sensitivity, blob_id, language, ingested_at,
		bytes, source_mtime, status, reason, extractor, pages, block_count, meta_given
		FROM documents d WHERE `+which, args...)
	if err != nil {
		return nil, fmt.Errorf("read documents: %w", err)
	}
	defer rows.Close()
	var counted []string
	for rows.Next() {
		var r blobstore.Record
		var d storedDoc
		var titleFrom, reason, given string
		if err := rows.Scan(&r.DocID, &r.Source, &r.MediaType, &r.Title, &titleFrom, &r.Sensitivity, &r.BlobID, &r.Language, &r.IngestedAt,
			&r.Bytes, &r.SourceMTime, &d.status, &reason, &d.extractor, &d.pages, &d.blocks, &given); err != nil {
			return nil, fmt.Errorf("read documents: %w", err)
		}
		rowRecord(&r, titleFrom, reason, given)
		d.rec = &r
		out[r.DocID] = &d
		if d.blocks < 0 || d.pages > 0 {
			counted = append(counted, r.DocID)
		}
	}
	if err := rows.Err(); err != nil || len(counted) == 0 {
		return out, err
	}
	rows.Close()
	rows, err = tx.QueryContext(ctx, `SELECT doc_id, (SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id), `+textlessSQL+`
		FROM documents d WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))`, counted)
	if err != nil {
		return nil, fmt.Errorf("read documents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var blocks, textless int
		if err := rows.Scan(&id, &blocks, &textless); err != nil {
			return nil, fmt.Errorf("read documents: %w", err)
		}
		if d := out[id]; d != nil {
			d.blocks, d.textless = blocks, textless
		}
	}
	return out, rows.Err()
}
