package layout

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A compaction's replaced generation is not removed while CURRENT names
// it again (a rollback ran between the compaction and the removal) or
// while this process holds it; once neither holds, it is.
func TestRemoveReplaced(t *testing.T) {
	d, err := Lock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Unlock()
	old, cp := "gen-000001", "gen-000002"
	mkgen(t, d, old)
	mkgen(t, d, cp)
	for _, g := range []string{old, cp, old} { // the copy published, then rolled back
		if err := d.Publish(g); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.RemoveReplaced(old); err == nil {
		t.Fatal("removed the generation CURRENT names")
	}
	if _, err := os.Stat(filepath.Join(d.path, old)); err != nil {
		t.Fatalf("the live generation: %v", err)
	}
	if err := d.Publish(cp); err != nil {
		t.Fatal(err)
	}
	release := d.Hold(old)
	if err := d.RemoveReplaced(old); err == nil {
		t.Fatal("removed a generation this process holds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := d.WaitReleased(ctx, old); err == nil {
		t.Fatal("WaitReleased returned while the hold lasts")
	}
	go func() { time.Sleep(20 * time.Millisecond); release() }()
	if err := d.WaitReleased(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveReplaced(old); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.path, old)); !os.IsNotExist(err) {
		t.Fatalf("the replaced generation is still there: %v", err)
	}
}
