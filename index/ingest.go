package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/extract"
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
	// Data is the raw content, stored as a blob unchanged.
	Data []byte
	// Language and Sensitivity apply when the document's front matter does
	// not set them. When neither sets them, a document already in the index
	// keeps its language and sensitivity (so re-ingesting a restricted
	// document without the flag never makes it public), and a new one gets
	// DefaultLanguage and Public.
	Language    string
	Sensitivity string
	// IngestedAt, when not zero, is recorded instead of the current time
	// (rebuild passes the record's time, so rebuilt rows equal ingested ones).
	IngestedAt time.Time
}

// Status says what Ingest did with a document.
type Status string

// Statuses of an ingested document.
const (
	Added     Status = "added"     // a new document
	Replaced  Status = "replaced"  // a changed document: its old blocks are gone
	Unchanged Status = "unchanged" // same bytes and settings: nothing written
)

// Result is the outcome of ingesting one document.
type Result struct {
	DocID  string
	Source string
	Title  string
	Status Status
	Blocks int // blocks the document has now
}

// DocumentError is a problem with one input document (unsupported type,
// empty, binary, invalid UTF-8, bad front matter or metadata). Nothing of the
// document was stored. Err wraps an extract error where there is one.
type DocumentError struct {
	Source string
	Err    error
}

func (e *DocumentError) Error() string { return e.Source + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *DocumentError) Unwrap() error { return e.Err }

// block is a derived block, ready to write.
type block struct {
	chunk.Block
	body, context string
	terms         map[string]int32 // term → occurrences in embedText(context, body)
	length        int32            // terms in embedText(context, body), repeats counted
	vector        []float32        // nil without an embedder
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
	if err == nil {
		err = errs[0]
	}
	return res[0], err
}

// pending is a derived document waiting for its transaction.
type pending struct {
	rec    *blobstore.Record
	blocks []block
	exists bool // the index has rows of the document to delete first
	// defaultLang and defaultSens say that neither the input nor the front
	// matter set the language or sensitivity: an existing document's values
	// win over the defaults.
	defaultLang, defaultSens bool
}

// IngestBatch ingests ins as Ingest does, with one transaction for all of
// them, which is much faster than one each. res[i] and errs[i] are the
// outcome of ins[i]: errs[i] is a *DocumentError or nil. err is a storage
// error, after which none of the batch's rows were written (blobs and
// records stored before it stay: they are the source of truth, and a later
// ingest or rebuild derives from them). A source given twice is ingested as
// its last version.
func (ix *Index) IngestBatch(ctx context.Context, ins []Input) (res []Result, errs []error, err error) {
	res, errs = make([]Result, len(ins)), make([]error, len(ins))
	derived := make([]pending, len(ins))
	for i, in := range ins {
		res[i] = Result{DocID: blobstore.DocID(in.Source), Source: in.Source}
		p, err := ix.derive(ctx, in)
		if err != nil {
			var de *DocumentError
			if !errors.As(err, &de) {
				return res, errs, err
			}
			errs[i] = err
			continue
		}
		res[i].Title, res[i].Blocks = p.rec.Title, len(p.blocks)
		derived[i] = p
	}

	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	var writes []pending
	slot := map[string]int{} // doc id → index in writes
	for i, p := range derived {
		if p.rec == nil {
			continue
		}
		old, err := ix.currentRecord(ctx, p.rec.DocID)
		if err != nil {
			return res, errs, err
		}
		res[i].Status = Added
		if j, ok := slot[p.rec.DocID]; ok {
			old, p.exists = writes[j].rec, writes[j].exists
		} else if old != nil {
			p.exists = true
		}
		if old != nil && p.defaultSens {
			p.rec.Sensitivity = old.Sensitivity
		}
		if old != nil && p.defaultLang {
			p.rec.Language = old.Language
		}
		if old != nil {
			if sameDocument(old, p.rec) {
				res[i].Status = Unchanged
				// The rows are current; make sure the blob store still
				// holds what they derive from.
				if err := ix.ensureStored(ctx, ins[i].Data, old); err != nil {
					return res, errs, err
				}
				continue
			}
			res[i].Status = Replaced
		}
		// Source of truth first: blob and record are durable before the
		// transaction that derives from them commits.
		if _, err := ix.blobs.Put(ctx, ins[i].Data); err != nil {
			return res, errs, fmt.Errorf("ingest %s: %w", p.rec.Source, err)
		}
		if err := ix.blobs.PutRecord(ctx, p.rec); err != nil {
			return res, errs, fmt.Errorf("ingest %s: %w", p.rec.Source, err)
		}
		if j, ok := slot[p.rec.DocID]; ok {
			writes[j] = p
		} else {
			slot[p.rec.DocID] = len(writes)
			writes = append(writes, p)
		}
	}
	if len(writes) == 0 {
		return res, errs, nil
	}
	if err := ix.write(ctx, writes); err != nil {
		return res, errs, fmt.Errorf("ingest: %w", err)
	}
	return res, errs, nil
}

