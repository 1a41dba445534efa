package index_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rebuild"
	"github.com/escurel/escurel/replica"
)

// The in-memory documents table that a delete reads instead of the rows
// (source, language, sensitivity, block range) holds exactly what the
// rows hold after a rebuild and its switch, a rollback, and on a replica
// (each a new state, its table loaded from its rows or warmed by the
// switch), and after deletes and re-ingests on those; a delete through it
// leaves no row of the document. (TestHitDocsInStep covers ingest,
// replace, metadata updates, delete, purge and reopen.)
func TestDocTableAcrossSwitches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	doc := func(i, v int, lang, sens string) index.Input {
		return index.Input{Source: fmt.Sprintf("/t%02d.md", i), Language: lang, Sensitivity: sens, Data: []byte(fmt.Sprintf(
			"# Doc %d\n\nwords about apples %d version %d\n\n## Part\n\nmore text on pears %d\n", i, i, v, v))}
	}
	langs := []string{"en", "fr", "de"}
	sens := []string{index.Public, index.Internal, index.Restricted}
	var ins []index.Input
	for i := range 10 {
		ins = append(ins, doc(i, 0, langs[i%3], sens[i%3]))
	}
	if _, _, err := ix.IngestBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	check := func(stage string, ix *index.Index) {
		t.Helper()
		for range index.HitDocsLoadAfter {
			if _, err := ix.Search(ctx, "apples", &index.SearchOptions{Clearance: index.Restricted}); err != nil {
				t.Fatal(err)
			}
		}
		if err := index.CheckDocTable(ctx, ix); err != nil {
			t.Errorf("%s: %v", stage, err)
		}
	}
	check("ingest", ix)
	first := ix.Generation()

	// A rebuild from the blobs switches to a new generation; writes on it.
	if _, err := rebuild.Run(ctx, rebuild.Options{Dir: dir, Blobs: ix.Blobs(), Live: ix}); err != nil {
		t.Fatal(err)
	}
	if ix.Generation() == first {
		t.Fatal("the rebuild did not switch")
	}
	check("rebuild", ix)
	if _, _, err := ix.IngestBatch(ctx, []index.Input{doc(1, 1, "fr", ""), doc(11, 0, "de", index.Internal)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Delete(ctx, "/t02.md", "/t03.md"); err != nil {
		t.Fatal(err)
	}
	check("rebuild, re-ingest, delete", ix)

	// A replica: its states are loaded from the published rows.
	to := "file://" + t.TempDir()
	if _, err := replica.Publish(ctx, ix, to, nil); err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), &replica.Options{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check("replica", r.Index())
	if _, err := ix.Delete(ctx, "/t06.md"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ix.IngestBatch(ctx, []index.Input{doc(7, 3, "de", index.Public)}); err != nil {
		t.Fatal(err)
	}
	check("writer after publishing", ix)
	if _, err := replica.Publish(ctx, ix, to, nil); err != nil {
		t.Fatal(err)
	}
	if switched, err := r.Poll(ctx); err != nil || !switched {
		t.Fatalf("replica poll: switched %v, %v", switched, err)
	}
	check("replica after its switch", r.Index())
	// A rollback to the first generation (forced: the blob store moved on).
	if _, _, err := ix.Rollback(ctx, &index.RollbackOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if ix.Generation() != first {
		t.Fatalf("rolled back to %s, want %s", ix.Generation(), first)
	}
	check("rollback", ix)
	if _, err := ix.Delete(ctx, "/t04.md"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ix.IngestBatch(ctx, []index.Input{doc(5, 2, "en", index.Restricted)}); err != nil {
		t.Fatal(err)
	}
	check("rollback, delete, re-ingest", ix)

}
