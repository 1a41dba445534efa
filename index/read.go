package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"time"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/index/fts"
)

// Stats describes an index for `escurel status`.
type Stats struct {
	Path          string   `json:"path"`
	BlobURL       string   `json:"blob_url"` // redacted: secrets in it are "xxxxx" (blobstore.Redact)
	SchemaVersion int      `json:"schema_version"`
	Manifest      Manifest `json:"manifest"`
	Documents     int64    `json:"documents"`
	Failed        int64    `json:"failed"` // documents whose bytes failed extraction (Index.Failed lists them)
	// Extractors counts the documents by the extractor that read them
	// (e.g. "pdf/1"); "" counts documents never extracted (over the size
	// cap). StaleExtractors lists those not among this binary's
	// (extract.IDs): escurel rebuild reads their documents again.
	Extractors      map[string]int64 `json:"extractors"`
	StaleExtractors []string         `json:"stale_extractors,omitempty"`
	Blocks          int64            `json:"blocks"`
	EmbeddingSet    string           `json:"embedding_set,omitempty"` // the active set's name; "" without vectors
	Embeddings      int64            `json:"embeddings"`              // vectors in the active set
	FullText        fts.Stats        `json:"full_text"`
	FileBytes       int64            `json:"file_bytes"` // size of the DuckDB file, its write-ahead log and the full-text image

	// TextlessPages counts the pages of paged documents on which no block
	// lies (no text layer: scanned), in TextlessDocuments documents;
	// Index.TextlessDocuments lists them.
	TextlessPages     int64 `json:"textless_pages"`
	TextlessDocuments int64 `json:"textless_documents"`
}

// Stats counts the index's rows.
func (ix *Index) Stats(ctx context.Context) (Stats, error) {
	s, err := ix.acquire()
	if err != nil {
		return Stats{}, err
	}
	defer s.unref()
	return s.stats(ctx)
}

// Counts is what a caller may count of an index at its clearance: the
// documents at or below it (failed ones included), the failed ones, their
// blocks, and the documents per extractor. Unlike Stats, nothing in it
// depends on documents above the clearance.
type Counts struct {
	Documents  int64            `json:"documents"`
	Failed     int64            `json:"failed"`
	Blocks     int64            `json:"blocks"`
	Extractors map[string]int64 `json:"extractors"`
}

