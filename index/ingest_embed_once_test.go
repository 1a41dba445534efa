package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/modelserver"
)

// A batch prepared again within one ingest (DuckDB ran out of memory and
// the limit was raised; another writer changed one of its documents
// meanwhile) sends the embedder only the texts it has not embedded yet:
// with a paid model a retry costs no second call (review 9, L5). The
// vectors stored are those a single try stores (Verify re-embeds a
// sample and compares).
func TestIngestRetryEmbedsOnce(t *testing.T) {
	ctx := context.Background()
	srv := modelserver.Start(t)
	srv.Set(func(s *modelserver.Server) { s.Dim = 32 })
	spec, err := embed.ParseSpec("openai:test-model?url=" + srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs"), Embedder: spec})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	embedded := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Path == "/v1/embeddings" {
				n += r.Inputs
			}
		}
		return n
	}
	in := func(src, text string) Input {
		return Input{Source: src, MediaType: "text/plain", Data: []byte(text)}
	}
	ingest := func(ins ...Input) []Result { t.Helper(); return mustIngest(t, ix, ins...) }

	// Out of memory in the rows' transaction, then the retry.
	faults := 0
	writeFault = func() error {
		if faults++; faults > 1 {
			return nil
		}
		return &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: failed to pin block of size 256.0 KiB (1.0 MiB/1.0 MiB used)"}
	}
	before := embedded()
	ingest(in("mem://a", "alpha passage"), in("mem://b", "beta passage"), in("mem://c", "gamma passage"))
	writeFault = nil
	if faults != 2 {
		t.Fatalf("the rows' transaction was reached %d times, want 2 (a failure, then the retry)", faults)
	}
	if got := embedded() - before; got != 3 {
		t.Errorf("out-of-memory retry: %d texts embedded, want 3 (each block once)", got)
	}

	// Overtaken: another writer changes document a between the batch's
	// preparation and its lock; the batch is prepared again.
	overtake := true
	ingestHook = func(stage string) {
		if stage == "prepared" && overtake {
			overtake = false
			ingest(in("mem://a", "alpha overtaking version"))
		}
	}
	defer func() { ingestHook = nil }()
	before = embedded()
	res := ingest(in("mem://a", "alpha final version"), in("mem://d", "delta passage"))
	ingestHook = nil
	if overtake {
		t.Fatal("the hook never ran")
	}
	if res[0].Status != Replaced || res[1].Status != Added {
		t.Errorf("statuses %s, %s; want %s, %s", res[0].Status, res[1].Status, Replaced, Added)
	}
	if got := embedded() - before; got != 3 {
		t.Errorf("overtaken batch: %d texts embedded, want 3 (its two blocks once, the overtaking writer's one)", got)
	}

	for _, c := range []struct{ query, want string }{{"final", "mem://a"}, {"delta", "mem://d"}, {"gamma", "mem://c"}} {
		hits, err := ix.Search(ctx, c.query, &SearchOptions{Mode: ModeHybrid})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Source != c.want {
			t.Errorf("search %q: %v, want %s first", c.query, hits, c.want)
		}
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify: %v, %+v", err, v)
	}
}
