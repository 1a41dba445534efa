package index

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
)

// An ingest whose rows' transaction DuckDB fails for memory is tried once
// more at a raised limit, through every entry (IngestBatch, IngestFiles);
// a document of the batch whose metadata-only update committed before the
// rows' transaction failed is reported MetaUpdated by the retry, not
// Unchanged (review 8, L3).
func TestIngestOutOfMemoryRetried(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, _, err := ix.IngestBatch(ctx, []Input{{Source: "mem://a", MediaType: "text/plain", Data: []byte("alpha passage")}}); err != nil {
		t.Fatal(err)
	}
	faults := 0
	writeFault = func() error {
		faults++
		if faults > 1 {
			return nil
		}
		return &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: failed to pin block of size 256.0 KiB (1.0 MiB/1.0 MiB used)"}
	}
	defer func() { writeFault = nil }()
	s := ix.cur.Load()
	before := s.memLimit.Load()
	res, errs, err := ix.IngestBatch(ctx, []Input{
		{Source: "mem://a", MediaType: "text/plain", Data: []byte("alpha passage"), Meta: map[string]any{"team": "blue"}},
		{Source: "mem://b", MediaType: "text/plain", Data: []byte("beta passage")},
	})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("ingest with one out-of-memory failure: %v, %v", err, errs)
	}
	if faults != 2 {
		t.Fatalf("the rows' transaction was reached %d times, want 2 (a failure, then the retry)", faults)
	}
	if res[0].Status != MetaUpdated || res[1].Status != Added {
		t.Errorf("statuses %s, %s; want %s, %s", res[0].Status, res[1].Status, MetaUpdated, Added)
	}
	if s.memLimit.Load() <= before {
		t.Errorf("limit %d not raised from %d", s.memLimit.Load(), before)
	}

	// IngestFiles (escurel ingest, make demo) goes through the same retry.
	faults = 0
	src := filepath.Join(t.TempDir(), "c.md")
	if err := os.WriteFile(src, []byte("# Gamma\n\ngamma passage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := ix.IngestFiles(ctx, []string{src}, IngestOptions{})
	if err != nil || faults != 2 {
		t.Fatalf("IngestFiles with one out-of-memory failure: %v (rows' transaction reached %d times)", err, faults)
	}
	if sum.Added != 1 {
		t.Errorf("IngestFiles: %+v, want 1 added", sum)
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify: %v, %+v", err, v)
	}
}
