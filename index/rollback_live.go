package index

// An in-process rollback: the process that holds the directory (escurel
// serve) cannot call the package-level Rollback, which takes the lock.

import (
	"context"
	"fmt"

	"github.com/escurel/escurel/internal/layout"
)

// Rollback makes the generation before the live one live again in this
// open Index, and returns both names: the rollback of package-level
// Rollback for the process that holds the directory. Like it, the
// generation rolled back to must verify against the blob store (the
// Index's own; opts.Blobs is ignored), or the rollback is refused with a
// *StaleError (ErrStale), unless opts.Force; and, even with Force, one
// whose rows give a document a lower sensitivity than its record (an error
// wrapping ErrDowngrade). It holds back writes while it
// runs; searches go on, on the old generation until the switch and on the
// new one after it, never waiting.
//
// Errors: ErrClosed; an error when there is no older generation, or when
// CURRENT names another generation than the one this process serves
// (call Reload); *StaleError; a storage error opening or verifying the
// generation, after which nothing changed. Once the generation is
// published nothing undoes it: the switch runs without ctx's cancellation.
func (ix *Index) Rollback(ctx context.Context, opts *RollbackOptions) (from, to string, err error) {
	if opts == nil {
		opts = &RollbackOptions{}
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	old, err := ix.live()
	if err != nil {
		return "", "", err
	}
	from = old.gen
	cur, ok, err := ix.layout.CurrentNameUnchecked()
	if err != nil {
		return "", "", fmt.Errorf("rollback %s: %w", ix.dir, err)
	}
	if !ok || cur != from {
		return "", "", fmt.Errorf("rollback %s: %s names %q, this process serves %s; call Reload first", ix.dir, layout.CurrentName, cur, from)
	}
	to, ok, err = ix.layout.Previous()
	if err != nil {
		return "", "", fmt.Errorf("rollback %s: %w", ix.dir, err)
	}
	if !ok {
		return "", "", fmt.Errorf("rollback %s: no generation older than %s; nothing to roll back to", ix.dir, from)
	}
	if err := checkRollback(ix.dir, to); err != nil {
		return "", "", err // past a purge: even Force would serve erased documents
	}
	// A state a switch replaced may still hold to's file open for a
	// reader: a second DuckDB instance on the same file would checkpoint
	// under it (review 17b). Readers never take writeMu: they leave.
	if err := ix.layout.WaitReleased(ctx, to); err != nil {
		return "", "", fmt.Errorf("rollback %s to %s: %w", ix.dir, to, err)
	}
	n, err := ix.openWarmFrom(ctx, old, to)
	if err != nil {
		return "", "", fmt.Errorf("rollback %s to %s: %w", ix.dir, to, err)
	}
	if err := n.checkRollbackTo(ctx, ix.dir, opts.Force); err != nil {
		n.unref() // even with Force: never a downgrade (ErrDowngrade)
		return "", "", err
	}
	if err := ix.layout.Publish(to); err != nil {
		// CURRENT names the old generation or the new: read which.
		if cur, ok, rerr := layout.Current(ix.dir); rerr != nil || !ok || cur != to {
			n.unref()
			return "", "", fmt.Errorf("rollback %s to %s: %w", ix.dir, to, err)
		}
	}
	ix.publish(n)
	old.unref()
	return from, to, nil
}
