package layout

// Purges. A purge (index.Index.Purge) rewrites the live database into a new
// generation N so that no freed page keeps erased text, and records it in
// DIR/PURGED ("gen-NNNNNN <RFC 3339 time>\n") before publishing N. From
// then on no generation older than N may become live again: Publish and a
// rollback refuse it, Clean removes it whatever keep says, and Resolve,
// finding CURRENT older than the mark (a crash between the mark and the
// publish), publishes N, whose file was complete before the mark was
// written, and removes the generations older than N that a crash or a
// cancelled RemoveBefore left.
//
// Before it deletes anything a purge writes DIR/PURGING ("gen-L <time>",
// L the generation live when it began), and MarkPurge removes it. While
// it exists the purge did not finish (a crash or an error between the
// deletes and the mark): the generations older than L hold the text the
// purge deleted, and Publish, a rollback (even forced) and Clean treat
// them as they treat those older than a PURGED mark.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// PurgedName is the file recording the last purge.
const PurgedName = "PURGED"

// PurgingName is the file recording a purge that began and has not been
// marked (MarkPurge) yet.
const PurgingName = "PURGING"

// ErrPurged is returned, wrapped in a *PurgedError, when a generation
// older than the last purge would become live again: it may hold the
// text of the documents the purge erased.
var ErrPurged = errors.New("a purge erased documents that the generation may still hold")

// Purge is the record of the last purge of an index directory.
type Purge struct {
	// Generation is the first generation written after the purge: every
	// older one may hold erased text.
	Generation string
	// Time is when the purge was recorded, UTC.
	Time time.Time
}

// PurgedError reports a refused publish or rollback of Generation, older
// than the purge ("" for a rollback that found no older generation after a
// purge removed them). It wraps ErrPurged.
type PurgedError struct {
	Generation string
	Purge      Purge
	// Unfinished says the purge began (PURGING) and was never marked:
	// Purge.Generation is the generation live when it began.
	Unfinished bool
}

func (e *PurgedError) Error() string {
	if e.Unfinished {
		return fmt.Sprintf("refused: a purge began at %s with %s live and did not finish (purge again to finish it), and %s is older: making it live would serve documents the purge deleted",
			e.Purge.Time.Format(time.RFC3339), e.Purge.Generation, e.Generation)
	}
	if e.Generation == "" {
		return fmt.Sprintf("refused: a purge happened at %s (first clean generation %s): the generations before it would serve erased documents, and it removed them",
			e.Purge.Time.Format(time.RFC3339), e.Purge.Generation)
	}
	return fmt.Sprintf("refused: a purge happened at %s (first clean generation %s) and %s is older: making it live would serve erased documents",
		e.Purge.Time.Format(time.RFC3339), e.Purge.Generation, e.Generation)
}

// Unwrap returns ErrPurged.
func (e *PurgedError) Unwrap() error { return ErrPurged }

// ReadPurge returns the last purge recorded in dir; ok is false when none
// was. A mark that does not parse is an error: every generation could
// hold erased text, and the caller must not guess.
func ReadPurge(dir string) (p Purge, ok bool, err error) {
	return readMark(dir, PurgedName)
}

// ReadPurging returns the unfinished purge recorded in dir (PURGING: the
// generation live when it began, and when); ok is false when none is.
func ReadPurging(dir string) (p Purge, ok bool, err error) {
	return readMark(dir, PurgingName)
}