// ensureStored puts the blob and record of an unchanged document back if the
// blob store lost them.
func (ix *Index) ensureStored(ctx context.Context, data []byte, rec *blobstore.Record) error {
	if _, err := ix.blobs.Put(ctx, data); err != nil {
		return fmt.Errorf("ingest %s: %w", rec.Source, err)
	}
	got, err := ix.blobs.GetRecord(ctx, rec.DocID)
	if err == nil && sameDocument(got, rec) && got.IngestedAt.Equal(rec.IngestedAt) {
		return nil
	}
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("ingest %s: %w", rec.Source, err)
	}
	if err := ix.blobs.PutRecord(ctx, rec); err != nil {
		return fmt.Errorf("ingest %s: %w", rec.Source, err)
	}
	return nil
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

// derive extracts, chunks, contextualizes, analyzes and embeds in, touching
// no storage.
func (ix *Index) derive(ctx context.Context, in Input) (pending, error) {
	bad := func(err error) (pending, error) {
		return pending{}, &DocumentError{Source: in.Source, Err: err}
	}
	if in.Source == "" {
		return bad(errors.New("empty source"))
	}
	name := in.Name
	if name == "" {
		name = path.Base(strings.ReplaceAll(in.Source, "\\", "/"))
	}
	mediaType := in.MediaType
	if mediaType == "" {
		mt, err := extract.MediaType(name)
		if err != nil {
			return bad(err)
		}
		mediaType = mt
	}
	doc, err := extract.Extract(mediaType, name, in.Data)
	if err != nil {
		return bad(err)
	}
	lang := firstNonEmpty(doc.Language, in.Language, DefaultLanguage)
	if err := CheckLanguage(lang); err != nil {
		return bad(err)
	}
	sens := firstNonEmpty(doc.Sensitivity, in.Sensitivity, Public)
	if err := CheckSensitivity(sens); err != nil {
		return bad(err)
	}
	at := in.IngestedAt
	if at.IsZero() {
		at = ix.now()
	}
	rec := &blobstore.Record{
		DocID: blobstore.DocID(in.Source), Source: in.Source, MediaType: mediaType, Title: doc.Title,
		Sensitivity: sens, BlobID: blobstore.BlobID(in.Data), Language: lang,
		IngestedAt: at.UTC().Truncate(time.Microsecond),
	}

	spans := chunk.Split(doc, ix.chunker.MaxBytes)
	blocks := make([]block, len(spans))
	texts := make([]string, len(spans))
	var terms []string
	for i, sp := range spans {
		b := block{Block: sp, body: doc.Text[sp.Start:sp.End]}
		if ix.context == ContextStructural {
			b.context = chunk.Context(doc.Title, sp.HeadingPath, sp.Page)
		}
		texts[i] = embedText(b.context, b.body)
		terms = ix.analyzer.Terms(terms[:0], texts[i], lang)
		b.length = int32(len(terms))
		b.terms = make(map[string]int32, len(terms))
		for _, t := range terms {
			b.terms[t]++
		}
		blocks[i] = b
	}
	if ix.embedder != nil && len(texts) > 0 {
		vecs, err := ix.embedder.Embed(ctx, texts)
		if err != nil {
			return pending{}, fmt.Errorf("ingest %s: embed: %w", in.Source, err)
		}
		for i := range blocks {
			blocks[i].vector = vecs[i]
		}
	}
	return pending{rec: rec, blocks: blocks,
		defaultLang: doc.Language == "" && in.Language == "", defaultSens: doc.Sensitivity == "" && in.Sensitivity == ""}, nil
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

func (ix *Index) currentRecord(ctx context.Context, docID string) (*blobstore.Record, error) {
	var r blobstore.Record
	err := ix.db.QueryRowContext(ctx, `SELECT doc_id, source, media_type, title, sensitivity, blob_id, language, ingested_at
		FROM documents WHERE doc_id = ?`, docID).Scan(
		&r.DocID, &r.Source, &r.MediaType, &r.Title, &r.Sensitivity, &r.BlobID, &r.Language, &r.IngestedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read document %s: %w", docID, err)
	}
	r.IngestedAt = r.IngestedAt.UTC()
	return &r, nil
}

// write replaces the rows of each document in docs with its blocks, all in
// one transaction.
func (ix *Index) write(ctx context.Context, docs []pending) error {
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	n := 0
	for _, d := range docs {
		n += len(d.blocks)
		if d.exists {
			for _, q := range []string{
				`DELETE FROM postings WHERE block_id IN (SELECT block_id FROM blocks WHERE doc_id = $1)`,
				`DELETE FROM block_stats WHERE block_id IN (SELECT block_id FROM blocks WHERE doc_id = $1)`,
				`DELETE FROM embeddings WHERE block_id IN (SELECT block_id FROM blocks WHERE doc_id = $1)`,
				`DELETE FROM blocks WHERE doc_id = $1`,
				`DELETE FROM documents WHERE doc_id = $1`,
			} {
				if _, err := tx.ExecContext(ctx, q, d.rec.DocID); err != nil {
					return fmt.Errorf("delete %s: %w", d.rec.Source, err)
				}
			}
		}
		r := d.rec
		if _, err := tx.ExecContext(ctx, `INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			r.DocID, r.Source, r.MediaType, r.Title, r.Sensitivity, r.BlobID, r.Language, r.IngestedAt); err != nil {
			return fmt.Errorf("insert document %s: %w", r.Source, err)
		}
	}
	if n == 0 {
		return tx.Commit()
	}
	ids, err := nextBlockIDs(ctx, tx, n)
	if err != nil {
		return err
	}
	docIDs, ords, bodies, contexts := make([]string, 0, n), make([]int32, 0, n), make([]string, 0, n), make([]string, 0, n)
	starts, ends, pages := make([]int64, 0, n), make([]int64, 0, n), make([]int32, 0, n)
	paths, lengths, vecs := make([]string, 0, n), make([]int32, 0, n), make([][]float32, 0, n)
	var pTerms []string
	var pIDs []int64
	var pTFs []int32
	i := 0
	for _, d := range docs {
		for ord, b := range d.blocks {
			docIDs, ords, bodies, contexts = append(docIDs, d.rec.DocID), append(ords, int32(ord)), append(bodies, b.body), append(contexts, b.context)
			starts, ends, pages = append(starts, int64(b.Start)), append(ends, int64(b.End)), append(pages, int32(b.Page))
			paths, lengths, vecs = append(paths, headingJSON(b.HeadingPath)), append(lengths, b.length), append(vecs, b.vector)
			terms := make([]string, 0, len(b.terms))
			for t := range b.terms {
				terms = append(terms, t)
			}
			sort.Strings(terms)
			for _, t := range terms {
				pTerms, pIDs, pTFs = append(pTerms, t), append(pIDs, ids[i]), append(pTFs, b.terms[t])
			}
			i++
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO blocks (block_id, doc_id, ord, body, byte_start, byte_end, context, heading_path, page)
		SELECT unnest(?::BIGINT[]), unnest(?::VARCHAR[]), unnest(?::INTEGER[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]),
		       unnest(?::BIGINT[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::INTEGER[])`,
		ids, docIDs, ords, bodies, starts, ends, contexts, paths, pages); err != nil {
		return fmt.Errorf("insert blocks: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO block_stats SELECT unnest(?::BIGINT[]), unnest(?::INTEGER[])`, ids, lengths); err != nil {
		return fmt.Errorf("insert block stats: %w", err)
	}
	if len(pTerms) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO postings SELECT unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::INTEGER[])`,
			pTerms, pIDs, pTFs); err != nil {
			return fmt.Errorf("insert postings: %w", err)
		}
	}
	if ix.embedder != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO embeddings SELECT ?, unnest(?::BIGINT[]), unnest(?::FLOAT[][])`,
			ix.embedSet, ids, vecs); err != nil {
			return fmt.Errorf("insert embeddings: %w", err)
		}
	}
	return tx.Commit()
}

// headingJSON encodes a heading path as stored in blocks.heading_path: a JSON
// array of strings, "[]" when empty.
func headingJSON(path []string) string {
	if len(path) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(path) // []string always marshals
	return string(b)
}

// nextBlockIDs reserves n block ids from the block_ids sequence, ascending.
func nextBlockIDs(ctx context.Context, tx *sql.Tx, n int) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT nextval('block_ids') FROM range(?)`, n)
	if err != nil {
		return nil, fmt.Errorf("reserve block ids: %w", err)
	}
	defer rows.Close()
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}
