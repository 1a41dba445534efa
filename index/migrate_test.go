package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "gocloud.dev/blob/memblob"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/fts"
	"github.com/escurel/escurel/internal/layout"
	schemasql "github.com/escurel/escurel/sql"
)

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestSchemaColumnsMatchMigrations keeps schemaColumns equal to what the SQL
// files create, so the ensure-column pass knows every column.
func TestSchemaColumnsMatchMigrations(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	defer db.Close()
	if _, err := migrate(ctx, db, "mem"); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_schema = 'main' AND table_name <> 'schema_migrations' ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var tb, c, ty string
		rows.Scan(&tb, &c, &ty)
		got[tb+"."+c] = ty
	}
	want := map[string]string{}
	for _, c := range schemaColumns {
		want[c.table+"."+c.name] = c.typ
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("column %s: schema has %q, schemaColumns says %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("column %s is created by a SQL file but missing from schemaColumns", k)
		}
	}
}

// TestUpgradeOlderFile writes an index file the way the first release did,
// from 0001 alone, with rows in it; the current Open upgrades it in place
// and the old rows read back with the new columns empty.
func TestUpgradeOlderFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, layout.FileName)
	ms, err := schemasql.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	old := openDB(t, path)
	for _, stmt := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)`,
		ms[0].SQL,
		`INSERT INTO schema_migrations VALUES (1, '` + ms[0].Name + `', TIMESTAMP '2026-01-02 03:04:05')`,
		`INSERT INTO manifest VALUES (1, 1, 'hash', 384, 'default(max_bytes=1500)', 'simple/1', 'structural', '0.0.1',
			TIMESTAMP '2026-01-02 03:04:05', TIMESTAMP '2026-01-02 03:04:05')`,
		`INSERT INTO documents VALUES ('0123456789abcdef0123456789abcdef', '/old.md', 'text/markdown', 'Old', 'public',
			'sha256:` + strings.Repeat("0", 64) + `', 'en', TIMESTAMP '2026-01-02 03:04:05')`,
		`INSERT INTO blocks VALUES (nextval('block_ids'), '0123456789abcdef0123456789abcdef', 0, 'old body', 0, 8)`,
	} {
		if _, err := old.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	old.Close()

	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// The one-file layout moved into the first generation.
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) || ix.Generation() != "gen-000001" || ix.Path() != layout.GenerationPath(dir, "gen-000001") {
		t.Errorf("layout after upgrade: %v, generation %s", err, ix.Generation())
	}
	if gen, ok, err := layout.Current(dir); gen != "gen-000001" || !ok || err != nil {
		t.Errorf("CURRENT: %q %v %v", gen, ok, err)
	}
	m := ix.Manifest()
	if m.SchemaVersion != SchemaVersion || m.EscurelVersion != Version || m.CreatedAt.Year() != 2026 || !m.UpdatedAt.After(m.CreatedAt) {
		t.Errorf("manifest after upgrade: %+v", m)
	}
	var body, context string
	var path2 string
	var page int
	if err := ix.cur.Load().db.QueryRow(`SELECT body, context, heading_path, page FROM blocks`).Scan(&body, &context, &path2, &page); err != nil {
		t.Fatal(err)
	}
	if body != "old body" || context != "" || path2 != "[]" || page != 0 {
		t.Errorf("old row reads back as body %q context %q heading_path %v page %d", body, context, path2, page)
	}
	// 0010 computed the old row's id as blockID does.
	var pub string
	if err := ix.cur.Load().db.QueryRow(`SELECT public_id FROM blocks`).Scan(&pub); err != nil ||
		pub != blockID("0123456789abcdef0123456789abcdef", "sha256:"+strings.Repeat("0", 64), 0, 8, "old body") {
		t.Errorf("old row's public_id %q, %v", pub, err)
	}
	var parent, heading, window, locator string
	if err := ix.cur.Load().db.QueryRow(`SELECT parent_id, heading, window_text, parent_locator FROM blocks`).Scan(&parent, &heading, &window, &locator); err != nil ||
		parent+heading+window+locator != "" {
		t.Errorf("old row's small-to-big columns: %q %q %q %q, %v", parent, heading, window, locator, err)
	}
	// The old block had no full-text rows: Open indexed it.
	if hits, err := ix.Search(ctx, "old body", nil); err != nil || len(hits) != 1 || hits[0].Body != "old body" {
		t.Errorf("old block after upgrade: %+v, %v", hits, err)
	}
	// It had no vectors: Open embedded it into the active set, as BLOBs.
	if st, err := ix.Stats(ctx); err != nil || st.Embeddings != 1 || st.EmbeddingSet != "hash/384" {
		t.Errorf("vectors after upgrade: %+v, %v", st, err)
	}
	var typ string
	ix.cur.Load().db.QueryRow(`SELECT data_type FROM information_schema.columns WHERE table_name = 'vectors_1' AND column_name = 'vector'`).Scan(&typ)
	if typ != "BLOB" {
		t.Errorf("vector column type %q, want BLOB", typ)
	}
	if hits, err := ix.Search(ctx, "old body", &SearchOptions{Mode: ModeDense}); err != nil || len(hits) != 1 {
		t.Errorf("dense search after upgrade: %+v, %v", hits, err)
	}
	var applied int
	ix.cur.Load().db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&applied)
	if applied != SchemaVersion {
		t.Errorf("%d migrations recorded, want %d", applied, SchemaVersion)
	}
	// New blocks take ids after the old one: the sequence survived.
	if _, err := ix.Ingest(ctx, Input{Source: "/new.md", Data: []byte("# New\n\nnew body\n")}); err != nil {
		t.Fatal(err)
	}
	var maxID int64
	ix.cur.Load().db.QueryRow(`SELECT max(block_id) FROM blocks`).Scan(&maxID)
	if maxID != 2 {
		t.Errorf("max block id %d, want 2", maxID)
	}
}

// TestEnsureColumnRepairs drops a column from a current file; the next open
// adds it back with its default, NOT NULL. (A column of blocks before
// public_id cannot be dropped: DuckDB refuses while the UNIQUE index
// depends on a later column. The test drops documents.reason; then makes
// blocks again without public_id, which the open computes.)
func TestEnsureColumnRepairs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(ctx, Input{Source: "/a.md", Data: []byte("# A\n\ntext\n")}); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := ix.cur.Load().db.QueryRow(`SELECT public_id FROM blocks`).Scan(&id); err != nil || len(id) != BlockIDLen {
		t.Fatalf("public_id %q, %v", id, err)
	}
	for _, stmt := range []string{
		`ALTER TABLE documents DROP COLUMN reason`,
		`CREATE TABLE blocks_copy AS SELECT * EXCLUDE (public_id) FROM blocks`,
		`DROP TABLE blocks`,
		`ALTER TABLE blocks_copy RENAME TO blocks`,
	} {
		if _, err := ix.cur.Load().db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	ix.Close()
	ix, err = Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var reason, nullable string
	if err := ix.cur.Load().db.QueryRow(`SELECT reason FROM documents`).Scan(&reason); err != nil || reason != "" {
		t.Fatalf("reason = %q, %v", reason, err)
	}
	ix.cur.Load().db.QueryRow(`SELECT is_nullable FROM information_schema.columns WHERE table_name = 'documents' AND column_name = 'reason'`).Scan(&nullable)
	if nullable != "NO" {
		t.Errorf("repaired column is nullable")
	}
	var again string
	if err := ix.cur.Load().db.QueryRow(`SELECT public_id FROM blocks`).Scan(&again); err != nil || again != id {
		t.Errorf("public_id after repair %q, %v; want %q", again, err, id)
	}
}

func TestRefuseNewerSchema(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	future := SchemaVersion + 1
	if _, err := ix.cur.Load().db.Exec(`INSERT INTO schema_migrations VALUES (?, '9999_future.sql', now()::TIMESTAMP)`, future); err != nil {
		t.Fatal(err)
	}
	path := ix.Path()
	ix.Close()
	before, _ := os.ReadFile(path)

	_, err = Open(ctx, dir, &Options{BlobURL: "mem://"})
	var se *SchemaError
	if !errors.Is(err, ErrSchemaTooNew) || !errors.As(err, &se) || se.File != future || se.Binary != SchemaVersion {
		t.Fatalf("err = %v, want a SchemaError for version %d", err, future)
	}
	for _, want := range []string{path, "go install github.com/escurel/escurel/cmd/escurel@latest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	after, _ := os.ReadFile(path)
	if len(before) == 0 || string(before) != string(after) {
		t.Error("refused open changed the file")
	}
	// rebuild reads the manifest first: it refuses too.
	if _, _, _, err := inspect(ctx, dir); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("Inspect of a newer file: err = %v", err)
	}
}

// Nothing may try the network: extensions are neither installed nor loaded
// on demand.
func TestNoExtensionAutoinstall(t *testing.T) {
	ix, err := Open(context.Background(), t.TempDir(), &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, setting := range []string{"autoinstall_known_extensions", "autoload_known_extensions"} {
		var v string
		if err := ix.cur.Load().db.QueryRow(`SELECT current_setting('` + setting + `')::VARCHAR`).Scan(&v); err != nil || v != "false" {
			t.Errorf("%s = %q, %v; want false", setting, v, err)
		}
	}
}

// DuckDB's buffer pool is capped (Options.MemoryLimit; automatic: after the
// open, autoMemoryFloor for a small file), not 80% of the
// machine, and its allocator flushes what it frees past 8 MB, not 128 MiB.
func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct{ opt, want string }{{"", "80.0 MiB"}, {"64MB", "61.0 MiB"}} {
		ix, err := Open(context.Background(), t.TempDir(), &Options{BlobURL: "mem://", MemoryLimit: tc.opt})
		if err != nil {
			t.Fatal(err)
		}
		var v, flush, bulk string
		ix.cur.Load().db.QueryRow(`SELECT current_setting('memory_limit'), current_setting('allocator_flush_threshold'),
			current_setting('allocator_bulk_deallocation_flush_threshold')`).Scan(&v, &flush, &bulk)
		ix.Close()
		if v != tc.want {
			t.Errorf("MemoryLimit %q: memory_limit = %q, want %q", tc.opt, v, tc.want)
		}
		if flush != "7.6 MiB" || bulk != "7.6 MiB" {
			t.Errorf("allocator flush thresholds %q, %q; want 7.6 MiB", flush, bulk)
		}
	}
	if _, err := Open(context.Background(), t.TempDir(), &Options{BlobURL: "mem://", MemoryLimit: "lots"}); err == nil {
		t.Error("a bad memory limit was accepted")
	}
}

// The opens that read an index file without an Index (inspect,
// rowRecords) cap DuckDB's memory as an Index does, not at DuckDB's
// default of 80 % of the machine's memory.
func TestSideDSNMemoryLimit(t *testing.T) {
	db, err := sql.Open("duckdb", sideDSN(filepath.Join(t.TempDir(), "side.duckdb")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(`SELECT current_setting('memory_limit')`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "244.1 MiB" {
		t.Errorf("memory_limit = %q, want 244.1 MiB (DefaultMemoryLimit)", v)
	}
}

// An index of schema 15 keeps its deletes' tombstones and document-frequency
// changes in fts_tombstones and fts_df_deltas (a row per block, a row per
// term and delete); 0016 adds fts_removals (a row per delete) and leaves
// those rows where they are. Such a file opens with the same full-text
// statistics and search results as the same deletes made by this
// binary, deletes go on (into fts_removals), and a compaction empties
// all three tables.
func TestMigrateRemovalsFrom15(t *testing.T) {
	ctx := context.Background()
	var ins []Input
	for i := range 40 {
		ins = append(ins, Input{Source: fmt.Sprintf("/m%02d.md", i),
			Data: []byte(fmt.Sprintf("# Doc %d\n\nshared words here, term%d and term%d, more shared text.\n", i, i%7, i%5))})
	}
	gone := []string{"/m03.md", "/m10.md", "/m17.md"} // three deletes, terms in common
	build := func(dir string) *Index {
		ix, err := Open(ctx, dir, &Options{Embedder: embed.None})
		if err != nil {
			t.Fatal(err)
		}
		if _, errs, err := ix.IngestBatch(ctx, ins); err != nil || errors.Join(errs...) != nil {
			t.Fatal(err, errs)
		}
		return ix
	}
	search := func(ix *Index) []string {
		hits, err := ix.Search(ctx, "shared term3 term2 doc", &SearchOptions{K: 50})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, fmt.Sprintf("%s %.6f", h.Source, h.Score))
		}
		return out
	}
	stats := func(ix *Index) fts.Stats {
		st, err := ix.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.FullText
	}

	// The deletes as this binary makes them.
	ix := build(t.TempDir())
	for _, src := range gone {
		if _, err := ix.Delete(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	want, wantStats := search(ix), stats(ix)
	if wantStats.Tombstones != 3 {
		t.Fatalf("full-text stats %+v: want 3 tombstones (a compaction ran: the test proves nothing)", wantStats)
	}
	var removals int
	ix.cur.Load().db.QueryRow(`SELECT count(*) FROM fts_removals`).Scan(&removals)
	if removals != 3 {
		t.Errorf("%d fts_removals rows, want 3 (one per delete)", removals)
	}
	ix.Close()

	// The same deletes as schema 15 wrote them: the blocks' rows deleted,
	// their terms (the text re-analyzed) as delta rows, one per term and
	// delete, and a tombstone row per block; schema 16 not applied.
	dir := t.TempDir()
	ix = build(dir)
	s := ix.cur.Load()
	var stmts []string
	for n, src := range gone {
		id := blobstore.DocID(src)
		blocks, err := s.analyzedBlocks(ctx, s.db, `b.doc_id = ?`, id)
		if err != nil || len(blocks) == 0 {
			t.Fatal(len(blocks), err)
		}
		for _, b := range blocks {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO fts_tombstones VALUES (%d)`, b.ID))
			for f, terms := range b.Terms {
				for _, term := range terms {
					stmts = append(stmts, fmt.Sprintf(`INSERT INTO v15_terms VALUES (%d, %d, %d, '%s')`, n, b.ID, f, term))
				}
			}
		}
		stmts = append(stmts, `DELETE FROM blocks WHERE doc_id = '`+id+`'`, `DELETE FROM documents WHERE doc_id = '`+id+`'`)
	}
	ix.Close()
	gen, _, err := layout.Current(dir)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, filepath.Join(dir, gen, layout.FileName))
	stmts = append([]string{`CREATE TEMP TABLE v15_terms (del INTEGER, block BIGINT, field INTEGER, term VARCHAR)`}, stmts...)
	stmts = append(stmts,
		`INSERT INTO fts_df_deltas SELECT t.term_id, -count(DISTINCT v.block), -count(DISTINCT v.block) FILTER (WHERE v.field = 0),
			-count(DISTINCT v.block) FILTER (WHERE v.field = 1) FROM v15_terms v JOIN fts_terms t ON t.term = v.term GROUP BY v.del, t.term_id`,
		`DROP TABLE fts_removals`,
		`DELETE FROM schema_migrations WHERE version >= 16`)
	for _, stmt := range stmts {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	var repeated int
	db.QueryRow(`SELECT count(*) - count(DISTINCT term_id) FROM fts_df_deltas`).Scan(&repeated)
	if repeated == 0 {
		t.Fatal("no term has two delta rows: the sum over deletes is not tested")
	}
	db.Close()

	ix, err = Open(ctx, dir, &Options{Embedder: embed.None})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if st, _ := ix.Stats(ctx); st.SchemaVersion != SchemaVersion {
		t.Errorf("schema version %d after open, want %d", st.SchemaVersion, SchemaVersion)
	}
	// 0017 made fts_image, 0018 dropped it (the image is a file now).
	var imageTables int
	ix.cur.Load().db.QueryRow(`SELECT count(*) FROM duckdb_tables() WHERE table_name = 'fts_image'`).Scan(&imageTables)
	if imageTables != 0 {
		t.Error("fts_image is still a table after 0018")
	}
	if got := stats(ix); got != wantStats {
		t.Errorf("full-text stats of the migrated file: %+v, want %+v", got, wantStats)
	}
	if diff := cmp.Diff(want, search(ix)); diff != "" {
		t.Errorf("search of the migrated file differs (-want +got):\n%s", diff)
	}
	if _, err := ix.Delete(ctx, "/m24.md"); err != nil {
		t.Fatal(err)
	}
	if got := stats(ix); got.Tombstones != 4 || got.Blocks != wantStats.Blocks-1 {
		t.Errorf("after one more delete: %+v (before it %+v)", got, wantStats)
	}
	afterDelete := search(ix)
	if err := ix.cur.Load().compact(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stats(ix); got.Tombstones != 0 {
		t.Errorf("after a compaction: %+v", got)
	}
	if diff := cmp.Diff(afterDelete, search(ix)); diff != "" {
		t.Errorf("search after the compaction differs (-before +after):\n%s", diff)
	}
	var left int
	ix.cur.Load().db.QueryRow(`SELECT (SELECT count(*) FROM fts_removals) + (SELECT count(*) FROM fts_tombstones) +
		(SELECT count(*) FROM fts_df_deltas)`).Scan(&left)
	if left != 0 {
		t.Errorf("%d removal, tombstone and delta rows left after the compaction", left)
	}
}
