package index

// Generation switches: a rebuild's swap and Reload open the new
// generation's state, warm it and make it live; readers on the old state
// finish on it (see the locking rules at Index).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/layout"
)

// Reload switches to the generation CURRENT names when it is not the one
// open (after a rollback by another holder of the lock, or a rebuild by
// this process through another Index value): it opens the new generation
// and makes it live for the next search; running searches finish on the
// old one, which closes when the last of them leaves. Settings come from
// the new generation's manifest; a configured way to reach the same
// embedder (url, path) is kept.
func (ix *Index) Reload(ctx context.Context) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s := ix.cur.Load()
	if s == nil {
		return ErrClosed
	}
	gen, ok, err := layout.Current(ix.dir)
	if err != nil {
		return fmt.Errorf("reload %s: %w", ix.dir, err)
	}
	if !ok {
		return fmt.Errorf("reload %s: no %s", ix.dir, layout.CurrentName)
	}
	if gen != s.gen {
		if err := ix.switchTo(ctx, gen); err != nil {
			return err
		}
	}
	ix.stale = ""
	return nil
}

// swap makes a generation live without a moment of downtime: with writes
// held back, it runs prepare (which brings the new generation up to date
// with the live one and returns its name), publishes it, and switches this
// Index to it. An error from prepare leaves everything as it was. Once the
// generation is published nothing undoes it: the switch runs without ctx's
// cancellation, and a failure to switch says that the directory serves the
// new generation while this process still serves the old one.
func (ix *Index) swap(ctx context.Context, prepare func(ctx context.Context) (string, error)) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	old, err := ix.live()
	if err != nil {
		return err
	}
	gen, err := prepare(ctx)
	if err != nil {
		return err
	}
	if err := ix.layout.PublishSettled(gen); err != nil {
		return err
	}
	if err := ix.switchTo(context.WithoutCancel(ctx), gen); err != nil {
		ix.stale = gen // searches go on on the old generation; writes wait for a Reload
		return fmt.Errorf("%s is live, but this process still serves %s: %w; call Reload", gen, old.gen, err)
	}
	return nil
}

// switchTo opens generation gen and makes it live. The caller holds
// writeMu.
func (ix *Index) switchTo(ctx context.Context, gen string) error {
	old := ix.cur.Load()
	n, err := ix.openWarm(ctx, gen)
	if err != nil {
		return err
	}
	ix.publish(n)
	old.unref()
	return nil
}

// openWarm opens generation gen with the live state's embedder and warms
// it as the live state is; it does not make it live. The caller holds
// writeMu.
func (ix *Index) openWarm(ctx context.Context, gen string) (*state, error) {
	n, err := ix.openWarmFrom(ctx, ix.cur.Load(), gen)
	if err != nil {
		return nil, fmt.Errorf("switch to %s: %w", gen, err)
	}
	return n, nil
}

// warmBudget bounds the posting-list warm-up of a switch (openWarmFrom),
// which writes wait for: at 100,000 passages 20,000 terms take about 1 s.
const warmBudget = 3 * time.Second

// openWarmFrom opens generation gen with the settings of old, the live
// state (a generation of another embedding model, a re-embed's, adopts its
// own), and warms it as old is: its vectors, public ids, hits' documents
// and the posting lists old has cached are read now, not by the first
// search after the switch or rollback (Lucene's IndexReaderWarmer). The
// caller holds writeMu; the state returned has one reference, the
// caller's.
func (ix *Index) openWarmFrom(ctx context.Context, old *state, gen string) (*state, error) {
	// DuckDB would create a missing file: a generation to switch to exists.
	if _, err := os.Stat(layout.GenerationPath(ix.dir, gen)); err != nil {
		return nil, err
	}
	opts := &Options{Blobs: ix.blobs, Embedder: old.embedSpec, MemoryLimit: ix.cfg.memLimit}
	want, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	n, err := ix.openState(ctx, gen, want)
	if errors.Is(err, ErrManifestMismatch) { // another model (a re-embed): adopt it
		want.embedder = embed.Spec{}
		n, err = ix.openState(ctx, gen, want)
	}
	if err != nil {
		return nil, err
	}
	// The posting lists are a cache: a warm-up that fails or runs past
	// warmBudget (writes wait for it) leaves the rest cold, which only
	// costs the first searches time, and a read error of the lists
	// recurs, and is reported, in the search that needs them.
	wctx, cancel := context.WithTimeout(ctx, warmBudget)
	_ = n.fts.WarmFrom(wctx, n.db, old.fts)
	cancel()
	if old.vec != nil && n.vec != nil && old.vec.isLoaded() {
		if _, err := n.denseIndex(ctx, n.db); err != nil {
			n.unref()
			return nil, err
		}
	}
	if old.pub.isLoaded() {
		if err := n.pub.load(ctx, n.db); err != nil {
			n.unref()
			return nil, err
		}
	}
	if old.hitDocs.isLoaded() {
		if err := n.hitDocs.load(ctx, n.db); err != nil {
			n.unref()
			return nil, err
		}
	}
	return n, nil
}

// Prewarm reads into memory the posting lists of the live generation's
// most frequent terms, as many as its posting cache holds
// (fts.WarmFrequent), then the table of hits' documents (hitdocs.go), so
// that the first searches of a process that will serve many (escurel
// serve) do not each read their lists from the file, nor one of them the
// table.
// A generation a switch makes live is warmed from the one it replaces
// instead (openWarmFrom). At 100,000 passages it read 20,000 terms in
// 0.9-1.1 s on 2 busy cores, by chunks of 2,500 terms; a commit waits for
// one chunk at most. When a switch (or a rollback, or a replica's
// update) replaces the generation meanwhile, it stops after the chunk it
// is reading, without error: the new generation was warmed from this one.
// It returns the terms left cached; errors: ErrClosed, or the read's.
func (ix *Index) Prewarm(ctx context.Context) (int, error) {
	s, err := ix.acquire()
	if err != nil {
		return 0, err
	}
	defer s.unref()
	n, err := s.prewarm(ctx)
	if err != nil {
		return 0, fmt.Errorf("prewarm %s: %w", ix.dir, err)
	}
	return n, nil
}

// errRetired is the cause of a warm-up's cancellation when its state
// stops being the live one.
var errRetired = errors.New("generation replaced")

// prewarm is Prewarm on s: it does nothing once s is retired, and stops
// reading when s is retired meanwhile (returning the terms cached by then).
func (s *state) prewarm(ctx context.Context) (int, error) {
	select {
	case <-s.retired:
		return 0, nil
	default:
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-s.retired:
			cancel(errRetired)
		case <-ctx.Done():
		}
	}()
	n, err := s.fts.WarmFrequent(ctx, s.db)
	if err == nil {
		// The table of hits' documents and the map of public ids too,
		// which searches and Rank load only at their third
		// (hitDocsLoadAfter), so that no request of a server pays them
		// (2 s and 0.5 s at 1M passages).
		err = s.fts.View(func() error {
			if err := s.hitDocs.load(ctx, s.db); err != nil {
				return err
			}
			return s.pub.load(ctx, s.db)
		})
	}
	if err != nil && errors.Is(context.Cause(ctx), errRetired) {
		return n, nil
	}
	return n, err
}