// readMark reads the purge mark file name of dir.
func readMark(dir, name string) (p Purge, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return Purge{}, false, nil
	}
	if err != nil {
		return Purge{}, false, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || !IsGeneration(f[0]) {
		return Purge{}, false, fmt.Errorf("%s: %q: want \"gen-NNNNNN <RFC 3339 time>\"", filepath.Join(dir, name), strings.TrimSpace(string(b)))
	}
	t, err := time.Parse(time.RFC3339Nano, f[1])
	if err != nil {
		return Purge{}, false, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return Purge{Generation: f[0], Time: t.UTC()}, true, nil
}

// CheckPurged returns a *PurgedError when gen is older than the last purge
// of dir (or the mark cannot be read), nil otherwise.
func CheckPurged(dir, gen string) error {
	p, ok, err := ReadPurge(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", gen, err)
	}
	if ok && gen < p.Generation { // fixed width: lexical order is numeric order
		return &PurgedError{Generation: gen, Purge: p}
	}
	u, ok, err := ReadPurging(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", gen, err)
	}
	if ok && gen < u.Generation {
		return &PurgedError{Generation: gen, Purge: u, Unfinished: true}
	}
	return nil
}

// purgeFloor is the oldest generation that may become live: the last
// purge's, or, when higher, the one live when an unfinished purge began;
// ok is false when there is neither mark.
func purgeFloor(dir string) (gen string, ok bool, err error) {
	for _, read := range []func(string) (Purge, bool, error){ReadPurge, ReadPurging} {
		p, has, err := read(dir)
		if err != nil {
			return "", false, err
		}
		if has && p.Generation > gen {
			gen, ok = p.Generation, true
		}
	}
	return gen, ok, nil
}

// BeginPurge records, durably, that a purge begins while live is the
// live generation, at t: until MarkPurge, no generation older than live
// may become live again (the purge deletes documents they hold).
func (d *Dir) BeginPurge(live string, t time.Time) error {
	if !IsGeneration(live) {
		return fmt.Errorf("begin purge %q: not a generation name", live)
	}
	if err := writeFile(d.path, PurgingName, []byte(live+" "+t.UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return fmt.Errorf("begin purge: %w", err)
	}
	return nil
}

// MarkPurge records a purge whose clean generation is gen, at t, durably.
// gen must have its index file: it is complete and about to be published,
// and from now on Publish refuses every older generation.
func (d *Dir) MarkPurge(gen string, t time.Time) error {
	if !IsGeneration(gen) {
		return fmt.Errorf("mark purge %q: not a generation name", gen)
	}
	if _, err := os.Stat(d.GenerationPath(gen)); err != nil {
		return fmt.Errorf("mark purge %s: %w", gen, err)
	}
	if err := writeFile(d.path, PurgedName, []byte(gen+" "+t.UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return fmt.Errorf("mark purge %s: %w", gen, err)
	}
	// PURGED (gen, newer than the generation PURGING names) refuses all
	// that PURGING did; a PURGING left by a failed removal refuses less
	// than it, so the removal's error is not the purge's.
	if err := os.Remove(filepath.Join(d.path, PurgingName)); err == nil {
		syncDir(d.path)
	}
	return nil
}

// removePurged removes the generations older than the purge floor
// (purgeFloor), which can never become live again, when CURRENT is not
// older than it; a generation this process holds stays. A crash during a
// purge's RemoveBefore, or its cancellation, leaves them.
func (d *Dir) removePurged() error {
	floor, ok, err := purgeFloor(d.path)
	if err != nil || !ok {
		return err
	}
	cur, has, err := currentName(d.path)
	if err != nil || !has || cur < floor {
		return err
	}
	gens, err := Generations(d.path)
	if err != nil {
		return err
	}
	removed := false
	for _, g := range gens {
		if g >= floor {
			break
		}
		d.mu.Lock()
		held := d.held[g] > 0
		d.mu.Unlock()
		if held {
			continue
		}
		if err := os.RemoveAll(filepath.Join(d.path, g)); err != nil {
			return fmt.Errorf("remove %s, older than the last purge: %w", g, err)
		}
		removed = true
	}
	if removed {
		return syncDir(d.path)
	}
	return nil
}

// finishPurge publishes the purge's generation when CURRENT names an older
// one (a crash between MarkPurge and Publish); it reports whether it did.
func (d *Dir) finishPurge() (bool, error) {
	p, ok, err := ReadPurge(d.path)
	if err != nil || !ok {
		return false, err
	}
	cur, has, err := currentName(d.path)
	if err != nil || (has && cur >= p.Generation) {
		return false, err
	}
	if _, err := os.Stat(d.GenerationPath(p.Generation)); err != nil {
		return false, fmt.Errorf("%s records a purge whose generation %s is lost (%w), and the other generations may hold erased text: run escurel rebuild",
			filepath.Join(d.path, PurgedName), p.Generation, err)
	}
	return true, d.Publish(p.Generation)
}

// Removal is what a cleaning removed, or would remove.
type Removal struct {
	Generations     []string // generation directories
	Temp            []string // temporary files (names in the directory)
	GenerationBytes int64    // the generations' size, in bytes
	TempBytes       int64    // the temporary files' size, in bytes
}

// Bytes is the size of everything in r, in bytes.
func (r Removal) Bytes() int64 { return r.GenerationBytes + r.TempBytes }

// RemoveBefore removes every generation older than gen (which CURRENT must
// name) and the temporary files: what a purge leaves behind. It waits for
// this process's holds of those generations to be released (readers that
// were running on the old state when it was replaced), until ctx ends; then
// it returns what it removed and ctx's error, and Clean removes the rest
// later.
func (d *Dir) RemoveBefore(ctx context.Context, gen string) (Removal, error) {
	var out Removal
	cur, ok, err := currentName(d.path)
	if err != nil {
		return out, err
	}
	if !ok || cur != gen {
		return out, fmt.Errorf("remove generations before %s: CURRENT names %q", gen, cur)
	}
	for {
		gens, err := Generations(d.path)
		if err != nil {
			return out, err
		}
		waiting := false
		d.mu.Lock()
		for _, g := range gens {
			if g >= gen {
				continue
			}
			if d.held[g] > 0 {
				waiting = true
				continue
			}
			size := dirSize(filepath.Join(d.path, g))
			if err := os.RemoveAll(filepath.Join(d.path, g)); err != nil {
				d.mu.Unlock()
				return out, fmt.Errorf("remove %s: %w", g, err)
			}
			out.Generations = append(out.Generations, g)
			out.GenerationBytes += size
		}
		released := d.released
		d.mu.Unlock()
		if !waiting {
			break
		}
		select {
		case <-released:
		case <-ctx.Done():
			return out, fmt.Errorf("remove generations before %s: still open in this process: %w", gen, ctx.Err())
		}
	}
	tmp, err := d.removeTemp()
	out.Temp, out.TempBytes = tmp.Temp, tmp.TempBytes
	if err != nil {
		return out, err
	}
	return out, syncDir(d.path)
}

// removeTemp removes the directory's temporary files.
func (d *Dir) removeTemp() (Removal, error) {
	var out Removal
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return out, err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		var size int64
		if fi, err := e.Info(); err == nil {
			size = fi.Size()
		}
		if err := os.Remove(filepath.Join(d.path, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, err
		}
		out.Temp = append(out.Temp, e.Name())
		out.TempBytes += size
	}
	return out, nil
}

// dirSize is the size of the files under path, in bytes; 0 for what cannot
// be read.
func dirSize(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// GenerationBytes is the size of the files of generation gen of dir, in
// bytes; 0 when it cannot be read.
func GenerationBytes(dir, gen string) int64 { return dirSize(filepath.Join(dir, gen)) }
