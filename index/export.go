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
// Each file is written in a private (0700) temporary directory inside dir
// and renamed into place once all are written, so no one else can read a
// file while DuckDB writes it, and an export that fails leaves the
// earlier files whole and no temporary file. Errors: a bad
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
	// Each query is run over ranges of doc ids (idRanges; %[1]s is the
	// condition), each about readChunkBytes of what size counts: one
	// sorted query of every block failed at a memory_limit of 128 MiB
	// at 100k passages.
	type file struct {
		name, query, size string
		col               string // the doc id column the ranges bound
		n                 *int64
		dim               int // vectors: the stored BLOBs are written as FLOAT[dim]
	}
	files := []file{
		{ExportDocumentsFile, `SELECT d.doc_id, d.source, d.title, d.media_type, d.language, d.sensitivity,
				d.status, d.reason, d.extractor, d.pages, d.bytes, d.blob_id, d.ingested_at, d.meta, d.meta_given,
				(SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id) AS block_count
			FROM documents d WHERE d.sensitivity IN ` + in + ` AND %[1]s ORDER BY d.doc_id`,
			`SELECT coalesce(sum(strlen(source) + strlen(title) + strlen(reason) + strlen(meta) + strlen(meta_given) + 200), 0)::BIGINT FROM documents`, "d.doc_id", &res.Documents, 0},
		{ExportBlocksFile, `SELECT b.public_id AS block_id, b.doc_id, b.ord AS ordinal, b.body, b.context,
				b.heading_path, b.page, b.byte_start, b.byte_end
			FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
			WHERE d.sensitivity IN ` + in + ` AND %[1]s ORDER BY b.doc_id, b.ord`,
			`SELECT coalesce(sum(strlen(public_id) + strlen(body) + strlen(context) + strlen(heading_path) + 100), 0)::BIGINT FROM blocks`, "b.doc_id", &res.Blocks, 0},
	}
	if v := s.vec; v != nil {
		res.EmbeddingSet, res.Dim = v.spec.Identity().String(), v.spec.Dim
		files = append(files, file{ExportVectorsFile, `SELECT b.public_id AS block_id, ` + sqlString(res.EmbeddingSet) + ` AS embedding_set, v.vector
			FROM ` + v.table + ` v JOIN blocks b ON b.block_id = v.block_id JOIN documents d ON d.doc_id = b.doc_id
			WHERE d.sensitivity IN ` + in + ` AND %[1]s ORDER BY b.doc_id, b.ord`,
			fmt.Sprintf(`SELECT count(*)::BIGINT * %d FROM `+v.table, 4*v.spec.Dim+100), "b.doc_id", &res.Vectors, v.spec.Dim})
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer tx.Rollback()
	// Every file is written in a private (0700) directory inside dir and
	// renamed out of it at the end: DuckDB's COPY may create files of its
	// own (with the umask's mode), and dir may be readable by others.
	priv, err := os.MkdirTemp(dir, ".export-")
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(priv)
	for _, f := range files {
		tmp := filepath.Join(priv, f.name)
		// Private from the start: with USE_TMP_FILE false DuckDB writes
		// into the file it finds, which keeps its mode.
		fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			err = fh.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		ranges, err := idRanges(ctx, tx, f.size, s.readChunk(ctx))
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		if f.dim > 0 {
			if *f.n, err = exportVectors(ctx, tx, ranges, f.query, f.col, tmp, f.dim, priv); err != nil {
				return nil, fmt.Errorf("export %s: %w", f.name, err)
			}
		} else if *f.n, err = copyRanges(ctx, tx, ranges, f.query, f.col, tmp, priv); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
		if exportCopied != nil {
			if err := exportCopied(f.name); err != nil {
				return nil, fmt.Errorf("export %s: %w", f.name, err)
			}
		}
		if err := os.Chmod(tmp, 0o600); err != nil {
			return nil, fmt.Errorf("export %s: %w", f.name, err)
		}
	}
	for _, f := range files {
		if err := os.Rename(filepath.Join(priv, f.name), filepath.Join(dir, f.name)); err != nil {
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

// exportMemoryLimit bounds the memory of exportVectors' private DuckDB
// database; beyond it the rows spill to its private temp directory.
const exportMemoryLimit = "1GB"

// exportCopied, when set (by tests), is called after each file's COPY,
// with the file's name: to look at the directory while an export runs,
// or to make it fail there.
var exportCopied func(name string) error

// exportVectors writes the rows of query (block_id, embedding_set, and the
// vector as stored: a BLOB of dim little-endian float32s) to the Parquet
// file path, the vector as FLOAT[dim] (read back as FLOAT[]), and returns
// how many it wrote. DuckDB cannot read a BLOB as floats, so the rows are
// decoded here and appended, as they stream from tx, to a private
// in-memory DuckDB database (at most exportMemoryLimit, spilling into the
// private directory spill), which writes the file in their order.
func exportVectors(ctx context.Context, tx *sql.Tx, ranges []idRange, query, col, path string, dim int, spill string) (int64, error) {
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
	// What does not fit in memory spills to the private directory spill,
	// not to ./.tmp under the umask's mode.
	if _, err := conn.ExecContext(ctx, `SET temp_directory = `+sqlString(filepath.Join(spill, "spill"))+`; SET memory_limit = '`+exportMemoryLimit+`'`); err != nil {
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE v (block_id VARCHAR, embedding_set VARCHAR, vector FLOAT[%d])`, dim)); err != nil {
		return 0, err
	}
	var n int64
	err = duck.Append(ctx, conn, "v", []string{"block_id", "embedding_set", "vector"}, func(add func(...driver.Value) error) error {
		return eachInRanges(ctx, tx, ranges, query, col, nil, func(scan func(...any) error) error {
			var id, set string
			var b []byte
			if err := scan(&id, &set, &b); err != nil {
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
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, `COPY v TO `+sqlString(path)+` (FORMAT parquet, COMPRESSION zstd, USE_TMP_FILE false)`); err != nil {
		return 0, err
	}
	return n, nil
}

// copyRanges writes the rows of query (its %[1]s the condition on col)
// to the Parquet file path,
// range after range, and returns how many it wrote. One range is one
// COPY; more are each copied to a part file in the private directory
// priv, then the parts, read in order, to path (DuckDB keeps the order of
// the files and of their rows). COPY takes no parameters: the ranges'
// bounds are hex strings of ours, quoted.
func copyRanges(ctx context.Context, tx *sql.Tx, ranges []idRange, query, col, path, priv string) (int64, error) {
	// A Parquet writer holds a row group in memory: DuckDB's default,
	// 122,880 rows, is all of 100k passages' blocks.
	const format = ` (FORMAT parquet, COMPRESSION zstd, USE_TMP_FILE false, ROW_GROUP_SIZE 8192)`
	cp := func(q, to string) (int64, error) {
		r, err := tx.ExecContext(ctx, `COPY (`+q+`) TO `+sqlString(to)+format)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected() // COPY answers the rows it wrote
	}
	if len(ranges) == 1 {
		return cp(withCondition(query, "TRUE"), path)
	}
	parts := make([]string, len(ranges))
	defer func() {
		for _, p := range parts {
			if p != "" {
				os.Remove(p)
			}
		}
	}()
	for i, r := range ranges {
		cond := "TRUE"
		switch {
		case r.lo != "" && r.hi != "":
			cond = col + " >= " + sqlString(r.lo) + " AND " + col + " < " + sqlString(r.hi)
		case r.lo != "":
			cond = col + " >= " + sqlString(r.lo)
		case r.hi != "":
			cond = col + " < " + sqlString(r.hi)
		}
		parts[i] = filepath.Join(priv, fmt.Sprintf("part-%06d.parquet", i))
		if _, err := cp(withCondition(query, cond), parts[i]); err != nil {
			return 0, err
		}
	}
	list := make([]string, len(parts))
	for i, p := range parts {
		list[i] = sqlString(p)
	}
	return cp(`SELECT * FROM read_parquet([`+strings.Join(list, ", ")+`])`, path)
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
