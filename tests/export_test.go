package tests

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/testdocs"
)

// exportDocs ingests documents at every level, in three formats (one PDF
// of two pages, so pages are not all 0).
func exportDocs(e *env) {
	e.t.Helper()
	ctx := context.Background()
	ins := []index.Input{
		{Source: "/pub/guide.md", Data: []byte("# Guide\n\nInstall the egg-laying toolchain.\n\n## Tuning\n\nTune the bill sensors.\n"), Meta: map[string]any{"team": "platform"}},
		{Source: "/pub/notes.txt", Data: []byte("Loose notes about sensors.\n\nA second paragraph about 'quotes'.\n")},
		{Source: "/pub/paper.pdf", Data: testdocs.PDF([]string{"Page one talks about sensors.", "Page two talks about bills."}, false)},
		{Source: "/int/plan.md", Data: []byte("# Plan\n\nThe internal zqinternal roadmap.\n"), Sensitivity: index.Internal},
		{Source: "/res/memo.md", Data: []byte("# Memo\n\nThe restricted zqsecret merger.\n"), Sensitivity: index.Restricted},
	}
	for _, in := range ins {
		if _, err := e.ix.Ingest(ctx, in); err != nil {
			e.t.Fatalf("ingest %s: %v", in.Source, err)
		}
	}
}

