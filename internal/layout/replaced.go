package layout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// RemoveReplaced removes generation old, which an index compaction has
// just replaced by CURRENT, a copy of the same rows (so no rollback needs
// it: rolling back to it would serve what CURRENT serves). It refuses old
// when CURRENT names it or names no generation newer than it. It waits for
// this process's holds of old (readers that were running on it) until ctx
// ends; then it leaves old to Clean and returns ctx's error.
func (d *Dir) RemoveReplaced(ctx context.Context, old string) error {
	cur, ok, err := currentName(d.path)
	if err != nil {
		return err
	}
	if !ok || cur <= old {
		return fmt.Errorf("remove replaced %s: CURRENT names %q", old, cur)
	}
	for {
		d.mu.Lock()
		if d.held[old] == 0 {
			err := os.RemoveAll(filepath.Join(d.path, old))
			d.mu.Unlock()
			if err != nil {
				return fmt.Errorf("remove replaced %s: %w", old, err)
			}
			return syncDir(d.path)
		}
		released := d.released
		d.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
			return fmt.Errorf("remove replaced %s: still open in this process: %w", old, ctx.Err())
		}
	}
}
