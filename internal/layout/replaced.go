package layout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// WaitReleased waits until this process holds generation gen no more
// (the readers that were running on it have left), or ctx ends (its
// error, wrapped).
func (d *Dir) WaitReleased(ctx context.Context, gen string) error {
	for {
		d.mu.Lock()
		n, released := d.held[gen], d.released
		d.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-released:
		case <-ctx.Done():
			return fmt.Errorf("generation %s: still open in this process: %w", gen, ctx.Err())
		}
	}
}

// RemoveReplaced removes generation old, which an index compaction
// replaced by a copy of the same rows (so no rollback needs it: rolling
// back to it would serve what the copy serves). It refuses old while
// CURRENT names it or names no generation newer than it (a rollback made
// it live again), and while this process holds it (WaitReleased first).
// The caller keeps CURRENT from moving meanwhile (the index's writeMu).
func (d *Dir) RemoveReplaced(old string) error {
	cur, ok, err := currentName(d.path)
	if err != nil {
		return err
	}
	if !ok || cur <= old {
		return fmt.Errorf("remove replaced %s: CURRENT names %q", old, cur)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held[old] > 0 {
		return fmt.Errorf("remove replaced %s: still open in this process", old)
	}
	if err := os.RemoveAll(filepath.Join(d.path, old)); err != nil {
		return fmt.Errorf("remove replaced %s: %w", old, err)
	}
	return syncDir(d.path)
}

// Building reports whether this process is building a generation
// (NewGeneration, not yet published or abandoned): a rebuild, a purge or
// a compaction's rewrite.
func (d *Dir) Building() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.building) > 0
}
