package index

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/escurel/escurel/index/fts"
)

// Verification is what Verify found: a digest of every derived row and the
// coverage checks between the rows and the blob store.
type Verification struct {
	// Digest is the SHA-256 (hex) of the derived rows in a canonical form
	// and order: the manifest's settings (embedder identity, chunker,
	// analyzer, contextualize; not its times), the documents by doc id,
	// the blocks by (doc id, position) with their full-text lengths and
	// level, the postings by (term, doc id, position), and the vectors by
	// (doc id, position). Blocks are named by document and position, not by
	// block id: ids come from a sequence and differ between an ingest and
	// a rebuild of the same documents, while everything they identify is
	// equal. Two indexes with the same digest answer every query alike.
	Digest     string `json:"digest"`
	Generation string `json:"generation"`
	Documents  int64  `json:"documents"`
	Blocks     int64  `json:"blocks"`
	Postings   int64  `json:"postings"`
	Vectors    int64  `json:"vectors"`

	// Coverage. Each list holds sources or ids, sorted; all empty when the
	// index derives exactly from the blob store.
	RecordsWithoutRows    []string `json:"records_without_rows"`    // records the index lacks
	RowsWithoutRecords    []string `json:"rows_without_records"`    // documents whose record is gone or differs
	BlocksWithoutPostings []int64  `json:"blocks_without_postings"` // no full-text entry
	BlocksWithoutVectors  []int64  `json:"blocks_without_vectors"`  // none in the active embedding set
	// OrphanBlobs are blobs no record names: the old bytes of a replaced
	// or deleted document, kept because content-addressed blobs may be
	// shared. They are garbage, not drift, and do not fail OK.
	OrphanBlobs []string `json:"orphan_blobs"`
}

// OK reports whether the rows derive exactly from the blob store: every
// record has its document, every document its record, every block its
// postings and (with an embedder) its vector.
func (v *Verification) OK() bool {
	return len(v.RecordsWithoutRows)+len(v.RowsWithoutRecords)+len(v.BlocksWithoutPostings)+
		len(v.BlocksWithoutVectors) == 0
}

// digester writes length-prefixed fields into a hash, so that no two row
// sequences serialize alike.
type digester struct{ h hash.Hash }

func (d digester) str(s string) {
	var n [binary.MaxVarintLen64]byte
	d.h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	d.h.Write([]byte(s))
}

func (d digester) int(v int64) { d.str(strconv.FormatInt(v, 10)) }

