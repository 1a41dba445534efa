package index

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	schemasql "github.com/escurel/escurel/sql"
)

// SchemaVersion is the schema version this binary writes: the highest number
// among the SQL files in package sql.
var SchemaVersion = func() int {
	ms, err := schemasql.Migrations()
	if err != nil {
		panic(err) // the embedded files are checked by package sql's tests
	}
	return ms[len(ms)-1].Version
}()

// column is a column the current schema expects. def is the value old rows
// get when the ensure-column pass has to add the column.
type column struct {
	table, name, typ, def string
}

// columnFill holds, by "table.column", a statement that computes the
// column for old rows once the ensure-column pass has added it.
var columnFill = map[string]string{"blocks.public_id": fillPublicIDs}

// fillPublicIDs computes blocks.public_id where it is empty, as
// sql/0010_block_ids.sql and blockID do.
const fillPublicIDs = `UPDATE blocks SET public_id = left(sha256(blocks.doc_id || ' ' || coalesce(d.blob_id, '') || ' ' ||
	blocks.byte_start::VARCHAR || ' ' || blocks.byte_end::VARCHAR || ' ' || blocks.body), 16)
	FROM (SELECT b.block_id, d.blob_id FROM blocks b LEFT JOIN documents d ON d.doc_id = b.doc_id) d
	WHERE d.block_id = blocks.block_id AND blocks.public_id = ''`

// schemaColumns lists every column of the current schema, table by table.
// TestSchemaColumnsMatchMigrations keeps it equal to what the SQL files
// create. Add a column here whenever a new SQL file adds one.
var schemaColumns = []column{
	{"manifest", "id", "INTEGER", "1"},
	{"manifest", "schema_version", "INTEGER", "0"},
	{"manifest", "embedder_model", "VARCHAR", "''"},
	{"manifest", "embedder_dim", "INTEGER", "0"},
	{"manifest", "chunker", "VARCHAR", "''"},
	{"manifest", "analyzer", "VARCHAR", "''"},
	{"manifest", "contextualize", "VARCHAR", "''"},
	{"manifest", "escurel_version", "VARCHAR", "''"},
	{"manifest", "created_at", "TIMESTAMP", "TIMESTAMP '1970-01-01'"},
	{"manifest", "updated_at", "TIMESTAMP", "TIMESTAMP '1970-01-01'"},
	{"documents", "doc_id", "VARCHAR", "''"},
	{"documents", "source", "VARCHAR", "''"},
	{"documents", "media_type", "VARCHAR", "''"},
	{"documents", "title", "VARCHAR", "''"},
	{"documents", "sensitivity", "VARCHAR", "''"},
	{"documents", "blob_id", "VARCHAR", "''"},
	{"documents", "language", "VARCHAR", "''"},
	{"documents", "ingested_at", "TIMESTAMP", "TIMESTAMP '1970-01-01'"},
	{"documents", "title_from", "VARCHAR", "'extraction'"},
	{"blocks", "block_id", "BIGINT", "0"},
	{"blocks", "doc_id", "VARCHAR", "''"},
	{"blocks", "ord", "INTEGER", "0"},
	{"blocks", "body", "VARCHAR", "''"},
	{"blocks", "byte_start", "BIGINT", "0"},
	{"blocks", "byte_end", "BIGINT", "0"},
	{"blocks", "context", "VARCHAR", "''"},
	{"blocks", "heading_path", "VARCHAR", "'[]'"},
	{"blocks", "page", "INTEGER", "0"},
	{"blocks", "parent_id", "VARCHAR", "''"},
	{"blocks", "heading", "VARCHAR", "''"},
	{"blocks", "window_text", "VARCHAR", "''"},
	{"blocks", "parent_locator", "VARCHAR", "''"},
	{"fts_terms", "term_id", "INTEGER", "0"},
	{"fts_terms", "term", "VARCHAR", "''"},
	{"fts_blocks", "block_id", "BIGINT", "0"},
	{"fts_blocks", "len_body", "INTEGER", "0"},
	{"fts_blocks", "len_context", "INTEGER", "0"},
	{"fts_blocks", "level", "TINYINT", "0"},
	{"fts_segments", "segment_id", "INTEGER", "0"},
	{"fts_segments", "blocks", "INTEGER", "0"},
	{"fts_segments", "min_block", "BIGINT", "0"},
	{"fts_segments", "max_block", "BIGINT", "0"},
	{"fts_segments", "bytes", "BIGINT", "0"},
	{"fts_segments", "created_at", "TIMESTAMP", "TIMESTAMP '1970-01-01'"},
	{"fts_postings", "term_id", "INTEGER", "0"},
	{"fts_postings", "segment_id", "INTEGER", "0"},
	{"fts_postings", "df", "INTEGER", "0"},
	{"fts_postings", "df_body", "INTEGER", "0"},
	{"fts_postings", "df_context", "INTEGER", "0"},
	{"fts_postings", "data", "BLOB", "''::BLOB"},
	{"fts_tombstones", "block_id", "BIGINT", "0"},
	{"fts_df_deltas", "term_id", "INTEGER", "0"},
	{"fts_df_deltas", "df", "INTEGER", "0"},
	{"fts_df_deltas", "df_body", "INTEGER", "0"},
	{"fts_df_deltas", "df_context", "INTEGER", "0"},
	{"embedding_sets", "set_id", "INTEGER", "0"},
	{"embedding_sets", "name", "VARCHAR", "''"},
	{"embedding_sets", "model", "VARCHAR", "''"},
	{"embedding_sets", "dim", "INTEGER", "0"},
	{"embedding_sets", "created_at", "TIMESTAMP", "TIMESTAMP '1970-01-01'"},
	{"manifest", "embedder_spec", "VARCHAR", "''"},
	{"documents", "status", "VARCHAR", "'ok'"},
	{"documents", "reason", "VARCHAR", "''"},
	{"documents", "extractor", "VARCHAR", "''"},
	{"documents", "pages", "INTEGER", "0"},
	{"document_text", "doc_id", "VARCHAR", "''"},
	{"document_text", "text", "VARCHAR", "''"},
	{"manifest", "extractors", "VARCHAR", "''"},
	// A file that lost the column (0010 makes it, UNIQUE) gets the ids
	// computed (columnFill), without the constraint.
	{"blocks", "public_id", "VARCHAR", "''"},
	{"documents", "bytes", "BIGINT", "0"},
	{"documents", "source_mtime", "BIGINT", "0"},
	{"documents", "meta", "VARCHAR", "'{}'"},
	{"documents", "meta_given", "VARCHAR", "'{}'"},
	// -1: not known; deletes find such a document's blocks by doc id.
	{"documents", "first_block", "BIGINT", "-1"},
	{"documents", "block_count", "INTEGER", "-1"},
	{"fts_removals", "data", "BLOB", "''::BLOB"},
}

