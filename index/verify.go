package index

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index/fts"
)

// Verification is what Verify found: a digest of every derived row and the
// coverage checks between the rows and the blob store.
type Verification struct {
	// Digest is the SHA-256 (hex) of the derived rows in a canonical form
	// and order: the manifest's settings (embedder identity, chunker,
	// analyzer, contextualize; not its times), the documents by doc id
	// (with status, reason, extractor and pages), the kept text of HTML,
	// DOCX and PDF documents by doc id,
	// the blocks by (doc id, position) with their public ids (Hit.BlockID),
	// windows, full-text lengths and level, the postings by (term, doc id,
	// position), and the vectors by (doc id, position). Within the digest
	// blocks are named by document and position, never by the internal
	// numbers the full-text index and the vectors use, which come from a
	// sequence and differ between an ingest and a rebuild of the same
	// documents. Two indexes with the same digest answer every query alike
	// and give every block the same id.
	Digest     string `json:"digest"`
	Generation string `json:"generation"`
	Documents  int64  `json:"documents"`
	Blocks     int64  `json:"blocks"`
	Postings   int64  `json:"postings"`
	Vectors    int64  `json:"vectors"`
	// Failed counts the documents whose bytes failed extraction: they have
	// a row and a reason, no blocks. Not drift.
	Failed int64 `json:"failed"`

	// Coverage. Each list holds sources or ids, sorted; all empty when the
	// index derives exactly from the blob store.
	RecordsWithoutRows    []string `json:"records_without_rows"`    // records the index lacks
	RowsWithoutRecords    []string `json:"rows_without_records"`    // documents whose record is gone or differs
	BlocksWithoutPostings []string `json:"blocks_without_postings"` // block ids (Hit.BlockID) without a full-text entry
	BlocksWithoutVectors  []string `json:"blocks_without_vectors"`  // block ids without a vector in the active embedding set, or whose vector is not dim float32s (not counted in Vectors)
	// RecordsWithoutBlobs are records whose bytes the blob store lacks:
	// the index may serve them, but no rebuild can (not checked with
	// VerifyOptions.SkipOrphans).
	RecordsWithoutBlobs []string `json:"records_without_blobs"`
	// DuplicatePostings counts (term, block) pairs posted more than once
	// among live blocks: a full-text index that would count a term twice.
	DuplicatePostings int `json:"duplicate_postings"`
	// OrphanBlobs are blobs no record names: the old bytes of a replaced
	// or deleted document, kept because content-addressed blobs may be
	// shared. They are garbage, not drift, and do not fail OK.
	OrphanBlobs []string `json:"orphan_blobs"`
	// DamagedBlobs are stored blobs whose bytes no longer hash to their
	// id, by source (checked with VerifyOptions.Deep only).
	DamagedBlobs []DamagedBlob `json:"damaged_blobs,omitempty"`
	// DamagedRecords are records of the blob store that cannot be read
	// (empty, truncated, not JSON, a source or sensitivity that is not
	// theirs), by key, each with its source when the damaged bytes or the
	// document's row name it. Their rows are not in RowsWithoutRecords.
	// Repair: escurel rebuild restores each from the live row (or
	// escurel ingest SOURCE, or escurel delete DOC_ID).
	DamagedRecords []blobstore.DamagedRecord `json:"damaged_records,omitempty"`
}

// OK reports whether the rows derive exactly from the blob store: every
// record has its document, every document its record, every block its
// postings and (with an embedder) its vector.
func (v *Verification) OK() bool {
	return len(v.RecordsWithoutRows)+len(v.RowsWithoutRecords)+len(v.BlocksWithoutPostings)+
		len(v.BlocksWithoutVectors)+len(v.RecordsWithoutBlobs)+v.DuplicatePostings+len(v.DamagedBlobs)+len(v.DamagedRecords) == 0
}

