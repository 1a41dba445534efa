package tests

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rebuild"
)

// The sizes and times sync compares files with live in the records, so a
// rebuild from the blob store keeps them: a sync after it reads nothing.
func TestSyncAfterRebuildReadsNothing(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	for _, name := range []string{"a.md", "b.txt", "c.md"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte("# Doc\n\nbody "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, index.Options{})
	if _, err := e.ix.Sync(ctx, []string{src}, nil); err != nil {
		t.Fatal(err)
	}
	e.ix.Close()
	if _, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e)}); err != nil {
		t.Fatal(err)
	}
	e.open()
	sum, err := e.ix.Sync(ctx, []string{src}, &index.SyncOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := sum.Plan; p.Unchanged != 3 || p.Touched != 0 || len(p.Add)+len(p.Change)+len(p.Delete) != 0 {
		t.Errorf("after a rebuild: %+v, want 3 unchanged, none touched", p)
	}
	var bytes int64
	for d, err := range e.ix.ListDocuments(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		bytes += d.Bytes
	}
	if bytes == 0 {
		t.Errorf("rebuilt documents lost their sizes")
	}
}
