package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/s3test"
)

// parquetRows counts the rows of a Parquet file, and those whose column
// col holds needle, read back with DuckDB.
func parquetRows(t *testing.T, path, col, needle string) (all, matching int) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := `SELECT count(*), count(*) FILTER (WHERE ` + col + ` LIKE '%' || ? || '%') FROM read_parquet('` + path + `')`
	if err := db.QueryRow(q, needle).Scan(&all, &matching); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return all, matching
}

// escurel export --parquet: to a directory at the default clearance
// (public: the restricted document is left out, and counted), to a bucket
// (s3://bucket/prefix) with --clearance restricted, and through a running
// server; usage mistakes are refused.
func TestExportCommand(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	blobs := srv.Bucket(t, "exp", "blobs/")
	idx, src := filepath.Join(t.TempDir(), "idx"), t.TempDir()
	os.WriteFile(filepath.Join(src, "soup.md"), []byte("# Soup\n\nLentil soup for everyone.\n"), 0o644)
	os.WriteFile(filepath.Join(src, "memo.md"), []byte("---\nsensitivity: restricted\n---\n# Memo\n\nLentil zqsecret plans.\n"), 0o644)
	mustRun(t, "--index", idx, "--blobs", blobs, "ingest", src)

	out := filepath.Join(t.TempDir(), "out")
	got := mustRun(t, "--index", idx, "export", "--parquet", out)
	if !strings.Contains(got, "exported 1 document, 1 block, 1 vector (hash/384)") || !strings.Contains(got, "1 document above public left out") {
		t.Errorf("export:\n%s", got)
	}
	if n, secret := parquetRows(t, filepath.Join(out, "blocks.parquet"), "body", "zqsecret"); n != 1 || secret != 0 {
		t.Errorf("public export: %d blocks, %d restricted", n, secret)
	}
	if fi, err := os.Stat(filepath.Join(out, "blocks.parquet")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("blocks.parquet: %v %v, want mode 0600", fi.Mode(), err)
	}

	// To a bucket, under a path prefix.
	dest := strings.Replace(srv.Bucket(t, "exports", ""), "s3://exports?", "s3://exports/run1?", 1)
	got = mustRun(t, "--index", idx, "export", "--clearance", "restricted", "--json", "--parquet", dest)
	var res exportOutput
	if err := json.Unmarshal([]byte(got), &res); err != nil || res.Documents != 2 || res.Withheld != 0 || len(res.Files) != 3 {
		t.Errorf("export --json: %v\n%s", err, got)
	}
	bucket := openBucket(t, srv.Bucket(t, "exports", ""))
	local := t.TempDir()
	for _, name := range []string{index.ExportDocumentsFile, index.ExportBlocksFile, index.ExportVectorsFile} {
		data, err := bucket.ReadAll(ctx, "run1/"+name)
		if err != nil {
			t.Fatalf("%s in the bucket: %v", name, err)
		}
		os.WriteFile(filepath.Join(local, name), data, 0o600)
	}
	if n, secret := parquetRows(t, filepath.Join(local, "blocks.parquet"), "body", "zqsecret"); n != 2 || secret != 1 {
		t.Errorf("restricted export from the bucket: %d blocks, %d restricted; want 2, 1", n, secret)
	}

	// Through escurel serve, which holds the index.
	startServe(t, idx)
	out2 := filepath.Join(t.TempDir(), "out2")
	if got := mustRun(t, "--index", idx, "export", "--parquet", "file://"+out2); !strings.Contains(got, "exported 1 document") {
		t.Errorf("export through serve:\n%s", got)
	}
	if n, _ := parquetRows(t, filepath.Join(out2, "documents.parquet"), "source", "soup"); n != 1 {
		t.Errorf("export through serve: %d documents", n)
	}

	for _, args := range [][]string{
		{"export"},
		{"export", "--parquet", out, "--clearance", "secret"},
		{"export", "--parquet", "mem://"},
		{"export", "--parquet", out, "extra"},
	} {
		if _, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...); code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, code, errOut)
		}
	}
}