// digester writes length-prefixed fields into a hash, so that no two row
// sequences serialize alike. The fields go through a buffer (w, in front
// of h): at 1M passages a verify writes about 400M of them, most a varint
// of a byte or two, and each write to the hash, and each string copied to
// pass it as a []byte, cost more than the hashing. The bytes hashed are
// the same.
type digester struct {
	h hash.Hash
	w *bufio.Writer
}

func newDigester() digester {
	h := sha256.New()
	return digester{h, bufio.NewWriterSize(h, 64<<10)}
}

func (d digester) str(s string) {
	d.w.Write(binary.AppendUvarint(d.w.AvailableBuffer(), uint64(len(s))))
	d.w.WriteString(s)
}

func (d digester) int(v int64) {
	d.w.Write(binary.AppendVarint(d.w.AvailableBuffer(), v))
}

// sum is the digest of every field written.
func (d digester) sum() []byte {
	d.w.Flush() // a hash's Write never fails
	return d.h.Sum(nil)
}

// VerifyOptions configure Verify. The zero value reads the records from
// the blob store and lists its blobs.
type VerifyOptions struct {
	// Records, when not nil, are the blob store's records as the caller
	// has just read them (a rebuild holding the lock), instead of reading
	// them again.
	Records []*blobstore.Record
	// damaged are the damaged records of the scan that read Records,
	// and blobIDs the blobs listed with it (blobsListed), for verifyAt,
	// which reads both under writeMu and verifies after.
	damaged     []blobstore.DamagedRecord
	blobIDs     []string
	blobsListed bool
	// SkipOrphans leaves out the listing of blobs for OrphanBlobs.
	SkipOrphans bool
	// Deep reads every blob a record names and checks that its bytes hash
	// to its id (DamagedBlobs): a read of the whole blob store.
	Deep bool
}

// Verify computes the digest of the index's derived rows and checks them
// against the blob store, from one snapshot: the rows, records and blobs
// as they were at one moment with writes held back. Writes go on while it
// reads the rows (verifyAt), except with opts.Records (the caller's read
// of the records, which it holds the lock for) or opts.Deep (the blobs
// read must still be there): those hold writes back while they run. A
// failed check is reported in the result, not as an error; the error is
// for a failure to read.
func (ix *Index) Verify(ctx context.Context, opts *VerifyOptions) (*Verification, error) {
	if opts == nil {
		opts = &VerifyOptions{}
	}
	if opts.Records != nil || opts.Deep {
		return ix.verifyHeld(ctx, opts, nil)
	}
	return ix.verifyAt(ctx, opts, nil)
}

// verify is Index.Verify on one generation, run once more after DuckDB
// ran out of memory and the automatic limit was raised (outOfMemory):
// every verify (Index.Verify, a rollback's, a snapshot's for publish, a
// replica's digest) reads in bounded ranges, but the pool also holds what
// the ART indexes and the writes before it left.
func (s *state) verify(ctx context.Context, opts *VerifyOptions) (*Verification, error) {
	v, err := s.verifyRows(ctx, opts)
	if s.outOfMemory(ctx, "verify", err) {
		v, err = s.verifyRows(ctx, opts)
	}
	return v, err
}

// sortedByDocID returns recs if they are in doc id order (as
// ScanRecords returns them), else a sorted copy.
func sortedByDocID(recs []*blobstore.Record) []*blobstore.Record {
	byDocID := func(a, b *blobstore.Record) int { return strings.Compare(a.DocID, b.DocID) }
	if slices.IsSortedFunc(recs, byDocID) {
		return recs
	}
	recs = slices.Clone(recs)
	slices.SortFunc(recs, byDocID)
	return recs
}

// recordWalk matches rows, in doc id order, to records sorted by doc id.
type recordWalk struct {
	recs    []*blobstore.Record
	next    int      // recs[next:] are not matched or passed yet
	last    string   // the doc id of the row before
	rows    int      // rows matched
	without []string // the sources of the records passed without a row
}

