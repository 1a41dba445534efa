package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/rebuild"
)

// While a pack cannot be read, ScanRecords returns the older versions of
// its documents (the newest readable entry wins): a document reclassified
// RESTRICTED there reads as its earlier PUBLIC record. A rebuild must
// refuse, naming the pack and what to do, even with AllowMissing, and keep
// the live index.
func TestRebuildRefusesWhileAPackIsDamaged(t *testing.T) {
	ctx := context.Background()
	e := newEnvLayout(t, index.Options{}, true)
	doc := "# Plan\n\nThe zanzibar plan in detail.\n"
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/plan.md", Data: []byte(doc), Sensitivity: index.Public}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/plan.md", Data: []byte(doc), Sensitivity: index.Restricted}); err != nil {
		t.Fatal(err)
	}
	e.ix.Close()
	packs, _ := filepath.Glob(filepath.Join(e.dir, "blobs", "packs", "*.pack"))
	sort.Strings(packs) // by <seq>: the last holds the RESTRICTED record
	if len(packs) < 2 {
		t.Fatalf("packs: %v: the test proves nothing", packs)
	}
	newest := packs[len(packs)-1]
	good, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newest, good[:len(good)-5], 0o600); err != nil {
		t.Fatal(err)
	}
	recs, damaged, err := blobsOf(e).ScanRecords(ctx)
	if err != nil || len(damaged) != 1 || damaged[0].DocID != "" {
		t.Fatalf("ScanRecords with a damaged pack: %d records, damaged %+v, %v: the test proves nothing", len(recs), damaged, err)
	}
	name := filepath.Base(newest)
	for _, allow := range []bool{false, true} {
		_, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: blobsOf(e), AllowMissing: allow})
		if err == nil {
			t.Fatalf("AllowMissing %v: a rebuild over a damaged pack succeeded (it would serve older record versions)", allow)
		}
		msg := err.Error()
		if !errors.Is(err, blobstore.ErrCorrupt) || !strings.Contains(msg, name) || !strings.Contains(strings.ToLower(msg), "restore") {
			t.Errorf("AllowMissing %v: error %q: want ErrCorrupt naming %s and how to repair", allow, msg, name)
		}
		if strings.Contains(msg, "escurel delete ,") || strings.Contains(msg, "escurel delete  ") {
			t.Errorf("AllowMissing %v: error suggests escurel delete with no doc id: %q", allow, msg)
		}
	}
	if gens, _ := layout.Generations(e.dir); len(gens) != 1 {
		t.Errorf("the refused rebuild left generations %v", gens)
	}
}
