package index

// The document list: what the index holds, one record a document, within a
// clearance (issue 14).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"time"
)

// DocumentInfo describes one document of the index, as ListDocuments
// gives it.
type DocumentInfo struct {
	DocID       string `json:"doc_id"`
	Source      string `json:"source"`
	Title       string `json:"title"`
	MediaType   string `json:"media_type"`
	Sensitivity string `json:"sensitivity"`
	// Status is "ok" or "failed" (its bytes could not be extracted; no
	// blocks); Reason says why it failed, "" when ok.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Blocks int64  `json:"blocks"`
	// Bytes is the size of the raw bytes (the blob); for a file over the
	// size cap, never read, the size it had. 0 for documents ingested
	// before schema 11 until a rebuild or a sync.
	Bytes      int64     `json:"bytes"`
	IngestedAt time.Time `json:"ingested_at"` // UTC
	Extractor  string    `json:"extractor"`   // e.g. "pdf/2"; "" when extraction never ran
	Language   string    `json:"language"`    // BCP 47 tag
	Pages      int       `json:"pages"`       // pages of a paged format (PDF), else 0
	// Meta is the document's metadata (front matter, over which
	// Input.Meta wins key by key), without the built-in fields, as a JSON
	// object; absent when none.
	Meta MetaJSON `json:"meta,omitempty"`
}

// Document statuses for ListOptions.Status and DocumentInfo.Status.
const (
	StatusOK     = statusOK
	StatusFailed = statusFailed
)

// ListOptions select the documents ListDocuments gives. The zero value
// (and nil) lists every document a Public clearance may see.
type ListOptions struct {
	// Clearance is the highest sensitivity listed, as in
	// SearchOptions.Clearance ("" is Public). A document above it is not
	// listed, nor is anything of it (source, title, reason) told; a
	// document whose sensitivity escurel does not know is above every
	// clearance.
	Clearance string
	// SourcePrefix, when not empty, lists only the documents whose source
	// starts with it (a directory: end it with "/").
	SourcePrefix string
	// Status, when not empty, is StatusOK or StatusFailed: only the
	// documents with that status.
	Status string
	// After, when not empty, lists only the documents whose source sorts
	// after it (bytewise): the cursor of a caller that lists a page at a
	// time, the last source of its previous page. Sources are unique.
	After string
	// PageSize is how many documents one query reads; 0 means 500.
	PageSize int

	docID string // Document: this document only
}

func (o *ListOptions) check() error {
	if _, err := allowed(o.Clearance); err != nil {
		return fmt.Errorf("list documents: %w", err)
	}
	if o.Status != "" && o.Status != StatusOK && o.Status != StatusFailed {
		return fmt.Errorf("list documents: status %q: want %s or %s", o.Status, StatusOK, StatusFailed)
	}
	if o.PageSize < 0 {
		return fmt.Errorf("list documents: page size %d: want 0 or more", o.PageSize)
	}
	return nil
}

// ListDocuments iterates over the documents opts selects, by source. It
// reads them a page at a time (one query each, PageSize documents) from
// the generation that was live when the iteration began, which it keeps
// open until the loop ends; a write committed meanwhile may or may not be
// seen, and no document is given twice. An error (bad options, a failed
// read) is yielded once, with a zero DocumentInfo, and ends the
// iteration.
//
//	for d, err := range ix.ListDocuments(ctx, &index.ListOptions{Clearance: index.Internal}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(d.Source, d.Blocks)
//	}
func (ix *Index) ListDocuments(ctx context.Context, opts *ListOptions) iter.Seq2[DocumentInfo, error] {
	return func(yield func(DocumentInfo, error) bool) {
		o := ListOptions{}
		if opts != nil {
			o = *opts
		}
		if err := o.check(); err != nil {
			yield(DocumentInfo{}, err)
			return
		}
		if o.PageSize == 0 {
			o.PageSize = 500
		}
		s, err := ix.acquire()
		if err != nil {
			yield(DocumentInfo{}, err)
			return
		}
		defer s.unref()
		after, first := o.After, o.After == ""
		for {
			page, err := s.documentPage(ctx, &o, after, first)
			if err != nil {
				yield(DocumentInfo{}, err)
				return
			}
			for _, d := range page {
				if !yield(d, nil) {
					return
				}
			}
			if len(page) < o.PageSize || o.docID != "" {
				return // one document's query has no cursor: one page
			}
			after, first = page[len(page)-1].Source, false
		}
	}
}

// Document returns the record of one document, as ListDocuments gives it,
// when clearance may see it; an error wrapping ErrNotFound when there is
// no such document or it lies above clearance, alike.
func (ix *Index) Document(ctx context.Context, docID, clearance string) (DocumentInfo, error) {
	for d, err := range ix.ListDocuments(ctx, &ListOptions{Clearance: clearance, PageSize: 1, docID: docID}) {
		return d, err
	}
	return DocumentInfo{}, fmt.Errorf("document %s: %w", docID, ErrNotFound)
}

// DocumentSensitivity returns the sensitivity of document docID's row in
// the live generation, and whether there is one: a lookup by the doc_id
// key and nothing else (about 0.3 ms at 100k documents, against 1.5-3.3
// for Document). It applies no clearance: it is for an access check that
// decides what the level allows, such as escurel serve's before every
// ingest job; the level is a row's, possibly above its record's
// (derivation may raise it). Errors: ErrClosed, or the query's.
func (ix *Index) DocumentSensitivity(ctx context.Context, docID string) (string, bool, error) {
	s, err := ix.acquire()
	if err != nil {
		return "", false, err
	}
	defer s.unref()
	var level string
	err = s.db.QueryRowContext(ctx, `SELECT sensitivity FROM documents WHERE doc_id = ?`, docID).Scan(&level)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("document %s: %w", docID, err)
	}
	return level, true, nil
}

