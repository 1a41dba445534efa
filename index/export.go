package index

// Export: the documents, blocks and vectors as Parquet files, written by
// DuckDB's own COPY … (FORMAT parquet), for engines that read Parquet
// (DuckDB, Spark, Trino, ClickHouse). ARCHITECTURE.md lists the columns.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/escurel/escurel/internal/duck"
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
		dim         int // vectors: the stored BLOBs are written as FLOAT[dim]
	}
	files := []file{
		{ExportDocumentsFile, `SELECT d.doc_id, d.source, d.title, d.media_type, d.language, d.sensitivity,
				d.status, d.reason, d.extractor, d.pages, d.bytes, d.blob_id, d.ingested_at, d.meta, d.meta_given,
				(SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id) AS block_count
			FROM documents d WHERE d.sensitivity IN ` + in + ` ORDER BY d.doc_id`, &res.Documents, 0},
		{ExportBlocksFile, `SELECT b.public_id AS block_id, b.doc_id, b.ord AS ordinal, b.body, b.context,
				b.heading_path, b.page, b.byte_start, b.byte_end
			FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
			WHERE d.sensitivity IN ` + in + ` ORDER BY b.doc_id, b.ord`, &res.Blocks, 0},
	}
	if v := s.vec; v != nil {
		res.EmbeddingSet, res.Dim = v.spec.Identity().String(), v.spec.Dim
		files = append(files, file{ExportVectorsFile, `SELECT b.public_id AS block_id, ` + sqlString(res.EmbeddingSet) + ` AS embedding_set, v.vector
			FROM ` + v.table + ` v JOIN blocks b ON b.block_id = v.block_id JOIN documents d ON d.doc_id = b.doc_id
			WHERE d.sensitivity IN ` + in + ` ORDER BY b.doc_id, b.ord`, &res.Vectors, v.spec.Dim})
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
		if f.dim > 0 {
			if *f.n, err = exportVectors(ctx, tx, f.query, tmp, f.dim); err != nil {
				return nil, fmt.Errorf("export %s: %w", f.name, err)
			}
		} else {
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (`+f.query+`)`).Scan(f.n); err != nil {
				return nil, fmt.Errorf("export %s: %w", f.name, err)
			}
			if _, err := tx.ExecContext(ctx, `COPY (`+f.query+`) TO `+sqlString(tmp)+` (FORMAT parquet, COMPRESSION zstd)`); err != nil {
				return nil, fmt.Errorf("export %s: %w", f.name, err)
			}
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

// exportVectors writes the rows of query (block_id, embedding_set, and the
// vector as stored: a BLOB of dim little-endian float32s) to the Parquet
// file path, the vector as FLOAT[dim] (read back as FLOAT[]), and returns
// how many it wrote. DuckDB cannot read a BLOB as floats, so the rows are
// decoded here and appended, as they stream from tx, to a private
// in-memory DuckDB database, which writes the file in their order.
func exportVectors(ctx context.Context, tx *sql.Tx, query, path string, dim int) (int64, error) {
	mem, err := sql.Open("duckdb", "")
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	conn, err := mem.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE v (block_id VARCHAR, embedding_set VARCHAR, vector FLOAT[%d])`, dim)); err != nil {
		return 0, err
	}
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	err = duck.Append(ctx, conn, "v", []string{"block_id", "embedding_set", "vector"}, func(add func(...driver.Value) error) error {
		for rows.Next() {
			var id, set string
			var b []byte
			if err := rows.Scan(&id, &set, &b); err != nil {
				return err
			}
			vec, err := decodeVector(make([]float32, 0, dim), b, dim)
			if err != nil {
				return fmt.Errorf("block %s: %w", id, err)
			}
			if err := add(id, set, vec); err != nil {
				return err
			}
			n++
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, `COPY v TO `+sqlString(path)+` (FORMAT parquet, COMPRESSION zstd)`); err != nil {
		return 0, err
	}
	return n, nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
