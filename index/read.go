package index

import (
	"context"
	"fmt"

	"github.com/escurel/escurel/index/fts"
)

// Stats describes an index for `escurel status`.
type Stats struct {
	Path          string    `json:"path"`
	BlobURL       string    `json:"blob_url"`
	SchemaVersion int       `json:"schema_version"`
	Manifest      Manifest  `json:"manifest"`
	Documents     int64     `json:"documents"`
	Blocks        int64     `json:"blocks"`
	EmbeddingSet  string    `json:"embedding_set,omitempty"` // the active set's name; "" without vectors
	Embeddings    int64     `json:"embeddings"`              // vectors in the active set
	FullText      fts.Stats `json:"full_text"`
	FileBytes     int64     `json:"file_bytes"` // size of the DuckDB file
}

// Stats counts the index's rows.
func (ix *Index) Stats(ctx context.Context) (Stats, error) {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	st := Stats{Path: ix.path, BlobURL: ix.blobs.URL(), Manifest: ix.manifest}
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
	if _, err := ix.db.ExecContext(ctx, `CHECKPOINT`); err == nil {
		st.FileBytes = fileSize(ix.path)
	}
	return st, nil
}

// DocumentBlocks returns every block of a document in document order, as
// hits with score 0. A document without blocks, an unknown one and one above
// clearance (see SearchOptions.Clearance; "" is Public) all give an empty
// slice.
func (ix *Index) DocumentBlocks(ctx context.Context, docID, clearance string) ([]Hit, error) {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	levels, err := allowed(clearance)
	if err != nil {
		return nil, fmt.Errorf("document blocks: %w", err)
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT block_id FROM blocks WHERE doc_id = ? ORDER BY ord`, docID)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	defer rows.Close()
	hits := []Hit{}
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.BlockID); err != nil {
			return nil, err
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if hits, err = fillHits(ctx, tx, hits, levels); err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	return hits, nil
}

// ForEachBlock calls fn with every block the clearance may see ("" is
// Public), in block id order, as a hit with score 0, from one snapshot. An
// error from fn stops the walk and is returned.
func (ix *Index) ForEachBlock(ctx context.Context, clearance string, fn func(Hit) error) error {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	levels, err := allowed(clearance)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	args := make([]any, len(levels))
	for i, l := range levels {
		args[i] = l
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT b.block_id, b.doc_id, d.source, d.title, b.body, b.context,
		b.heading_path, b.page, b.byte_start, b.byte_end
		FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
		WHERE d.sensitivity IN (`+placeholders(len(levels))+`) ORDER BY b.block_id`, args...)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h Hit
		var path string
		if err := rows.Scan(&h.BlockID, &h.DocID, &h.Source, &h.Title, &h.Body, &h.Context, &path, &h.Page, &h.ByteStart, &h.ByteEnd); err != nil {
			return fmt.Errorf("blocks: %w", err)
		}
		if h.HeadingPath, err = decodeHeadingPath(h.BlockID, path); err != nil {
			return err
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	return rows.Err()
}