// CountsAt counts the documents and blocks clearance may see (as in
// SearchOptions.Clearance; "" is Public).
func (ix *Index) CountsAt(ctx context.Context, clearance string) (Counts, error) {
	s, err := ix.acquire()
	if err != nil {
		return Counts{}, err
	}
	defer s.unref()
	levels, err := allowed(clearance)
	if err != nil {
		return Counts{}, fmt.Errorf("counts: %w", err)
	}
	args := make([]any, len(levels))
	for i, l := range levels {
		args[i] = l
	}
	in := `d.sensitivity IN (` + placeholders(len(levels)) + `)`
	c := Counts{Extractors: map[string]int64{}}
	rows, err := s.db.QueryContext(ctx, `SELECT d.extractor, count(*), count(*) FILTER (WHERE d.status = '`+statusFailed+`'),
		coalesce(sum((SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id)), 0)
		FROM documents d WHERE `+in+` GROUP BY d.extractor`, args...)
	if err != nil {
		return c, fmt.Errorf("counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ext string
		var docs, failed, blocks int64
		if err := rows.Scan(&ext, &docs, &failed, &blocks); err != nil {
			return c, fmt.Errorf("counts: %w", err)
		}
		c.Extractors[ext] = docs
		c.Documents += docs
		c.Failed += failed
		c.Blocks += blocks
	}
	return c, rows.Err()
}

// stats is Index.Stats on one generation.
func (ix *state) stats(ctx context.Context) (Stats, error) {
	st := Stats{Path: ix.path, BlobURL: ix.blobs.Redacted(), Manifest: *ix.manifest.Load()}
	st.FullText = ix.fts.Stats()
	vectors := `0`
	if ix.vec != nil {
		vectors = `(SELECT count(*) FROM ` + ix.vec.table + `)`
		st.EmbeddingSet = ix.vec.spec.Identity().String()
	}
	err := ix.db.QueryRowContext(ctx, `SELECT
		(SELECT max(version) FROM schema_migrations),
		(SELECT count(*) FROM documents),
		(SELECT count(*) FROM blocks),
		`+vectors).Scan(&st.SchemaVersion, &st.Documents, &st.Blocks, &st.Embeddings)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	if err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM documents WHERE status = ?`, statusFailed).Scan(&st.Failed); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	if err := ix.db.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0), count(*) FILTER (WHERE n > 0)
		FROM (SELECT `+textlessSQL+` AS n FROM documents d)`).Scan(&st.TextlessPages, &st.TextlessDocuments); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT extractor, count(*) FROM documents GROUP BY extractor ORDER BY extractor`)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	current := map[string]bool{"": true}
	for _, id := range strings.Fields(extract.IDs()) {
		current[id] = true
	}
	st.Extractors = map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
		st.Extractors[id] = n
		if !current[id] {
			st.StaleExtractors = append(st.StaleExtractors, id)
		}
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	// No CHECKPOINT: a read writes nothing, and works on a full disk.
	st.FileBytes = fileSize(ix.path) + fileSize(ix.path+".wal") + fileSize(imagePath(ix.path))
	return st, nil
}

// DocumentBlocks returns every block of a document in document order, as
// hits with score 0. A document without blocks, an unknown one and one above
// clearance (see SearchOptions.Clearance; "" is Public) all give an empty
// slice.
func (ix *Index) DocumentBlocks(ctx context.Context, docID, clearance string) ([]Hit, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	return s.documentBlocks(ctx, docID, clearance)
}

// documentBlocks is Index.DocumentBlocks on one generation.
func (ix *state) documentBlocks(ctx context.Context, docID, clearance string) ([]Hit, error) {
	levels, err := allowed(clearance)
	if err != nil {
		return nil, fmt.Errorf("document blocks: %w", err)
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	defer tx.Rollback()
	ids, err := queryColumn[int64](ctx, tx, `SELECT block_id FROM blocks WHERE doc_id = ? ORDER BY ord`, docID)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	hits, _, err := fillHits(ctx, tx, ids, levels)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	return hits, nil
}

// ForEachBlock calls fn with every block the clearance may see ("" is
// Public), by document id and position, as a hit with score 0, from one
// snapshot. An error from fn stops the walk and is returned.
//
// The snapshot is one DuckDB transaction: it reads the documents at the
// clearance and every block once each, in chunks (a bounded share of the
// memory_limit), into sorted buckets spilled to a private directory beside
// the generation's file (eachInDocOrder; about the blocks' text on disk,
// removed at the end), ends the transaction, and then merges the two in
// doc-id order, calling fn. So the first call comes once the whole table
// is read, and a slow fn holds no transaction (DuckDB would skip the
// automatic checkpoint of other writers' commits meanwhile). It stops at
// the first block after ctx is done, with ctx's error.
func (ix *Index) ForEachBlock(ctx context.Context, clearance string, fn func(Hit) error) error {
	s, err := ix.acquire()
	if err != nil {
		return err
	}
	defer s.unref()
	return s.forEachBlock(ctx, clearance, fn)
}

// forEachBlock is Index.ForEachBlock on one generation.
func (ix *state) forEachBlock(ctx context.Context, clearance string, fn func(Hit) error) error {
	levels, err := allowed(clearance)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	args := make([]any, len(levels))
	for i, l := range levels {
		args[i] = l
	}
	// One transaction (one snapshot). The documents at the clearance and
	// the blocks are each read once and sorted by doc id
	// (spillInDocOrder), then merged: a join per chunk of blocks would
	// scan every document each time. The blocks of documents above the
	// clearance (any sensitivity not among the levels: fails closed) are
	// left out as they are read, so their text is never written to the
	// spill files; the merge leaves out the rest (a block without a
	// document row).
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	defer tx.Rollback()
	above, err := docsAbove(ctx, tx, args)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	chunk, dir := ix.readChunk(ctx), filepath.Dir(ix.path)
	docs, err := spillInDocOrder(ctx, tx, dir, chunk, docOrderRead{table: "documents", rowid: "rowid", doc: "doc_id", docCol: 0, ordCol: -1,
		size:  `SELECT coalesce(sum(strlen(source) + strlen(title) + 64), 0)::BIGINT FROM documents`,
		query: `SELECT doc_id, source, title FROM documents WHERE sensitivity IN (` + placeholders(len(levels)) + `) AND %[1]s`, args: args})
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	defer docs.remove()
	blocks, err := spillInDocOrder(ctx, tx, dir, chunk, docOrderRead{table: "blocks", rowid: "rowid", doc: "doc_id", docCol: 1, ordCol: 8,
		size:  `SELECT coalesce(sum(strlen(public_id) + strlen(body) + strlen(context) + strlen(heading_path) + 200), 0)::BIGINT FROM blocks`,
		query: `SELECT public_id, doc_id, body, context, heading_path, page, byte_start, byte_end, ord FROM blocks WHERE %[1]s`,
		skip:  above.has})
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	defer blocks.remove()
	tx.Rollback() // every row needed is spilled: no snapshot held while fn runs
	var docsErr error
	nextDoc, stop := iter.Pull(docs.all(&docsErr))
	defer stop()
	var doc struct{ id, source, title string }
	docsDone := false
	var fnErr error // fn's, returned as it is
	err = blocks.each(func(payload []byte) error {
		if err := ctx.Err(); err != nil {
			fnErr = err
			return err
		}
		var h Hit
		var path string
		if err := scanRow(payload, []any{&h.BlockID, &h.DocID, &h.Body, &h.Context, &path, &h.Page, &h.ByteStart, &h.ByteEnd}); err != nil {
			return err
		}
		// The document at or after the block's, in doc-id order.
		for !docsDone && doc.id < h.DocID {
			p, ok := nextDoc()
			if !ok {
				if docsErr != nil {
					return docsErr
				}
				docsDone = true
				break
			}
			if err := scanRow(p, []any{&doc.id, &doc.source, &doc.title}); err != nil {
				return err
			}
		}
		if doc.id != h.DocID {
			return nil // its document is above the clearance (or has no row): left out, as a join leaves it
		}
		h.Source, h.Title = doc.source, doc.title
		var err error
		if h.HeadingPath, err = decodeHeadingPath(h.BlockID, path); err != nil {
			fnErr = err
			return err
		}
		if fnErr = fn(h); fnErr != nil {
			return fnErr
		}
		return nil
	})
	if err != nil && err != fnErr {
		return fmt.Errorf("blocks: %w", err)
	}
	return err
}

// idSet is a set of doc ids, keyed by their 16 bytes where they are
// 32 lowercase hex digits (hitDocKey), else by the string.
type idSet struct {
	keys  map[[16]byte]struct{}
	other map[string]struct{}
}

// has reports whether id is in the set.
func (d *idSet) has(id string) bool {
	if k, ok := hitDocKey(id); ok {
		_, in := d.keys[k]
		return in
	}
	_, in := d.other[id]
	return in
}

// docsAbove returns the documents whose sensitivity is none of levels
// (a clearance's levels as arguments: above it, or a value escurel does
// not know, more restricted).
func docsAbove(ctx context.Context, q querier, levels []any) (*idSet, error) {
	rows, err := q.QueryContext(ctx, `SELECT doc_id FROM documents WHERE sensitivity IS NULL OR sensitivity NOT IN (`+placeholders(len(levels))+`)`, levels...)
	if err != nil {
		return nil, fmt.Errorf("documents above the clearance: %w", err)
	}
	defer rows.Close()
	d := &idSet{keys: map[[16]byte]struct{}{}, other: map[string]struct{}{}}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("documents above the clearance: %w", err)
		}
		if k, ok := hitDocKey(id); ok {
			d.keys[k] = struct{}{}
		} else {
			d.other[id] = struct{}{}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("documents above the clearance: %w", err)
	}
	return d, nil
}

// FailedDocument is a document whose bytes could not be extracted. It has
// no blocks; its record (and its blob, unless it was over the size cap)
// is kept, and a rebuild tries it again.
type FailedDocument struct {
	DocID      string    `json:"doc_id"`
	Source     string    `json:"source"`
	MediaType  string    `json:"media_type"`
	Extractor  string    `json:"extractor"` // the extractor that failed; "" when it never ran
	Reason     string    `json:"reason"`
	IngestedAt time.Time `json:"ingested_at"` // UTC
	// Sensitivity is the document's: a caller that shows the list to
	// someone else filters by it (the list itself is an operator's view).
	Sensitivity string `json:"sensitivity"`
}

// Failed lists the failed documents by source, at every sensitivity: it is
// an operator's view. A reason may quote the document (a parser's message
// naming a YAML key or an XML entity), so for documents above clearance
// (as in SearchOptions.Clearance; "" is Public) it keeps only its class,
// the part before the first ": ", and says that the rest is withheld.
func (ix *Index) Failed(ctx context.Context, clearance string) ([]FailedDocument, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	return s.failed(ctx, clearance)
}

// failed is Index.Failed on one generation.
func (ix *state) failed(ctx context.Context, clearance string) ([]FailedDocument, error) {
	levels, err := allowed(clearance)
	if err != nil {
		return nil, fmt.Errorf("failed documents: %w", err)
	}
	cleared := map[string]bool{}
	for _, l := range levels {
		cleared[l] = true
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT doc_id, source, media_type, extractor, reason, ingested_at, sensitivity
		FROM documents WHERE status = ? ORDER BY source`, statusFailed)
	if err != nil {
		return nil, fmt.Errorf("failed documents: %w", err)
	}
	defer rows.Close()
	var out []FailedDocument
	for rows.Next() {
		var f FailedDocument
		var sens string
		if err := rows.Scan(&f.DocID, &f.Source, &f.MediaType, &f.Extractor, &f.Reason, &f.IngestedAt, &sens); err != nil {
			return nil, fmt.Errorf("failed documents: %w", err)
		}
		f.Sensitivity = sens
		if !cleared[sens] {
			class, _, _ := strings.Cut(f.Reason, ": ")
			f.Reason = fmt.Sprintf("%s (details withheld: a %s document; clearance %s shows them)", class, sens, sens)
		}
		f.IngestedAt = f.IngestedAt.UTC()
		out = append(out, f)
	}
	return out, rows.Err()
}

