package tests

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/packtest"
	"github.com/escurel/escurel/rebuild"
)

// Everything an index and its file:// blob store create is private to the
// owner, whatever the umask lets through: files 0600, directories 0700
// (issue 19, item 7: another local user read a restricted document's raw
// bytes). The WAL and DuckDB's other files lie in a generation directory
// that only the owner may enter.
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the common default, which let others read
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "idx")
	store := filepath.Join(t.TempDir(), "store", "blobs") // outside the index: its own root
	ix, err := index.Open(ctx, dir, &index.Options{BlobURL: (&url.URL{Scheme: "file", Path: store}).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i, text := range []string{"# Secret\n\nmerger plans\n", "# Other\n\ntext\n"} {
		sens := index.Public
		if i == 0 {
			sens = index.Restricted
		}
		if _, err := ix.Ingest(ctx, index.Input{Source: filepath.Join("/docs", string(rune('a'+i))+".md"), Data: []byte(text), Sensitivity: sens}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.IngestFiles(ctx, []string{writeDocs(t)}, index.IngestOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Run(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Purge(ctx, "/docs/a.md"); err != nil { // a generation written by COPY FROM DATABASE
		t.Fatal(err)
	}
	n := 0
	for _, root := range []string{dir, filepath.Dir(store)} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == filepath.Dir(store) {
				return nil // the test's own directory
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			} else if d.Name() != "index.duckdb" && strings.HasPrefix(filepath.Base(filepath.Dir(p)), "gen-") {
				// DuckDB's own files (the WAL) follow the umask, which a
				// library leaves alone: the 0700 generation directory,
				// checked too, keeps them from others.
				want = 0o644
			}
			if fi.Mode().Perm()&^want != 0 {
				t.Errorf("%s: mode %v, want at most %v", p, fi.Mode().Perm(), want)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Fatalf("only %d files and directories checked", n)
	}
}

// writeDocs writes two Markdown files into a new directory and returns it.
func writeDocs(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	for name, text := range map[string]string{"one.md": "# One\n\nfirst\n", "two.md": "# Two\n\nsecond\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// A live rebuild while the same index ingests a directory: listing the
// record store meets the batches' temporary files being renamed, and once
// failed every time (issue 19, item 2). Every rebuild succeeds, and the
// index ends complete and verified.
func TestLiveRebuildDuringBulkIngest(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	const n = 1500
	for i := range n {
		text := fmt.Sprintf("# Note %d\n\nplatypus %d fact number %d\n", i, i, i*7)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("n%04d.md", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, index.Options{})
	e.ingest("/seed.md", "# Seed\n\nfirst\n")
	done := make(chan error, 1)
	go func() {
		_, err := e.ix.IngestFiles(ctx, []string{src}, index.IngestOptions{})
		done <- err
	}()
	rebuilds := 0
	for finished := false; !finished; {
		if _, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix}); err != nil {
			t.Fatalf("rebuild %d during the ingest: %v", rebuilds+1, err)
		}
		rebuilds++
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
	}
	v, err := e.ix.Verify(ctx, nil)
	if err != nil || !v.OK() || v.Documents != n+1 {
		t.Fatalf("after %d rebuilds: %+v, %v; want %d documents, OK", rebuilds, v, err, n+1)
	}
	t.Logf("%d live rebuilds during the ingest of %d files", rebuilds, n)
}

// The crash-and-repair loop (issue 19): for each damage to a fresh index
// (a blob, a record, the generation file, CURRENT, the WAL, leftover
// temporary files and an unfinished generation), the damage is reported
// (Verify, deep; Open's ErrDamaged; GC's dry run), and one rebuild, or
// gc, returns the index to its clean digest with no other step. It logs
// the tally: faults tried, survived, documents lost. The blob and record
// faults run on each layout (a packed entry's bytes damaged, a packed
// blob gone); the others on the default layout, packs.
func TestCrashAndRepairLoop(t *testing.T) {
	for _, packs := range []bool{true, false} {
		t.Run(map[bool]string{false: "loose", true: "packs"}[packs], func(t *testing.T) { testCrashAndRepairLoop(t, packs) })
	}
}

func testCrashAndRepairLoop(t *testing.T, packs bool) {
	ctx := context.Background()
	src := writeDocs(t)
	secret := filepath.Join(src, "secret.md")
	if err := os.WriteFile(secret, []byte("# Merger\n\nplatypus merger plans\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := func(dir, source string) string {
		return filepath.Join(dir, "blobs", "documents", blobstore.DocID(source)+".json")
	}
	blob := func(t *testing.T, dir, source string) string {
		s, err := openStore(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r, err := s.GetRecord(ctx, blobstore.DocID(source))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "blobs", "blobs", "sha256", strings.TrimPrefix(r.BlobID, "sha256:"))
	}
	gen := func(dir string) string { return filepath.Join(dir, "gen-000001") }
	flip := func(p string) error {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		data[len(data)/2] ^= 0x20
		return os.WriteFile(p, data, 0o600)
	}
	type fault struct {
		name   string
		damage func(t *testing.T, dir string) error
		gc     bool // repaired by gc, not rebuild
	}
	packed := func(t *testing.T, dir, source string, kind byte) (string, int64, int64) {
		s, err := openStore(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r, err := s.GetRecord(ctx, blobstore.DocID(source))
		if err != nil {
			t.Fatal(err)
		}
		key, _ := hex.DecodeString(r.DocID)
		if kind == 'b' {
			key, _ = hex.DecodeString(strings.TrimPrefix(r.BlobID, "sha256:"))
		}
		return packtest.PackedEntry(t, filepath.Join(dir, "blobs"), kind, key)
	}
	flipPacked := func(t *testing.T, dir, source string, kind byte) error {
		p, off, n := packed(t, dir, source, kind)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		data[off+n/2] ^= 0x20
		return os.WriteFile(p, data, 0o600)
	}
	packFaults := []fault{
		{"packed blob byte flipped", func(t *testing.T, dir string) error { return flipPacked(t, dir, filepath.Join(src, "one.md"), 'b') }, false},
		{"packed blob gone", func(t *testing.T, dir string) error {
			s, err := openStore(filepath.Join(dir, "blobs"))
			if err != nil {
				return err
			}
			defer s.Close()
			r, err := s.GetRecord(ctx, blobstore.DocID(filepath.Join(src, "two.md")))
			if err != nil {
				return err
			}
			_, err = s.Repack(ctx, blobstore.RepackOptions{DropBlobs: []string{r.BlobID}, MinDead: 2})
			return err
		}, false},
		{"packed record byte flipped", func(t *testing.T, dir string) error { return flipPacked(t, dir, filepath.Join(src, "one.md"), 'r') }, false},
		{"packed restricted record byte flipped", func(t *testing.T, dir string) error { return flipPacked(t, dir, secret, 'r') }, false},
	}
	faults := []fault{
		{"blob byte flipped", func(t *testing.T, dir string) error { return flip(blob(t, dir, filepath.Join(src, "one.md"))) }, false},
		{"blob missing", func(t *testing.T, dir string) error { return os.Remove(blob(t, dir, filepath.Join(src, "two.md"))) }, false},
		{"record truncated", func(t *testing.T, dir string) error { return os.Truncate(rec(dir, filepath.Join(src, "one.md")), 40) }, false},
		{"record empty", func(t *testing.T, dir string) error { return os.WriteFile(rec(dir, secret), nil, 0o600) }, false},
		{"record binary", func(t *testing.T, dir string) error {
			return os.WriteFile(rec(dir, filepath.Join(src, "two.md")), []byte{0, 0xff, 0xfe, 7}, 0o600)
		}, false},
		{"record sensitivity garbled", func(t *testing.T, dir string) error {
			data, err := os.ReadFile(rec(dir, secret))
			if err != nil {
				return err
			}
			return os.WriteFile(rec(dir, secret), []byte(strings.Replace(string(data), `"restricted"`, `"publicx"`, 1)), 0o600)
		}, false},
		{"generation file truncated", func(t *testing.T, dir string) error {
			return os.Truncate(filepath.Join(gen(dir), "index.duckdb"), 4096)
		}, false},
		{"generation file garbage", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(gen(dir), "index.duckdb"), []byte("not a database"), 0o600)
		}, false},
		{"CURRENT garbage", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("\x00garbage"), 0o600)
		}, false},
		{"CURRENT missing", func(t *testing.T, dir string) error { return os.Remove(filepath.Join(dir, "CURRENT")) }, false},
		{"WAL garbage", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(gen(dir), "index.duckdb.wal"), bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1024), 0o600)
		}, false},
		{"temporary files and an unfinished generation", func(t *testing.T, dir string) error {
			old := time.Now().Add(-48 * time.Hour)
			for _, p := range []string{
				filepath.Join(dir, "blobs", "documents", blobstore.DocID("/x")+".json.123.tmp"),
				filepath.Join(dir, "blobs", "blobs", "sha256", strings.Repeat("a", 64)+".456.tmp"),
				filepath.Join(dir, "CURRENT.789.tmp"),
				filepath.Join(dir, "gen-000007", "index.duckdb"),
			} {
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					return err
				}
				if err := os.WriteFile(p, []byte("left by a crash"), 0o600); err != nil {
					return err
				}
				os.Chtimes(p, old, old)
			}
			return nil
		}, true},
	}
	if packs {
		// The blob and record faults of the pack layout, and the others.
		faults = append(packFaults, faults[6:]...)
	} else {
		faults = faults[:6]
	}
	survived, lost := 0, 0
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "idx")
			// The layout asked for once; later opens read it from the store.
			ix, err := index.Open(ctx, dir, &index.Options{LooseBlobs: !packs})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ix.IngestFiles(ctx, []string{filepath.Join(src, "one.md"), filepath.Join(src, "two.md")}, index.IngestOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := ix.Ingest(ctx, index.Input{Source: secret, Data: mustRead(t, secret), Sensitivity: index.Restricted}); err != nil {
				t.Fatal(err)
			}
			v, err := ix.Verify(ctx, &index.VerifyOptions{Deep: true})
			if err != nil || !v.OK() {
				t.Fatalf("clean verify: %+v %v", v, err)
			}
			clean, docs := v.Digest, v.Documents
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.damage(t, dir); err != nil {
				t.Fatal(err)
			}
			// Reported.
			var report string
			if ix, err := index.Open(ctx, dir, nil); err != nil {
				report = err.Error()
				if !strings.Contains(report, "escurel rebuild") {
					t.Errorf("open does not point to escurel rebuild: %v", err)
				}
			} else {
				if f.gc {
					g, err := ix.GC(ctx, &index.GCOptions{DryRun: true, MinAge: -1})
					if err != nil {
						t.Fatal(err)
					}
					if len(g.TempFiles) < 3 || len(g.Generations) != 1 {
						t.Errorf("gc --dry-run: %+v", g)
					}
					report = fmt.Sprintf("gc: %d temporary files, %d generations", len(g.TempFiles), len(g.Generations))
				} else {
					v, err := ix.Verify(ctx, &index.VerifyOptions{Deep: true})
					if err != nil {
						report = err.Error()
					} else if v.OK() && v.Digest == clean && v.Documents == docs {
						// Open itself repaired it: the lone generation
						// made live again, a WAL that is not DuckDB's
						// discarded (a checkpoint ended every write).
						report = "healed by open: verify OK, the clean digest"
					} else if v.OK() {
						t.Errorf("verify reports nothing: %+v", v)
					} else {
						report = fmt.Sprintf("records without blobs %q, damaged blobs %d, damaged records %+v", v.RecordsWithoutBlobs, len(v.DamagedBlobs), v.DamagedRecords)
					}
					if hits, err := ix.Search(ctx, "platypus merger", &index.SearchOptions{K: 10}); err == nil {
						for _, h := range hits {
							if h.Source == secret {
								t.Errorf("a public search shows the restricted document: %+v", h)
							}
						}
					}
				}
				ix.Close()
			}
			t.Logf("reported: %s", report)
			// Repaired by one step.
			if f.gc {
				ix, err := index.Open(ctx, dir, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ix.GC(ctx, &index.GCOptions{MinAge: -1}); err != nil {
					t.Fatal(err)
				}
				ix.Close()
			} else {
				store, err := openStore(filepath.Join(dir, "blobs"))
				if err != nil {
					t.Fatal(err)
				}
				_, err = rebuild.Run(ctx, rebuild.Options{Dir: dir, Blobs: store})
				store.Close()
				if err != nil {
					t.Fatalf("rebuild: %v", err)
				}
			}
			ix, err = index.Open(ctx, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			v, err = ix.Verify(ctx, &index.VerifyOptions{Deep: true})
			if err != nil || !v.OK() || v.Digest != clean {
				t.Errorf("after the repair: %+v %v; want OK and the clean digest %s", v, err, clean)
			}
			if v != nil && v.Documents < docs {
				lost += int(docs - v.Documents)
			}
			if f.gc {
				for _, p := range []string{filepath.Join(dir, "CURRENT.789.tmp"), filepath.Join(dir, "gen-000007")} {
					if _, err := os.Stat(p); err == nil {
						t.Errorf("%s is left after gc", p)
					}
				}
			}
			if !t.Failed() {
				survived++
			}
		})
	}
	t.Logf("tally: %d faults tried, %d survived (reported and repaired to the clean digest), %d documents lost", len(faults), survived, lost)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
