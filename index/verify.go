package index

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
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
// sequences serialize alike.
type digester struct{ h hash.Hash }

func (d digester) str(s string) {
	var n [binary.MaxVarintLen64]byte
	d.h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	d.h.Write([]byte(s))
}

func (d digester) int(v int64) {
	var n [binary.MaxVarintLen64]byte
	d.h.Write(n[:binary.PutVarint(n[:], v)])
}

// VerifyOptions configure Verify. The zero value reads the records from
// the blob store and lists its blobs.
type VerifyOptions struct {
	// Records, when not nil, are the blob store's records as the caller
	// has just read them (a rebuild holding the lock), instead of reading
	// them again.
	Records []*blobstore.Record
	// SkipOrphans leaves out the listing of blobs for OrphanBlobs.
	SkipOrphans bool
	// Deep reads every blob a record names and checks that its bytes hash
	// to its id (DamagedBlobs): a read of the whole blob store.
	Deep bool
}

// Verify computes the digest of the index's derived rows and checks them
// against the blob store, from one snapshot. It holds back writes while it
// runs. A failed check is reported in the result, not as an error; the
// error is for a failure to read.
func (ix *Index) Verify(ctx context.Context, opts *VerifyOptions) (*Verification, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return nil, err
	}
	return s.verify(ctx, opts)
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

