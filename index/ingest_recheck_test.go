package index

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// mustIngest ingests ins as one batch and fails the test on any error,
// the batch's or a document's.
func mustIngest(t testing.TB, ix *Index, ins ...Input) []Result {
	t.Helper()
	res, errs, err := ix.IngestBatch(context.Background(), ins)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// An ingest prepares its batch without writeMu and, under it, reads the
// batch's documents again only when another writer held the lock
// meanwhile (writerLock's release count): a write that lands between
// the preparation and the lock is seen (the batch is prepared again, the
// result as if it came after), and a batch that nothing overtook reads
// its documents once.
func TestIngestRechecksOnlyAfterAnotherWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }() // the index open at the end (reopened below)
	in := func(src, text string) Input {
		return Input{Source: src, Name: filepath.Base(src) + ".txt", MediaType: "text/plain", Data: []byte(text)}
	}
	ingest := func(ins ...Input) []Result { t.Helper(); return mustIngest(t, ix, ins...) }
	ingest(in("mem://a", "alpha first version"))
	// A write's full-text merge takes writeMu in the background after it
	// returns (mergeAfter): waited for, here and below, so that only the
	// writers the test makes hold the lock.
	waitMerges := func() {
		t.Helper()
		if err := ix.WaitForMerges(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitMerges()

	var stages []string
	overtake := true
	ingestHook = func(stage string) {
		stages = append(stages, stage)
		if stage == "prepared" && overtake {
			// Another writer, between this batch's preparation and its
			// lock: document a changes, document b appears.
			overtake = false
			ingest(in("mem://a", "alpha second version"), in("mem://b", "beta first version"))
			waitMerges()
		}
	}
	defer func() { ingestHook = nil }()
	res := ingest(in("mem://a", "alpha third version"), in("mem://b", "beta second version"))
	// The batch, its overtaking writer's (its own hook), the recheck, a
	// second preparation that nothing overtook.
	if want := []string{"prepared", "prepared", "recheck", "prepared"}; !slices.Equal(stages, want) {
		t.Fatalf("stages %v, want %v", stages, want)
	}
	if res[0].Status != Replaced || res[1].Status != Replaced {
		t.Errorf("statuses %s, %s, want %s twice (each replaces the overtaking writer's version)", res[0].Status, res[1].Status, Replaced)
	}
	for _, c := range []struct{ query, want string }{{"third", "mem://a"}, {"second", "mem://b"}} {
		hits, err := ix.Search(ctx, c.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].Source != c.want {
			t.Errorf("search %q: %d hits, want %s alone", c.query, len(hits), c.want)
		}
	}
	if v, err := ix.Verify(ctx, nil); err != nil || !v.OK() {
		t.Fatalf("verify: %v, %+v", err, v)
	}

	// Nothing overtakes: the documents are read once.
	waitMerges()
	stages = nil
	ingest(in("mem://a", "alpha fourth version"), in("mem://c", "gamma"))
	if len(stages) != 1 || stages[0] != "prepared" {
		t.Errorf("stages %v, want [prepared] (no second read)", stages)
	}

	// Back to back (a bulk ingest): the previous batch's background merge
	// holds writeMu between this batch's preparation and its lock (the
	// hook waits for it), and changes no documents row, so the batch
	// still reads its documents once.
	ingestHook = func(stage string) {
		stages = append(stages, stage)
		if stage == "prepared" {
			ix.merges.Wait()
		}
	}
	stages = nil
	ingest(in("mem://a", "alpha fifth version"), in("mem://d", "delta"))
	if len(stages) != 1 || stages[0] != "prepared" {
		t.Errorf("after a background merge: stages %v, want [prepared] (a merge does not count as a writer)", stages)
	}
	ingestHook = func(stage string) { stages = append(stages, stage) }

	// The first write after an open (a server's, a CLI's; the case the
	// skip is for): nothing in the background holds writeMu, and a batch
	// of more than docSetMinBatch documents reads them once.
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Search(ctx, "alpha", nil); err != nil {
		t.Fatal(err)
	}
	var batch []Input
	for i := range docSetMinBatch + 1 {
		batch = append(batch, in(fmt.Sprintf("mem://n%d", i), fmt.Sprintf("new document %d", i)))
	}
	stages = nil
	ingest(batch...)
	if len(stages) != 1 || stages[0] != "prepared" {
		t.Errorf("first write after an open: stages %v, want [prepared]", stages)
	}
}