// Verify computes the digest of the index's derived rows and checks them
// against the blob store, from one snapshot. It holds back writes while it
// runs. A failed check is reported in the result, not as an error; the
// error is for a failure to read.
func (ix *Index) Verify(ctx context.Context) (*Verification, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	v := &Verification{Generation: ix.gen}
	d := digester{sha256.New()}
	m := ix.manifest
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
	recs, err := ix.blobs.Records(ctx)
	if err != nil {
		return fail("records", err)
	}
	byID := make(map[string]bool, len(recs))
	referenced := map[string]bool{}
	recOf := map[string]string{}
	for _, r := range recs {
		byID[r.DocID] = true
		referenced[r.BlobID] = true
		recOf[r.DocID] = r.BlobID + "\x00" + r.Sensitivity + "\x00" + r.Language + "\x00" + r.IngestedAt.UTC().Format(time.RFC3339Nano)
	}
	rows, err := tx.QueryContext(ctx, `SELECT doc_id, source, media_type, title, title_from, sensitivity, blob_id, language, ingested_at
		FROM documents ORDER BY doc_id`)
	if err != nil {
		return fail("documents", err)
	}
	seen := map[string]bool{}
	d.str("documents")
	for rows.Next() {
		var id, src, mt, title, from, sens, blobID, lang string
		var at time.Time
		if err := rows.Scan(&id, &src, &mt, &title, &from, &sens, &blobID, &lang, &at); err != nil {
			rows.Close()
			return fail("documents", err)
		}
		stamp := at.UTC().Format(time.RFC3339Nano)
		for _, f := range []string{id, src, mt, title, from, sens, blobID, lang, stamp} {
			d.str(f)
		}
		v.Documents++
		seen[id] = true
		if recOf[id] != blobID+"\x00"+sens+"\x00"+lang+"\x00"+stamp {
			v.RowsWithoutRecords = append(v.RowsWithoutRecords, src)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("documents", err)
	}
	for _, r := range recs {
		if !seen[r.DocID] {
			v.RecordsWithoutRows = append(v.RecordsWithoutRows, r.Source)
		}
	}
	sort.Strings(v.RecordsWithoutRows)
	sort.Strings(v.RowsWithoutRecords)
	ids, err := ix.blobs.BlobIDs(ctx)
	if err != nil {
		return fail("blobs", err)
	}
	for _, id := range ids {
		if !referenced[id] {
			v.OrphanBlobs = append(v.OrphanBlobs, id)
		}
	}

	// Blocks, with their full-text lengths and level.
	type key struct {
		doc string
		ord int32
	}
	keyOf := map[int64]key{}
	rows, err = tx.QueryContext(ctx, `SELECT b.block_id, b.doc_id, b.ord, b.body, b.byte_start, b.byte_end, b.context,
		b.heading_path, b.page, f.len_body, f.len_context, f.level
		FROM blocks b LEFT JOIN fts_blocks f ON f.block_id = b.block_id ORDER BY b.doc_id, b.ord`)
	if err != nil {
		return fail("blocks", err)
	}
	d.str("blocks")
	for rows.Next() {
		var id, start, end int64
		var doc, body, context, path string
		var ord, page int32
		var lenBody, lenContext, level *int64
		if err := rows.Scan(&id, &doc, &ord, &body, &start, &end, &context, &path, &page, &lenBody, &lenContext, &level); err != nil {
			rows.Close()
			return fail("blocks", err)
		}
		keyOf[id] = key{doc, ord}
		d.str(doc)
		d.int(int64(ord))
		d.str(body)
		d.int(start)
		d.int(end)
		d.str(context)
		d.str(path)
		d.int(int64(page))
		if lenBody == nil {
			v.BlocksWithoutPostings = append(v.BlocksWithoutPostings, id)
			d.str("-")
		} else {
			d.int(*lenBody)
			d.int(*lenContext)
			d.int(*level)
		}
		v.Blocks++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("blocks", err)
	}

	// Postings, as (term, doc, position) → frequencies.
	type posting struct {
		term string
		k    key
		tf   [fts.NumFields]uint32
	}
	var ps []posting
	err = ix.fts.View(func() error {
		return ix.fts.ForEachPosting(ctx, tx, func(term string, p fts.Posting) error {
			k, ok := keyOf[p.Block]
			if !ok {
				return fmt.Errorf("posting of term %q for block %d, which has no row", term, p.Block)
			}
			ps = append(ps, posting{term, k, p.TF})
			return nil
		})
	})
	if err != nil {
		return fail("postings", err)
	}
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.term != b.term {
			return a.term < b.term
		}
		if a.k.doc != b.k.doc {
			return a.k.doc < b.k.doc
		}
		return a.k.ord < b.k.ord
	})
	d.str("postings")
	for _, p := range ps {
		d.str(p.term)
		d.str(p.k.doc)
		d.int(int64(p.k.ord))
		for _, tf := range p.tf {
			d.int(int64(tf))
		}
	}
	v.Postings = int64(len(ps))

	// Vectors of the active embedding set.
	d.str("vectors")
	if ix.vec != nil {
		d.str(ix.vec.spec.Identity().String())
		rows, err = tx.QueryContext(ctx, `SELECT b.block_id, v.vector FROM blocks b
			LEFT JOIN `+ix.vec.table+` v ON v.block_id = b.block_id ORDER BY b.doc_id, b.ord`)
		if err != nil {
			return fail("vectors", err)
		}
		var buf []byte
		for rows.Next() {
			var id int64
			var vec []any
			if err := rows.Scan(&id, &vec); err != nil {
				rows.Close()
				return fail("vectors", err)
			}
			if vec == nil {
				v.BlocksWithoutVectors = append(v.BlocksWithoutVectors, id)
				d.str("-")
				continue
			}
			buf = buf[:0]
			for _, x := range vec {
				f, _ := x.(float32)
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			}
			d.str(string(buf))
			v.Vectors++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fail("vectors", err)
		}
	}
	v.Digest = hex.EncodeToString(d.h.Sum(nil))
	return v, nil
}