// match returns the record of the row whose doc id is id (nil: none),
// after the record of every row before it; the records passed on the
// way have no row. A row whose doc id is not above the one before is
// an error: the walk would report records it passed as without rows.
func (w *recordWalk) match(id string) (*blobstore.Record, error) {
	if w.rows > 0 && id <= w.last {
		return nil, fmt.Errorf("documents row %q read after %q: repeated or out of doc id order", id, w.last)
	}
	w.last = id
	w.rows++
	for w.next < len(w.recs) && w.recs[w.next].DocID < id {
		w.without = append(w.without, w.recs[w.next].Source)
		w.next++
	}
	if w.next < len(w.recs) && w.recs[w.next].DocID == id {
		w.next++
		return w.recs[w.next-1], nil
	}
	return nil, nil
}

// rest returns the sources of the records without a row: those passed,
// then those after the last row.
func (w *recordWalk) rest() []string {
	for _, r := range w.recs[w.next:] {
		w.without = append(w.without, r.Source)
	}
	w.next = len(w.recs)
	return w.without
}

// verifyRows is verify, once.
func (ix *state) verifyRows(ctx context.Context, opts *VerifyOptions) (*Verification, error) {
	m := *ix.manifest.Load()
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return ix.verifyIn(ctx, tx, m, ix.fts, opts)
}

