package index

// Export: the documents, blocks and vectors as Parquet files, written by
// DuckDB's own COPY … (FORMAT parquet), for engines that read Parquet
// (DuckDB, Spark, Trino, ClickHouse). ARCHITECTURE.md lists the columns.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Export file names, in the directory Export writes.
const (
	ExportDocumentsFile = "documents.parquet"
	ExportBlocksFile    = "blocks.parquet"
	ExportVectorsFile   = "vectors.parquet"
)

// ExportColumns is the schema of each export file: its columns in order,
// each "name TYPE" as DuckDB reads the file back (DESCRIBE). A change here
// is a change of the export format (tests pin it).
var ExportColumns = map[string][]string{
	ExportDocumentsFile: {
		"doc_id VARCHAR", "source VARCHAR", "title VARCHAR", "media_type VARCHAR", "language VARCHAR",
		"sensitivity VARCHAR", "status VARCHAR", "reason VARCHAR", "extractor VARCHAR", "pages INTEGER",
		"bytes BIGINT", "blob_id VARCHAR", "ingested_at TIMESTAMP", "meta VARCHAR", "meta_given VARCHAR",
		"block_count BIGINT",
	},
	ExportBlocksFile: {
		"block_id VARCHAR", "doc_id VARCHAR", "ordinal INTEGER", "body VARCHAR", "context VARCHAR",
		"heading_path VARCHAR", "page INTEGER", "byte_start BIGINT", "byte_end BIGINT",
	},
	// vector is a list of exactly dim floats (Parquet has no fixed-size
	// array; cast it with ::FLOAT[dim] where one is wanted).
	ExportVectorsFile: {"block_id VARCHAR", "embedding_set VARCHAR", "vector FLOAT[]"},
}

// ExportOptions configure Export.
type ExportOptions struct {
	// Clearance is the highest sensitivity exported, as in
	// SearchOptions.Clearance ("" is Public): the documents above it, their
	// blocks and their vectors are left out of every file.
	Clearance string
}

// ExportResult is what Export wrote.
type ExportResult struct {
	Dir   string   `json:"dir"`   // the directory written
	Files []string `json:"files"` // the files' names, in Dir
	// Rows written to each file.
	Documents int64 `json:"documents"`
	Blocks    int64 `json:"blocks"`
	Vectors   int64 `json:"vectors"`
	// EmbeddingSet is the exported vectors' set (embed.Spec.Identity,
	// e.g. "hash/384") and Dim their dimension; "" and 0 with no
	// embedder, and then no vectors file is written.
	EmbeddingSet string `json:"embedding_set,omitempty"`
	Dim          int    `json:"dim,omitempty"`
	Generation   string `json:"generation"` // the generation exported
}

// Export writes the live generation's documents, blocks and the active
// embedding set's vectors within opts.Clearance as Parquet files
// (ExportDocumentsFile, ExportBlocksFile, ExportVectorsFile; columns in
// ExportColumns) into dir, created 0700 when missing; files are 0600 (they
// hold the documents' text). All three come from one snapshot: one DuckDB
// transaction on a reference to the live generation, so writes go on
// meanwhile and a switch does not tear the export. Rows are in canonical
// order: documents by doc id, blocks and vectors by (doc id, ordinal).
// Each file is written beside its name and renamed into place, so an
// export that fails leaves the earlier files whole. Errors: a bad
// clearance; dir not writable; DuckDB's.
func (ix *Index) Export(ctx context.Context, dir string, opts *ExportOptions) (*ExportResult, error) {
	if opts == nil {
		opts = &ExportOptions{}
	}
	levels, err := allowed(opts.Clearance)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	res := &ExportResult{Dir: dir, Generation: s.gen}
	// The levels are our own constants (allowed checked the clearance):
	// COPY takes no parameters.
	in := "('" + strings.Join(levels, "', '") + "')"
	type file struct {
		name, query string
		n           *int64
	}
	files := []file{
		{ExportDocumentsFile, `SELECT d.doc_id, d.source, d.title, d.media_type, d.language, d.sensitivity,
				d.status, d.reason, d.extractor, d.pages, d.bytes, d.blob_id, d.ingested_at, d.meta, d.meta_given,
				(SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id) AS block_count
			FROM documents d WHERE d.sensitivity IN ` + in + ` ORDER BY d.doc_id`, &res.Documents},
		{ExportBlocksFile, `SELECT b.public_id AS block_id, b.doc_id, b.ord AS ordinal, b.body, b.context,
				b.heading_path, b.page, b.byte_start, b.byte_end
			FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
			WHERE d.sensitivity IN ` + in + ` ORDER BY b.doc_id, b.ord`, &res.Blocks},
	}
	if v := s.vec; v != nil {
		res.EmbeddingSet, res.Dim = v.spec.Identity().String(), v.spec.Dim
		files = append(files, file{ExportVectorsFile, `SELECT b.public_id AS block_id, ` + sqlString(res.EmbeddingSet) + ` AS embedding_set, v.vector
			FROM ` + v.table + ` v JOIN blocks b ON b.block_id = v.block_id JOIN documents d ON d.doc_id = b.doc_id
			WHERE d.sensitivity IN ` + in + ` ORDER BY b.doc_id, b.ord`, &res.Vectors})
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer tx.Rollback()
	var tmps []string
	defer func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}()
	for _, f := range files {
		final := filepath.Join(dir, f.name)
		tmp := final + ".tmp"
		tmps = append(tmps, tmp)
		// Private from the start: DuckDB truncates the file it finds
		// and keeps its mode.
		if err := os.WriteFile(tmp, nil, 0o600); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (`+f.query+`)`).Scan(f.n); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		if _, err := tx.ExecContext(ctx, `COPY (`+f.query+`) TO `+sqlString(tmp)+` (FORMAT parquet, COMPRESSION zstd)`); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		if err := os.Chmod(tmp, 0o600); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
	}
	for i, f := range files {
		if err := os.Rename(tmps[i], filepath.Join(dir, f.name)); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		res.Files = append(res.Files, f.name)
	}
	if s.vec == nil {
		// No embedder: no vectors. An older export's file would be
		// read as this one's.
		if err := os.Remove(filepath.Join(dir, ExportVectorsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	return res, nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