// where returns the conditions of o (clearance, source prefix, status) and
// their arguments.
func (o *ListOptions) where(withClearance bool) (string, []any) {
	cond, args := "TRUE", []any{}
	if withClearance {
		levels, _ := allowed(o.Clearance) // checked
		cond = `d.sensitivity IN (` + placeholders(len(levels)) + `)`
		for _, l := range levels {
			args = append(args, l)
		}
	}
	if o.SourcePrefix != "" {
		cond += ` AND starts_with(d.source, ?)`
		args = append(args, o.SourcePrefix)
	}
	if o.Status != "" {
		cond += ` AND d.status = ?`
		args = append(args, o.Status)
	}
	return cond, args
}

// documentPage reads the page of documents after the source after (from
// the first when first), within o.
//
// A document's blocks are counted by its row (block_count), and only for
// a row that does not record them (-1: written before schema 13, or
// blocks not numbered consecutively) by its blocks: counting every page's
// blocks scanned the blocks table's doc_id column. One document by id
// (Document) is found through the doc_id key alone, its clearance then
// checked on the row found: a filter on another column beside the key
// made DuckDB scan every document instead: at 100k documents a Document
// took 14-22 ms, now 1.5-3.3 (escurel serve pays it twice in the access
// checks of every ingest).
func (ix *state) documentPage(ctx context.Context, o *ListOptions, after string, first bool) ([]DocumentInfo, error) {
	query, args := documentQuery(o, after, first)
	rows, err := ix.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	defer rows.Close()
	var out []DocumentInfo
	for rows.Next() {
		var d DocumentInfo
		var pages, recorded int32
		var counted int64
		var meta, given string
		if err := rows.Scan(&d.DocID, &d.Source, &d.Title, &d.MediaType, &d.Sensitivity, &d.Status, &d.Reason, &d.Bytes, &d.IngestedAt,
			&d.Extractor, &d.Language, &pages, &meta, &given, &recorded, &counted); err != nil {
			return nil, fmt.Errorf("list documents: %w", err)
		}
		d.Blocks = int64(recorded)
		if recorded < 0 {
			d.Blocks = counted
			if o.docID != "" {
				if err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM blocks WHERE doc_id = ?`, d.DocID).Scan(&d.Blocks); err != nil {
					return nil, fmt.Errorf("list documents: %w", err)
				}
			}
		}
		m, err := storedMeta(meta, given)
		if err != nil {
			return nil, fmt.Errorf("list documents: %s: %w", d.Source, err)
		}
		if m != nil {
			d.Meta = MetaJSON(metaJSON(m))
		}
		d.Pages = int(pages)
		d.IngestedAt = d.IngestedAt.UTC()
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	return out, nil
}

// documentQuery is documentPage's query: its columns are the documents
// row's, block_count, then the blocks counted (for a page, where
// block_count is -1; -1 for one document, counted apart).
func documentQuery(o *ListOptions, after string, first bool) (string, []any) {
	const cols = `d.doc_id, d.source, d.title, d.media_type, d.sensitivity, d.status, d.reason, d.bytes, d.ingested_at,
				d.extractor, d.language, d.pages, d.meta, d.meta_given, d.block_count`
	cond, args := o.where(true)
	if o.docID != "" {
		// The key is the CTE's, MATERIALIZED: the clearance is not pushed
		// into the key lookup.
		return `WITH one AS MATERIALIZED (SELECT ` + cols + ` FROM documents d WHERE d.doc_id = ?)
			SELECT d.*, -1 FROM one d WHERE ` + cond, append([]any{o.docID}, args...)
	}
	if !first {
		cond += ` AND d.source > ?`
		args = append(args, after)
	}
	return `WITH page AS (SELECT ` + cols + ` FROM documents d WHERE ` + cond + ` ORDER BY d.source LIMIT ?)
			SELECT p.*, coalesce(n.blocks, 0) FROM page p
			LEFT JOIN (SELECT b.doc_id, count(*) AS blocks FROM blocks b
				WHERE b.doc_id IN (SELECT doc_id FROM page WHERE block_count < 0) GROUP BY b.doc_id) n
				ON n.doc_id = p.doc_id
			ORDER BY p.source`, append(args, o.PageSize)
}

// DocumentsWithheld counts the documents of the status opts selects that
// are above opts.Clearance: those ListDocuments does not list. The count
// ignores opts.SourcePrefix, so that counting by prefix cannot tell a
// caller which sources exist above its clearance; it is what Stats and
// Failed already tell (documents in all, failed ones per sensitivity).
func (ix *Index) DocumentsWithheld(ctx context.Context, opts *ListOptions) (int64, error) {
	o := ListOptions{}
	if opts != nil {
		o = *opts
	}
	if err := o.check(); err != nil {
		return 0, err
	}
	o.SourcePrefix = ""
	s, err := ix.acquire()
	if err != nil {
		return 0, err
	}
	defer s.unref()
	levels, _ := allowed(o.Clearance)
	cond, args := o.where(false)
	cond += ` AND d.sensitivity NOT IN (` + placeholders(len(levels)) + `)`
	for _, l := range levels {
		args = append(args, l)
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM documents d WHERE `+cond, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count withheld documents: %w", err)
	}
	return n, nil
}