// verifyIn is verifyRows on the rows tx sees, with the generation's
// manifest m and the full-text index fx of those rows (the live one, when
// no write can commit meanwhile; else one loaded within tx,
// see Index.verifyAt).
func (ix *state) verifyIn(ctx context.Context, tx *sql.Tx, m Manifest, fx *fts.Index, opts *VerifyOptions) (*Verification, error) {
	if opts == nil {
		opts = &VerifyOptions{}
	}
	v := &Verification{Generation: ix.gen}
	d := newDigester()
	d.str("manifest")
	d.str(m.Embedder().Identity().String())
	d.str(m.Chunker)
	d.str(m.Analyzer)
	d.str(m.Contextualize)
	d.int(int64(m.SchemaVersion))

	fail := func(what string, err error) (*Verification, error) {
		return nil, fmt.Errorf("verify %s: %s: %w", ix.path, what, err)
	}

	// Documents, against the records.
	var err error
	recs := opts.Records
	if recs == nil {
		if recs, v.DamagedRecords, err = ix.blobs.ScanRecords(ctx); err != nil {
			return fail("records", err)
		}
	} else {
		v.DamagedRecords = slices.Clone(opts.damaged)
	}
	damagedAt := map[string]int{}
	for i, r := range v.DamagedRecords {
		damagedAt[r.DocID] = i
	}
	// What a row must agree on with its record. A title the caller did
	// not give is derived (the extractor's), like the rest of the row,
	// and may change with the extractor: a rebuild that reads a PDF that
	// failed before gets its title.
	key := func(src, mt, title string, given bool, blobID, sens, lang, stamp, failure, meta string) string {
		if !given {
			title = ""
		}
		return strings.Join([]string{src, mt, title, blobID, sens, lang, stamp, failure, meta}, "\x00")
	}
	// The documents rows come in doc id order (eachInDocOrder), as the
	// records do (ScanRecords; a caller's are sorted here if they are
	// not): the rows are matched to the records by walking both, with no
	// map of the records (at 1M documents, maps of their keys held 390 MB
	// of the verify's peak; the orphan blobs' check below still keys a
	// map by blob id).
	recs = sortedByDocID(recs)
	walk := recordWalk{recs: recs}
	// Each table is read in the order of one sorted read, in one scan
	// and bounded memory (eachInDocOrder).
	chunk, spill := ix.readChunk(ctx), filepath.Dir(ix.path)
	d.str("documents")
	err = eachInDocOrder(ctx, tx, spill, chunk, docOrderRead{table: "documents", rowid: "rowid", doc: "doc_id", docCol: 0, ordCol: -1,
		size: `SELECT coalesce(sum(strlen(source) + strlen(title) + strlen(reason) + strlen(meta) + strlen(meta_given) + 160), 0)::BIGINT FROM documents`,
		query: `SELECT doc_id, source, media_type, title, title_from, sensitivity, blob_id, language, ingested_at,
		status, reason, extractor, pages, meta, meta_given
		FROM documents WHERE %[1]s`}, func(scan func(...any) error) error {
		var id, src, mt, title, from, sens, blobID, lang, status, reason, extractor, meta, given string
		var at time.Time
		var pages int64
		if err := scan(&id, &src, &mt, &title, &from, &sens, &blobID, &lang, &at, &status, &reason, &extractor, &pages, &meta, &given); err != nil {
			return err
		}
		stamp := at.UTC().Format(time.RFC3339Nano)
		for _, f := range []string{id, src, mt, title, from, sens, blobID, lang, stamp, status, reason, extractor, meta, given} {
			d.str(f)
		}
		d.int(pages)
		r, err := walk.match(id)
		if err != nil {
			return err
		}
		v.Documents++
		if status == statusFailed {
			v.Failed++
		}
		failure := ""
		if blobID == "" {
			failure = reason
		}
		// A row as restricted as its record, or more: derivation may only
		// raise a level (a sensitivity the document declares but escurel
		// cannot read fails closed, whatever the record says); a row below
		// its record's level is drift, and would leak.
		if i, ok := damagedAt[id]; ok {
			if v.DamagedRecords[i].Source == "" && blobstore.DocID(src) == id {
				v.DamagedRecords[i].Source = src
			}
			return nil
		}
		if r == nil || key(r.Source, r.MediaType, r.Title, r.TitleGiven, r.BlobID, "", r.Language, r.IngestedAt.UTC().Format(time.RFC3339Nano), r.Error, givenJSON(r.Meta)) !=
			key(src, mt, title, from == titleFromInput, blobID, "", lang, stamp, failure, given) || level(sens) < level(r.Sensitivity) {
			v.RowsWithoutRecords = append(v.RowsWithoutRecords, src)
		}
		return nil
	})
	if err != nil {
		return fail("documents", err)
	}
	v.RecordsWithoutRows = walk.rest()
	sort.Strings(v.RecordsWithoutRows)
	sort.Strings(v.RowsWithoutRecords)
	if !opts.SkipOrphans {
		ids := opts.blobIDs
		if !opts.blobsListed {
			if ids, err = ix.blobs.BlobIDs(ctx); err != nil {
				return fail("blobs", err)
			}
		}
		referenced := make(map[string]bool, len(recs))
		for _, r := range recs {
			referenced[r.BlobID] = true
		}
		have := make(map[string]bool, len(ids))
		for _, id := range ids {
			have[id] = true
			if !referenced[id] {
				v.OrphanBlobs = append(v.OrphanBlobs, id)
			}
		}
		for _, r := range recs {
			if r.BlobID != "" && !have[r.BlobID] {
				v.RecordsWithoutBlobs = append(v.RecordsWithoutBlobs, r.Source)
			}
		}
		sort.Strings(v.RecordsWithoutBlobs)
	}
	if opts.Deep {
		if v.DamagedBlobs, err = damagedBlobs(ctx, ix.blobs, recs); err != nil {
			return fail("blobs", err)
		}
	}

	// The kept text of HTML, DOCX and PDF documents.
	d.str("document_text")
	err = eachInDocOrder(ctx, tx, spill, chunk, docOrderRead{table: "document_text", rowid: "rowid", doc: "doc_id", docCol: 0, ordCol: -1,
		size:  `SELECT coalesce(sum(strlen(text) + 48), 0)::BIGINT FROM document_text`,
		query: `SELECT doc_id, text FROM document_text WHERE %[1]s`}, func(scan func(...any) error) error {
		var id, text string
		if err := scan(&id, &text); err != nil {
			return err
		}
		d.str(id)
		d.str(text)
		return nil
	})
	if err != nil {
		return fail("document text", err)
	}

	// Blocks, with their full-text lengths and level. A block's position
	// in this canonical order (doc id, ord) names it below.
	posOf := []int32{} // by block id; -1: no row
	blocks := int32(0)
	// The full-text lengths, read apart from the blocks: joined to each
	// chunk of blocks, fts_blocks was scanned whole and hashed with the
	// blocks' text, five times the cost of the chunk's own scan.
	lens, err := readFTSLengths(ctx, tx, chunk)
	if err != nil {
		return fail("blocks", err)
	}
	d.str("blocks")
	err = eachInDocOrder(ctx, tx, spill, chunk, docOrderRead{table: "blocks", rowid: "rowid", doc: "doc_id", docCol: 2, ordCol: 3,
		size: `SELECT coalesce(sum(strlen(public_id) + strlen(body) + strlen(context) + strlen(heading_path) + strlen(parent_id)
		+ strlen(heading) + strlen(window_text) + strlen(parent_locator) + 128), 0)::BIGINT FROM blocks`,
		query: `SELECT block_id, public_id, doc_id, ord, body, byte_start, byte_end, context,
		heading_path, page, parent_id, heading, window_text, parent_locator FROM blocks WHERE %[1]s`}, func(scan func(...any) error) error {
		var id, start, end int64
		var pub, doc, body, context, path, parent, heading, window, locator string
		var ord, page int32
		if err := scan(&id, &pub, &doc, &ord, &body, &start, &end, &context, &path, &page, &parent, &heading, &window, &locator); err != nil {
			return err
		}
		// One row per row of fts_blocks, as a LEFT JOIN gives: one
		// when the block has none.
		fl := lens.of(id)
		for i := 0; i == 0 || i < len(fl); i++ {
			for int64(len(posOf)) <= id {
				posOf = append(posOf, -1)
			}
			posOf[id] = blocks
			blocks++
			d.str(doc)
			d.int(int64(ord))
			d.str(pub)
			d.str(body)
			d.int(start)
			d.int(end)
			d.str(context)
			d.str(path)
			d.int(int64(page))
			for _, f := range []string{parent, heading, window, locator} {
				d.str(f)
			}
			if len(fl) == 0 {
				v.BlocksWithoutPostings = append(v.BlocksWithoutPostings, pub)
				d.str("-")
			} else {
				d.int(int64(fl[i].body))
				d.int(int64(fl[i].context))
				d.int(int64(fl[i].level))
			}
			v.Blocks++
		}
		return nil
	})
	if err != nil {
		return fail("blocks", err)
	}

	// Postings, as (term, block position) → frequencies, sorted by term
	// text (term ids depend on the order documents arrived) and position.
	pr := postingRuns{blocks: blocks}
	var terms []string
	err = fx.View(func() error {
		rank := map[string]int32{}
		lastTerm, lastRank := "", int32(-1)
		err := fx.ForEachPosting(ctx, tx, func(term string, p fts.Posting) error {
			if p.Block < 0 || p.Block >= int64(len(posOf)) || posOf[p.Block] < 0 {
				return fmt.Errorf("a posting of term %q names a block that has no row: the full-text index is damaged; run escurel rebuild", term)
			}
			if term != lastTerm || lastRank < 0 {
				if err := pr.flush(lastRank); err != nil {
					return err
				}
				r, ok := rank[term]
				if !ok {
					r = int32(len(terms))
					rank[term] = r
					terms = append(terms, term)
				}
				lastTerm, lastRank = term, r
			}
			pr.cur = append(pr.cur, posting{posOf[p.Block], p.TF})
			return nil
		})
		if err != nil {
			return err
		}
		return pr.flush(lastRank)
	})
	if err != nil {
		return fail("postings", err)
	}
	d.str("postings")
	dups, err := pr.digest(d, terms)
	if err != nil {
		return fail("postings", err)
	}
	v.DuplicatePostings += dups
	v.Postings = pr.n

	// Vectors of the active embedding set.
	d.str("vectors")
	if ix.vec != nil {
		d.str(ix.vec.spec.Identity().String())
		err = eachInDocOrder(ctx, tx, spill, chunk, docOrderRead{table: "blocks", rowid: "b.rowid", doc: "b.doc_id", docCol: 2, ordCol: 3,
			size: fmt.Sprintf(`SELECT count(*)::BIGINT * %d FROM blocks`, 4*ix.vec.spec.Dim+64),
			query: `SELECT b.public_id, v.vector, b.doc_id, b.ord FROM blocks b
			LEFT JOIN ` + ix.vec.table + ` v ON v.block_id = b.block_id WHERE %[1]s`}, func(scan func(...any) error) error {
			var id string
			var vec sql.RawBytes // float32 little-endian (vectorValue), as digested
			var doc string
			var ord int64
			if err := scan(&id, &vec, &doc, &ord); err != nil {
				return err
			}
			if vec == nil {
				v.BlocksWithoutVectors = append(v.BlocksWithoutVectors, id)
				d.str("-")
				return nil
			}
			d.str(string(vec))
			if len(vec) != 4*ix.vec.spec.Dim {
				// Damaged, or written for another dimension: no
				// vector a search could use.
				v.BlocksWithoutVectors = append(v.BlocksWithoutVectors, id)
				return nil
			}
			v.Vectors++
			return nil
		})
		if err != nil {
			return fail("vectors", err)
		}
	}
	v.Digest = hex.EncodeToString(d.sum())
	return v, nil
}