// DocumentText returns the text a document's blocks are spans of:
// text[ByteStart:ByteEnd] of every block of the document is its body. For
// Markdown and plain text it is the blob itself, read from the blob store;
// for HTML, DOCX and PDF it is the extracted text the index keeps.
//
// clearance is as in SearchOptions.Clearance. Errors: ErrNotFound (wrapped)
// for a document that does not exist, has no text (failed), or is above
// clearance, alike, so that the error does not tell which.
func (ix *Index) DocumentText(ctx context.Context, docID, clearance string) (string, error) {
	s, err := ix.acquire()
	if err != nil {
		return "", err
	}
	defer s.unref()
	return s.documentText(ctx, docID, clearance)
}

// documentText is Index.DocumentText on one generation.
func (ix *state) documentText(ctx context.Context, docID, clearance string) (string, error) {
	levels, err := allowed(clearance)
	if err != nil {
		return "", fmt.Errorf("document text: %w", err)
	}
	args := []any{docID, statusOK}
	for _, l := range levels {
		args = append(args, l)
	}
	var mediaType, blobID string
	var text sql.NullString
	err = ix.db.QueryRowContext(ctx, `SELECT d.media_type, d.blob_id, t.text FROM documents d LEFT JOIN document_text t ON t.doc_id = d.doc_id
		WHERE d.doc_id = ? AND d.status = ? AND d.sensitivity IN (`+placeholders(len(levels))+`)`, args...).Scan(&mediaType, &blobID, &text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("document text %s: %w", docID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("document text %s: %w", docID, err)
	}
	if !textIsBlob(mediaType) || text.Valid { // kept: not the blob (UTF-16 text is transcoded)
		if !text.Valid {
			return "", fmt.Errorf("document text %s: no kept text for %s (an index from before schema 9: run escurel rebuild)", docID, mediaType)
		}
		return text.String, nil
	}
	data, err := ix.blobs.Get(ctx, blobID)
	if err != nil {
		return "", fmt.Errorf("document text %s: %w", docID, err)
	}
	return string(data), nil
}