// rowsOf runs query on db and returns every row, each column formatted
// with %v.
func rowsOf(t *testing.T, db *sql.DB, query string) [][]string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = fmt.Sprintf("%v", v)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The Parquet export read back with DuckDB reproduces every block row of
// the index (the rows verify digests: public id, document, position, body,
// context, heading path, page, byte spans), every document row and every
// vector; each Markdown block's body is its blob's bytes at its span; the
// columns are the documented ones (a golden list); a lower clearance
// leaves out the documents above it with their blocks and vectors.
func TestExportParquet(t *testing.T) {
	e := newEnv(t, index.Options{})
	exportDocs(e)
	ctx := context.Background()
	all, pub := filepath.Join(t.TempDir(), "all"), filepath.Join(t.TempDir(), "pub")
	res, err := e.ix.Export(ctx, all, &index.ExportOptions{Clearance: index.Restricted})
	if err != nil {
		t.Fatal(err)
	}
	if res.Documents != 5 || res.Blocks == 0 || res.Vectors != res.Blocks || res.EmbeddingSet != "hash/384" || res.Dim != 384 {
		t.Errorf("export result %+v", res)
	}
	resPub, err := e.ix.Export(ctx, pub, nil) // default clearance: public
	if err != nil {
		t.Fatal(err)
	}
	if resPub.Documents != 3 {
		t.Errorf("public export: %d documents, want 3", resPub.Documents)
	}
	if _, err := e.ix.Export(ctx, pub, &index.ExportOptions{Clearance: "secret"}); err == nil || !strings.Contains(err.Error(), "clearance") {
		t.Errorf("export with clearance secret: %v", err)
	}
	digest := e.digest()
	path := e.ix.Path()
	e.ix.Close()
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pq := func(dir, name string) string {
		return "read_parquet('" + filepath.Join(dir, name) + "')"
	}

	// Schema: the golden list.
	for name, want := range index.ExportColumns {
		var got []string
		for _, r := range rowsOf(t, db, `SELECT column_name || ' ' || column_type FROM (DESCRIBE SELECT * FROM `+pq(all, name)+`)`) {
			got = append(got, r[0])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s columns:\n got %q\nwant %q", name, got, want)
		}
	}
	golden := map[string][]string{
		index.ExportDocumentsFile: {"doc_id VARCHAR", "source VARCHAR", "title VARCHAR", "media_type VARCHAR", "language VARCHAR",
			"sensitivity VARCHAR", "status VARCHAR", "reason VARCHAR", "extractor VARCHAR", "pages INTEGER", "bytes BIGINT",
			"blob_id VARCHAR", "ingested_at TIMESTAMP", "meta VARCHAR", "meta_given VARCHAR", "block_count BIGINT"},
		index.ExportBlocksFile: {"block_id VARCHAR", "doc_id VARCHAR", "ordinal INTEGER", "body VARCHAR", "context VARCHAR",
			"heading_path VARCHAR", "page INTEGER", "byte_start BIGINT", "byte_end BIGINT"},
		index.ExportVectorsFile: {"block_id VARCHAR", "embedding_set VARCHAR", "vector FLOAT[]"},
	}
	if !reflect.DeepEqual(index.ExportColumns, golden) {
		t.Errorf("ExportColumns changed (the export format is a promise):\n%q", index.ExportColumns)
	}

	// Every block row, as the index holds it.
	want := rowsOf(t, db, `SELECT public_id, doc_id, ord, body, context, heading_path, page, byte_start, byte_end FROM blocks ORDER BY doc_id, ord`)
	got := rowsOf(t, db, `SELECT * FROM `+pq(all, index.ExportBlocksFile))
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("exported blocks:\n%q\nwant the index's rows\n%q", got, want)
	}
	pages := rowsOf(t, db, `SELECT DISTINCT page FROM `+pq(all, index.ExportBlocksFile)+` ORDER BY page`)
	if len(pages) < 3 {
		t.Errorf("pages %q: want 0 and the PDF's 1 and 2", pages)
	}
	want = rowsOf(t, db, `SELECT doc_id, source, title, media_type, language, sensitivity, status, reason, extractor, pages, bytes, blob_id, ingested_at, meta, meta_given,
		(SELECT count(*) FROM blocks b WHERE b.doc_id = d.doc_id) FROM documents d ORDER BY doc_id`)
	if got := rowsOf(t, db, `SELECT * FROM `+pq(all, index.ExportDocumentsFile)); !reflect.DeepEqual(got, want) {
		t.Errorf("exported documents:\n%q\nwant\n%q", got, want)
	}
	var set int
	db.QueryRow(`SELECT set_id FROM embedding_sets WHERE name = 'hash/384'`).Scan(&set)
	// The index stores each vector as a BLOB of little-endian float32s;
	// the export writes FLOAT[384].
	want = nil
	vrows, err := db.Query(fmt.Sprintf(`SELECT b.public_id, v.vector FROM vectors_%d v JOIN blocks b USING (block_id) ORDER BY b.doc_id, b.ord`, set))
	if err != nil {
		t.Fatal(err)
	}
	for vrows.Next() {
		var id string
		var b []byte
		if err := vrows.Scan(&id, &b); err != nil || len(b) != 4*384 {
			t.Fatalf("stored vector of %d bytes, want %d: %v", len(b), 4*384, err)
		}
		vec := make([]float32, 384)
		for i := range vec {
			vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		want = append(want, []string{id, "hash/384", fmt.Sprintf("%v", vec)})
	}
	if err := vrows.Err(); err != nil {
		t.Fatal(err)
	}
	vrows.Close()
	if got := rowsOf(t, db, `SELECT * FROM `+pq(all, index.ExportVectorsFile)); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("exported vectors differ from the index's (%d rows, want %d)", len(got), len(want))
	}

	// Verbatim: a Markdown block's body is its blob's bytes at its span.
	blobs, err := openStore(filepath.Join(e.dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	for _, r := range rowsOf(t, db, `SELECT d.blob_id, b.byte_start, b.byte_end, b.body FROM `+pq(all, index.ExportBlocksFile)+` b
			JOIN `+pq(all, index.ExportDocumentsFile)+` d USING (doc_id) WHERE d.media_type = 'text/markdown'`) {
		data, err := blobs.Get(ctx, r[0])
		if err != nil {
			t.Fatal(err)
		}
		var start, end int
		fmt.Sscan(r[1], &start)
		fmt.Sscan(r[2], &end)
		if string(data[start:end]) != r[3] {
			t.Errorf("block body %q is not blob[%d:%d] = %q", r[3], start, end, data[start:end])
		}
	}

	// Public clearance: nothing of the internal and restricted documents.
	for _, name := range []string{index.ExportDocumentsFile, index.ExportBlocksFile, index.ExportVectorsFile} {
		var n int
		col := "doc_id"
		if name == index.ExportVectorsFile {
			col = "(SELECT doc_id FROM " + pq(all, index.ExportBlocksFile) + " b WHERE b.block_id = v.block_id)"
		}
		q := `SELECT count(*) FROM ` + pq(pub, name) + ` v WHERE ` + col + ` NOT IN (SELECT doc_id FROM documents WHERE sensitivity = 'public')`
		if err := db.QueryRow(q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s of the public export: %d rows above public (%v)", name, n, err)
		}
	}
	var leaked int
	db.QueryRow(`SELECT count(*) FROM ` + pq(pub, index.ExportBlocksFile) + ` WHERE body LIKE '%zqsecret%' OR body LIKE '%zqinternal%'`).Scan(&leaked)
	if leaked != 0 || resPub.Blocks != int64(len(rowsOf(t, db, `SELECT 1 FROM blocks JOIN documents USING (doc_id) WHERE sensitivity = 'public'`))) {
		t.Errorf("public export: %d blocks above public, %d blocks", leaked, resPub.Blocks)
	}
	db.Close()
	e.open()
	if d := e.digest(); d != digest {
		t.Errorf("the export changed the index: digest %s, was %s", d, digest)
	}
}