// migrate brings the database up to SchemaVersion: it applies each missing
// SQL file in its own transaction and records it in schema_migrations, then
// runs the ensure-column pass and, when either changed the file, a
// CHECKPOINT: opening a current file writes nothing, so it opens on a full
// disk (with a write-ahead log left by a checkpoint that failed for lack
// of space, too). It returns the version the file had before. A file whose version is newer than SchemaVersion is left
// untouched and refused with a *SchemaError.
func migrate(ctx context.Context, db *sql.DB, path string) (int, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       VARCHAR NOT NULL,
		applied_at TIMESTAMP NOT NULL)`); err != nil {
		return 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	var from int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&from); err != nil {
		return 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	if from > SchemaVersion {
		return from, &SchemaError{Path: path, File: from, Binary: SchemaVersion}
	}
	ms, err := schemasql.Migrations()
	if err != nil {
		return from, err
	}
	for _, m := range ms[from:] {
		if err := applyMigration(ctx, db, m); err != nil {
			return from, fmt.Errorf("migrate %s to %s: %w", path, m.Name, err)
		}
	}
	added, err := ensureColumns(ctx, db)
	if err != nil {
		return from, fmt.Errorf("migrate %s: %w", path, err)
	}
	if from == SchemaVersion && added == 0 {
		return from, nil
	}
	if _, err := db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return from, fmt.Errorf("migrate %s: checkpoint: %w", path, err)
	}
	return from, nil
}

func applyMigration(ctx context.Context, db *sql.DB, m schemasql.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, now()::TIMESTAMP)`, m.Version, m.Name); err != nil {
		return err
	}
	return tx.Commit()
}

// ensureColumns adds every column of schemaColumns that an existing table
// lacks, with its default for old rows and a NOT NULL constraint. It is
// idempotent and runs on every open, so an index file whose recorded
// migrations do not match its tables (an interrupted or hand-made file) is
// repaired in place. A missing table is an error.
func ensureColumns(ctx context.Context, db *sql.DB) (added int, err error) {
	rows, err := db.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'`)
	if err != nil {
		return 0, err
	}
	have := map[string]bool{}
	tables := map[string]bool{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return 0, err
		}
		have[t+"."+c] = true
		tables[t] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, c := range schemaColumns {
		if !tables[c.table] {
			return 0, fmt.Errorf("table %s is missing: the file is damaged; run escurel rebuild", c.table)
		}
		if have[c.table+"."+c.name] {
			continue
		}
		// DuckDB cannot add a column with a constraint: add, then SET NOT NULL.
		stmts := []string{
			fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s %s DEFAULT %s`, c.table, c.name, c.typ, c.def),
			fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN %s SET NOT NULL`, c.table, c.name),
		}
		if fill := columnFill[c.table+"."+c.name]; fill != "" {
			stmts = append(stmts, fill)
		}
		for _, stmt := range stmts {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return added, fmt.Errorf("ensure column %s.%s: %w", c.table, c.name, err)
			}
		}
		added++
	}
	return added, nil
}

// SchemaError reports an index file written by a newer escurel.
type SchemaError struct {
	Path   string // the index file
	File   int    // schema version of the file
	Binary int    // SchemaVersion of this binary
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("open %s: index schema version %d is newer than this escurel's %d (escurel %s); "+
		"upgrade escurel: go install github.com/escurel/escurel/cmd/escurel@latest", e.Path, e.File, e.Binary, Version)
}

// Unwrap returns ErrSchemaTooNew.
func (e *SchemaError) Unwrap() error { return ErrSchemaTooNew }

// placeholders returns n comma-separated placeholders.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
