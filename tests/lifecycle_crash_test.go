package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/rebuild"
)

// Close while an ingest is between its prepare (holding a reference) and
// its commit (waiting for writeMu) must not deadlock: Close holds writeMu
// while it waits for the state's references.
func TestCloseDuringIngestPrepare(t *testing.T) {
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 16 })
	dir := t.TempDir()
	ix, err := index.Open(context.Background(), dir, &index.Options{Embedder: mustSpec(t, "ollama:m?timeout=400ms&retries=3&url="+srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(context.Background(), index.Input{Source: "/a.md", Data: []byte("# A\n\nfirst\n")}); err != nil {
		t.Fatal(err)
	}
	srv.Set(func(s *modelserver.Server) { s.Hang = true })
	ingested := make(chan error, 1)
	go func() {
		_, err := ix.Ingest(context.Background(), index.Input{Source: "/b.md", Data: []byte("# B\n\nsecond\n")})
		ingested <- err
	}()
	time.Sleep(150 * time.Millisecond) // the ingest is in its model call, holding a reference
	closed := make(chan error, 1)
	go func() { closed <- ix.Close() }()
	time.Sleep(100 * time.Millisecond) // Close holds writeMu, waits for the reference
	srv.Set(func(s *modelserver.Server) { s.Hang = false })
	deadline := time.After(15 * time.Second)
	for n := 0; n < 2; n++ {
		select {
		case err := <-ingested:
			t.Logf("ingest: %v", err)
		case err := <-closed:
			t.Logf("close: %v", err)
		case <-deadline:
			t.Fatal("deadlock: Close waits for the ingest's reference while holding writeMu, and the ingest waits for writeMu")
		}
	}
}

// A rebuild into a directory without an index (from an existing blob
// store) that is killed mid-fill leaves one generation without CURRENT.
// The next Open must not adopt and serve it: it holds only part of the
// documents. It starts an empty index instead (a rebuild fills it). The crash image is a copy of the generation taken at the
// first progress line.
func TestKilledFreshRebuildNotServed(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	e.ix.Close()
	store := blobsOf(e)
	fresh, crashed := t.TempDir(), t.TempDir()
	_, err := rebuild.Run(context.Background(), rebuild.Options{Dir: fresh, Blobs: store, Batch: 1,
		Progress: func(done, total int) {
			if done != 1 {
				return
			}
			src := filepath.Join(fresh, "gen-000001")
			dst := filepath.Join(crashed, "gen-000001")
			os.MkdirAll(dst, 0o755)
			entries, _ := os.ReadDir(src)
			for _, en := range entries {
				b, err := os.ReadFile(filepath.Join(src, en.Name()))
				if err != nil {
					t.Error(err)
				}
				os.WriteFile(filepath.Join(dst, en.Name()), b, 0o644)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(context.Background(), crashed, &index.Options{Blobs: store})
	if err != nil {
		t.Logf("open refused the unfinished generation: %v", err)
		return
	}
	defer ix.Close()
	st, err := ix.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := store.Records(context.Background())
	if st.Documents != 0 {
		t.Errorf("open adopted and published the killed rebuild's unfinished generation: %s serves %d of %d documents",
			ix.Generation(), st.Documents, len(recs))
	}
}

// A live rebuild that publishes its generation but cannot switch to it
// leaves the process serving the old one: searches go on, and writes are
// refused (they would land in a generation the directory no longer
// serves) until a Reload succeeds.
func TestFailedSwitchRefusesWritesUntilReload(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	hidden := filepath.Join(t.TempDir(), "hidden.duckdb")
	var moved string
	layout.AfterPublish = func(dir, gen string) {
		if dir == e.dir {
			moved = layout.GenerationPath(dir, gen)
			if err := os.Rename(moved, hidden); err != nil {
				t.Error(err)
			}
		}
	}
	_, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix})
	layout.AfterPublish = nil
	if err == nil || !strings.Contains(err.Error(), "still serves gen-000001") {
		t.Fatalf("rebuild: %v, want the failed switch reported", err)
	}
	if hits := e.search("connection timeout", 3); len(hits) == 0 {
		t.Error("searches stopped after the failed switch")
	}
	if _, err := e.ix.Ingest(context.Background(), index.Input{Source: "/late.md", Data: []byte("# Late\n\nlate words\n")}); err == nil || !strings.Contains(err.Error(), "until Reload") {
		t.Fatalf("ingest after the failed switch: %v, want it refused", err)
	}
	if _, err := e.ix.Delete(context.Background(), "/docs/notes.txt"); err == nil {
		t.Fatal("delete after the failed switch was taken")
	}
	if err := os.Rename(hidden, moved); err != nil {
		t.Fatal(err)
	}
	if err := e.ix.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g := e.ix.Generation(); g != "gen-000002" {
		t.Fatalf("after Reload: %s", g)
	}
	e.ingest("/late.md", "# Late\n\nlate words\n")
	e.digest()
}
