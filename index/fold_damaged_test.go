package index

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
)

// One damaged entry in a small pack (bit rot, which Verify reports) is
// left out of the folding of small packs, logged once, and the others
// fold; a fold that fails is tried again only after more small packs
// have come, not after every write under writeMu (review 14, found with
// this test: every fold failed, and each write ran one).
func TestFoldAfterDamagedSmallPack(t *testing.T) {
	ctx := context.Background()
	defer func(n int) { autoFoldPacks = n }(autoFoldPacks)
	autoFoldPacks = 4
	var warns atomic.Int64
	old := slog.Default()
	defer slog.SetDefault(old)
	slog.SetDefault(slog.New(countWarn{&warns}))
	dir := t.TempDir()
	ix, err := Open(ctx, dir, &Options{BlobURL: "file://" + filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	write := func(i int) {
		t.Helper()
		in := Input{Source: fmt.Sprintf("mem://d%02d", i), MediaType: "text/plain", Data: []byte(fmt.Sprintf("document number %d", i))}
		mustIngest(t, ix, in)
		ix.merges.Wait()
	}
	write(0)
	// Damage the first pack's first entry (the blob of d00), after its
	// 8-byte magic.
	names, _ := filepath.Glob(filepath.Join(dir, "blobs", "packs", "*.pack"))
	sort.Strings(names)
	data, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("ESCPACK1")) {
		t.Fatalf("%s: not a pack", names[0])
	}
	data[8] ^= 0xff
	if err := os.WriteFile(names[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	const writes = 12
	for i := 1; i <= writes; i++ {
		write(i)
	}
	n := packFiles(t, dir)
	t.Logf("after %d writes: %d packs, %d fold warnings", writes, n, warns.Load())
	if n > 3*autoFoldPacks {
		t.Errorf("%d packs after %d single writes with autoFoldPacks %d: one damaged small pack stops every later fold", n, writes, autoFoldPacks)
	}
	if w := warns.Load(); w > 2 {
		t.Errorf("%d failed folds logged for %d writes: each write after the damage runs (and fails) a fold under writeMu", w, writes)
	}
}

type countWarn struct{ n *atomic.Int64 }

func (h countWarn) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h countWarn) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "folding") {
		h.n.Add(1)
	}
	return nil
}
func (h countWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countWarn) WithGroup(string) slog.Handler      { return h }
