package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/escurel/escurel/embed"
)

// exposed returns the paths under dir (dir itself aside) that others than
// the owner could read or enter: an entry with group or other permission
// bits whose every parent below dir is itself private.
func exposed(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			out = append(out, p+" "+info.Mode().String())
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return fs.SkipDir // private: what it holds is out of reach
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An export into an existing directory others can read (0755) never shows
// the documents' text to them, even while DuckDB writes a file (under the
// usual umask 022), and leaves nothing behind when it fails midway.
func TestExportFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ix := openFixed(t)
	ctx := context.Background()
	for i, text := range []string{"# One\n\nThe first zqexport document.\n", "# Two\n\nThe second one.\n"} {
		if _, err := ix.Ingest(ctx, Input{Source: "/d/" + string(rune('a'+i)) + ".md", Data: []byte(text)}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var seen []string
	exportCopied = func(name string) error {
		seen = append(seen, name)
		if bad := exposed(t, dir); len(bad) > 0 {
			t.Errorf("after the COPY of %s, readable by others: %q", name, bad)
		}
		return nil
	}
	defer func() { exportCopied = nil }()
	res, err := ix.Export(ctx, dir, &ExportOptions{Clearance: Restricted})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || res.Vectors == 0 {
		t.Fatalf("copied %q, %d vectors: want all three files", seen, res.Vectors)
	}
	if bad := exposed(t, dir); len(bad) > 0 {
		t.Errorf("after the export, readable by others: %q", bad)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	want := []string{ExportBlocksFile, ExportDocumentsFile, ExportVectorsFile}
	if len(names) != 3 || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Errorf("export directory holds %q, want %q", names, want)
	}

	// A failure at each file leaves no temporary file behind, and the
	// earlier export's files whole.
	for _, failAt := range want {
		boom := errors.New("boom")
		exportCopied = func(name string) error {
			if name == failAt {
				return boom
			}
			return nil
		}
		if _, err := ix.Export(ctx, dir, nil); !errors.Is(err, boom) {
			t.Fatalf("export failing at %s: %v", failAt, err)
		}
		ents, _ := os.ReadDir(dir)
		var left []string
		for _, e := range ents {
			left = append(left, e.Name())
		}
		sort.Strings(left)
		if len(left) != 3 || left[0] != want[0] || left[1] != want[1] || left[2] != want[2] {
			t.Errorf("after an export failing at %s, the directory holds %q, want %q", failAt, left, want)
		}
	}
}

// An embedder spec with prefixes names its set with URL escapes
// ("query%3A+"); the vectors file's embedding_set column holds that name
// exactly, whether export reads in one range or several (review 7 M1:
// the name went through fmt.Sprintf and came out as "%!A(MISSING)").
func TestExportPrefixedEmbeddingSet(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(ctx, t.TempDir(), &Options{BlobURL: "mem://", Embedder: embed.Spec{Model: "hash", Dim: 8, QueryPrefix: "query: ", DocumentPrefix: "passage: "}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var ins []Input
	for i := range 40 {
		ins = append(ins, Input{Source: fmt.Sprintf("mem://p%d", i), MediaType: "text/plain", Data: []byte(fmt.Sprintf("hello world %d", i))})
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	saved := readChunkBytes
	defer func() { readChunkBytes = saved }()
	for _, chunk := range []int64{saved, 64} {
		readChunkBytes = chunk
		out := t.TempDir()
		res, err := ix.Export(ctx, out, &ExportOptions{Clearance: "restricted"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.EmbeddingSet, "%3A") {
			t.Fatalf("embedding set %q: no escape to test", res.EmbeddingSet)
		}
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		var n, bad int
		if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE embedding_set <> ?) FROM read_parquet(?)`, res.EmbeddingSet, filepath.Join(out, ExportVectorsFile)).Scan(&n, &bad); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if n != 40 || bad != 0 {
			t.Errorf("chunk %d: %d vectors, %d with an embedding_set other than %q", chunk, n, bad, res.EmbeddingSet)
		}
	}
}