// ftsLength is a row of fts_blocks: a block's full-text lengths and level.
type ftsLength struct {
	body, context int32
	level         int8
}

// ftsLengths are the rows of fts_blocks by block id: one[id] when the
// block has exactly one (has[id]), more[id] when it has more (a damaged
// full-text index; a join gives each).
type ftsLengths struct {
	one  []ftsLength
	has  []bool
	more map[int64][]ftsLength
}

// of is the rows of block id, in the order read.
func (l *ftsLengths) of(id int64) []ftsLength {
	if m, ok := l.more[id]; ok {
		return m
	}
	if id >= 0 && id < int64(len(l.has)) && l.has[id] {
		return l.one[id : id+1]
	}
	return nil
}

// readFTSLengths reads fts_blocks for the blocks' ids (0 to the highest
// block id; others name no block), in chunks of rowids of about chunk
// bytes. Errors: a query's.
func readFTSLengths(ctx context.Context, q querier, chunk int64) (*ftsLengths, error) {
	var maxID, end int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(block_id), -1)::BIGINT, (SELECT coalesce(max(rowid) + 1, 0)::BIGINT FROM fts_blocks) FROM blocks`).Scan(&maxID, &end); err != nil {
		return nil, err
	}
	l := &ftsLengths{one: make([]ftsLength, maxID+1), has: make([]bool, maxID+1), more: map[int64][]ftsLength{}}
	step := max(1, chunk/64) // rows: 4 numbers each, a few tens of bytes in DuckDB's result
	for lo := int64(0); lo < end; lo += step {
		rows, err := q.QueryContext(ctx, `SELECT block_id, len_body, len_context, level FROM fts_blocks WHERE rowid >= ? AND rowid < ? AND block_id BETWEEN 0 AND ?`, lo, lo+step, maxID)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var f ftsLength
			if err := rows.Scan(&id, &f.body, &f.context, &f.level); err != nil {
				rows.Close()
				return nil, err
			}
			switch {
			case l.more[id] != nil:
				l.more[id] = append(l.more[id], f)
			case l.has[id]:
				l.more[id] = []ftsLength{l.one[id], f}
			default:
				l.one[id], l.has[id] = f, true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return l, nil
}