// verifyRows is verify, once.
func (ix *state) verifyRows(ctx context.Context, opts *VerifyOptions) (*Verification, error) {
	if opts == nil {
		opts = &VerifyOptions{}
	}
	v := &Verification{Generation: ix.gen}
	d := digester{sha256.New()}
	m := *ix.manifest.Load()
	d.str("manifest")
	d.str(m.Embedder().Identity().String())
	d.str(m.Chunker)
	d.str(m.Analyzer)
	d.str(m.Contextualize)
	d.int(int64(m.SchemaVersion))

	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	fail := func(what string, err error) (*Verification, error) {
		return nil, fmt.Errorf("verify %s: %s: %w", ix.path, what, err)
	}

	// Documents, against the records.
	recs := opts.Records
	if recs == nil {
		if recs, v.DamagedRecords, err = ix.blobs.ScanRecords(ctx); err != nil {
			return fail("records", err)
		}
	}
	damagedAt := map[string]int{}
	for i, r := range v.DamagedRecords {
		damagedAt[r.DocID] = i
	}
	byID := make(map[string]bool, len(recs))
	referenced := map[string]bool{}
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
	recOf := map[string]string{}
	recSens := map[string]string{} // compared apart: see below
	for _, r := range recs {
		byID[r.DocID] = true
		referenced[r.BlobID] = true
		recOf[r.DocID] = key(r.Source, r.MediaType, r.Title, r.TitleGiven, r.BlobID, "", r.Language, r.IngestedAt.UTC().Format(time.RFC3339Nano), r.Error, givenJSON(r.Meta))
		recSens[r.DocID] = r.Sensitivity
	}
	// Each table is read in ranges of doc ids (idRanges: the memory
	// DuckDB needs to sort and return the rows stays bounded), in the
	// same order as one sorted read.
	ranges, err := idRanges(ctx, tx, `SELECT coalesce(sum(strlen(source) + strlen(title) + strlen(reason) + strlen(meta) + strlen(meta_given) + 160), 0)::BIGINT FROM documents`, ix.readChunk(ctx))
	if err != nil {
		return fail("documents", err)
	}
	seen := map[string]bool{}
	d.str("documents")
	err = eachInRanges(ctx, tx, ranges, `SELECT doc_id, source, media_type, title, title_from, sensitivity, blob_id, language, ingested_at,
		status, reason, extractor, pages, meta, meta_given
		FROM documents WHERE %[1]s ORDER BY doc_id`, "doc_id", nil, func(scan func(...any) error) error {
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
		v.Documents++
		if status == statusFailed {
			v.Failed++
		}
		seen[id] = true
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
		if recOf[id] != key(src, mt, title, from == titleFromInput, blobID, "", lang, stamp, failure, given) || level(sens) < level(recSens[id]) {
			v.RowsWithoutRecords = append(v.RowsWithoutRecords, src)
		}
		return nil
	})
	if err != nil {
		return fail("documents", err)
	}
	for _, r := range recs {
		if !seen[r.DocID] {
			v.RecordsWithoutRows = append(v.RecordsWithoutRows, r.Source)
		}
	}
	sort.Strings(v.RecordsWithoutRows)
	sort.Strings(v.RowsWithoutRecords)
	if !opts.SkipOrphans {
		ids, err := ix.blobs.BlobIDs(ctx)
		if err != nil {
			return fail("blobs", err)
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
	if ranges, err = idRanges(ctx, tx, `SELECT coalesce(sum(strlen(text) + 48), 0)::BIGINT FROM document_text`, ix.readChunk(ctx)); err != nil {
		return fail("document text", err)
	}
	d.str("document_text")
	err = eachInRanges(ctx, tx, ranges, `SELECT doc_id, text FROM document_text WHERE %[1]s ORDER BY doc_id`, "doc_id", nil, func(scan func(...any) error) error {
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
	if ranges, err = idRanges(ctx, tx, `SELECT coalesce(sum(strlen(public_id) + strlen(body) + strlen(context) + strlen(heading_path) + strlen(parent_id)
		+ strlen(heading) + strlen(window_text) + strlen(parent_locator) + 128), 0)::BIGINT FROM blocks`, ix.readChunk(ctx)); err != nil {
		return fail("blocks", err)
	}
	d.str("blocks")
	err = eachInRanges(ctx, tx, ranges, `SELECT b.block_id, b.public_id, b.doc_id, b.ord, b.body, b.byte_start, b.byte_end, b.context,
		b.heading_path, b.page, b.parent_id, b.heading, b.window_text, b.parent_locator, f.len_body, f.len_context, f.level
		FROM blocks b LEFT JOIN fts_blocks f ON f.block_id = b.block_id WHERE %[1]s ORDER BY b.doc_id, b.ord`, "b.doc_id", nil, func(scan func(...any) error) error {
		var id, start, end int64
		var pub, doc, body, context, path, parent, heading, window, locator string
		var ord, page int32
		var lenBody, lenContext, level *int64
		if err := scan(&id, &pub, &doc, &ord, &body, &start, &end, &context, &path, &page, &parent, &heading, &window, &locator, &lenBody, &lenContext, &level); err != nil {
			return err
		}
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
		if lenBody == nil {
			v.BlocksWithoutPostings = append(v.BlocksWithoutPostings, pub)
			d.str("-")
		} else {
			d.int(*lenBody)
			d.int(*lenContext)
			d.int(*level)
		}
		v.Blocks++
		return nil
	})
	if err != nil {
		return fail("blocks", err)
	}

	// Postings, as (term, block position) → frequencies, sorted by term
	// text (term ids depend on the order documents arrived) and position.
	type posting struct {
		term, block int32 // the term's rank in lexical order; the block's position
		tf          [fts.NumFields]uint32
	}
	var ps []posting
	var terms []string
	err = ix.fts.View(func() error {
		// Sized once: grown by append, the slice of 76M postings (1M
		// passages) held up to three times its 1.2 GB while copied.
		ps = make([]posting, 0, ix.fts.LivePostings())
		rank := map[string]int32{}
		lastTerm, lastRank := "", int32(-1)
		return ix.fts.ForEachPosting(ctx, tx, func(term string, p fts.Posting) error {
			if p.Block < 0 || p.Block >= int64(len(posOf)) || posOf[p.Block] < 0 {
				return fmt.Errorf("a posting of term %q names a block that has no row: the full-text index is damaged; run escurel rebuild", term)
			}
			if term != lastTerm || lastRank < 0 {
				r, ok := rank[term]
				if !ok {
					r = int32(len(terms))
					rank[term] = r
					terms = append(terms, term)
				}
				lastTerm, lastRank = term, r
			}
			ps = append(ps, posting{lastRank, posOf[p.Block], p.TF})
			return nil
		})
	})
	if err != nil {
		return fail("postings", err)
	}
	order := make([]int32, len(terms)) // first-seen rank → lexical rank
	byText := make([]int32, len(terms))
	for i := range byText {
		byText[i] = int32(i)
	}
	sort.Slice(byText, func(i, j int) bool { return terms[byText[i]] < terms[byText[j]] })
	for lex, r := range byText {
		order[r] = int32(lex)
	}
	for i := range ps {
		ps[i].term = order[ps[i].term]
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].term != ps[j].term {
			return ps[i].term < ps[j].term
		}
		return ps[i].block < ps[j].block
	})
	d.str("postings")
	for i := 0; i < len(ps); {
		j := i
		for j < len(ps) && ps[j].term == ps[i].term {
			j++
		}
		d.str(terms[byText[ps[i].term]]) // the term, its posting count, its postings
		d.int(int64(j - i))
		for k, p := range ps[i:j] {
			if k > 0 && p.block == ps[i+k-1].block {
				v.DuplicatePostings++
			}
			d.int(int64(p.block))
			for _, tf := range p.tf {
				d.int(int64(tf))
			}
		}
		i = j
	}
	v.Postings = int64(len(ps))

	// Vectors of the active embedding set.
	d.str("vectors")
	if ix.vec != nil {
		d.str(ix.vec.spec.Identity().String())
		if ranges, err = idRanges(ctx, tx, fmt.Sprintf(`SELECT count(*)::BIGINT * %d FROM blocks`, 4*ix.vec.spec.Dim+64), ix.readChunk(ctx)); err != nil {
			return fail("vectors", err)
		}
		err = eachInRanges(ctx, tx, ranges, `SELECT b.public_id, v.vector FROM blocks b
			LEFT JOIN (SELECT block_id, vector FROM `+ix.vec.table+` WHERE block_id IN (SELECT block_id FROM blocks WHERE %[1]s)) v
			ON v.block_id = b.block_id WHERE %[1]s ORDER BY b.doc_id, b.ord`, "doc_id", nil, func(scan func(...any) error) error {
			var id string
			var vec sql.RawBytes // float32 little-endian (vectorValue), as digested
			if err := scan(&id, &vec); err != nil {
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
	v.Digest = hex.EncodeToString(d.h.Sum(nil))
	return v, nil
}
