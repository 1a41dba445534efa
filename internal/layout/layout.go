// Package layout owns an index directory: its generations, the pointer
// files that name the live one (CURRENT), the blob store (BLOBS) and the
// highest generation number ever made (LASTGEN), the lock file (LOCK), and
// the temporary files of all of these. Nothing else in escurel creates or
// removes a file there; package index and package rebuild call this one.
//
//	DIR/LOCK                     flock of the owning process, holds its pid
//	DIR/CURRENT                  "gen-NNNNNN\n": the live generation
//	DIR/LASTGEN                  highest number made, so none is given twice
//	DIR/BLOBS                    the blob store URL, when not file://DIR/blobs
//	DIR/gen-NNNNNN/index.duckdb  one generation
//	DIR/gen-NNNNNN/UNFINISHED    marks one being built: never served
//	DIR/PURGED                   "gen-NNNNNN TIME": the last purge; older generations never live again
//	DIR/PURGING                  "gen-NNNNNN TIME": a purge began with that generation live and is not marked yet; older generations never live again
//	DIR/SERVER                   the serving process's address and local tokens (0600)
//	DIR/*.tmp                    a pointer file being written; a crash leftover
//
// Every pointer file is written to NAME.tmp, fsynced, renamed over NAME and
// the directory fsynced (writeFile), as litestream's FsyncDir and pebble's
// atomicfs marker do: after a crash a reader sees the old content or the
// new, never a torn one.
//
// The rules (pebble's version_set and obsolete-files cleaner are the model):
//   - Publish is the one way to change CURRENT. It is durable when it
//     returns nil; on an error CURRENT names the old generation or the new
//     one, and the caller must re-read it (Current) to know which.
//   - Nothing removes the generation CURRENT names. Abandon removes a
//     generation this process built only while CURRENT does not name it,
//     and Clean, the one cleaner, never touches it.
//   - Clean removes crash leftovers (temporary files, generations newer
//     than CURRENT that no one in this process is building) and all but the
//     newest keep generations up to CURRENT, skipping any that this process
//     still holds open (Hold). Without a valid CURRENT it removes only
//     temporary files: the generations may be the only intact copies.
//   - All of it runs under the directory's lock (Lock), which one process
//     holds at a time; within the process a Dir is safe for concurrent use.
package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// File names inside an index directory.
const (
	CurrentName = "CURRENT"      // names the live generation
	LastGenName = "LASTGEN"      // highest generation number ever made
	BlobsName   = "BLOBS"        // blob store URL, when not the default
	LockName    = "LOCK"         // the directory lock
	FileName    = "index.duckdb" // the DuckDB file of a generation
	// UnfinishedName marks a generation that NewGeneration made and no
	// Publish has finished: it is never adopted as the live one.
	UnfinishedName = "UNFINISHED"
	tmpSuffix      = ".tmp"
)

var genPattern = regexp.MustCompile(`^gen-[0-9]{6}$`)

// IsGeneration reports whether name is a generation's name (gen-NNNNNN).
func IsGeneration(name string) bool { return genPattern.MatchString(name) }

func genName(n int) string { return fmt.Sprintf("gen-%06d", n) }

func genNumber(gen string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(gen, "gen-"))
	return n
}

// GenerationPath returns the DuckDB file of generation gen of dir.
func GenerationPath(dir, gen string) string { return filepath.Join(dir, gen, FileName) }

// Dir is an index directory whose lock this process holds. Its methods are
// safe for concurrent use.
type Dir struct {
	path string
	lock *dirLock

	// mu protects building and held; never held across file I/O other
	// than the removals (Clean, Abandon, RemoveBefore, RemoveReplaced),
	// which must not race a Hold.
	mu       sync.Mutex
	building map[string]bool // generations made by NewGeneration, not yet published or abandoned
	held     map[string]int  // generations open in this process: reference counts
	temps    map[string]bool // temporary files in use (CreateTemp), by name: Clean leaves them
	released chan struct{}   // closed (and replaced) each time a hold is released
}

// Lock takes the lock of the index directory path, creating the directory
// and its lock file when missing. It does not wait: a lock held by another
// process, or by another Dir of this process, fails at once with an error
// wrapping ErrLocked. It removes a stale server record (ServerName).
func Lock(path string) (*Dir, error) {
	l, err := lockDir(path)
	if err != nil {
		return nil, err
	}
	d := &Dir{path: path, lock: l, building: map[string]bool{}, held: map[string]int{}, temps: map[string]bool{}, released: make(chan struct{})}
	// A server record left by a server that died is stale now that the
	// lock is free: no one would answer at its address.
	if err := d.ClearServer(); err != nil {
		l.unlock()
		return nil, err
	}
	// Sort spills left by a process killed during a verify: every
	// process that reads a generation holds this lock, so none is in use
	// now. They hold rows' text, erased text too after a purge. Where the
	// lock does not exclude other processes (lock_other.go) they stay:
	// one may be another process's, in use.
	if locksProcesses {
		if err := removeSpills(path); err != nil {
			l.unlock()
			return nil, err
		}
	}
	return d, nil
}

// SpillPrefix begins the name of a private directory in a generation's
// directory where a verify spills the rows it sorts (index/docorder.go).
// It is removed when the sort ends; Lock removes any left by a process
// that was killed.
const SpillPrefix = ".sort-"

// removeSpills removes the sort spills (SpillPrefix) in every generation
// of the index directory dir. The names are listed, not globbed: dir may
// hold pattern characters ('[', '*', '\\').
func removeSpills(dir string) error {
	gens, err := Generations(dir)
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	for _, g := range gens {
		entries, err := os.ReadDir(filepath.Join(dir, g))
		if err != nil {
			return fmt.Errorf("lock %s: %w", dir, err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), SpillPrefix) {
				continue
			}
			sp := filepath.Join(dir, g, e.Name())
			if err := os.RemoveAll(sp); err != nil {
				return fmt.Errorf("lock %s: remove %s, a verify's leftover sort spill (it holds rows' text; remove it by hand): %w", dir, sp, err)
			}
		}
	}
	return nil
}

// Unlock releases the lock. The Dir must not be used afterwards.
func (d *Dir) Unlock() error {
	if d == nil {
		return nil
	}
	return d.lock.unlock()
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

// GenerationPath returns the DuckDB file of generation gen.
func (d *Dir) GenerationPath(gen string) string { return GenerationPath(d.path, gen) }

// Current returns the live generation of the index directory dir as
// CURRENT names it; ok is false when there is no CURRENT. A CURRENT that
// names no generation directory holding an index file is an error. It
// takes no lock: a reader of another process sees the old or the new
// CURRENT.
func Current(dir string) (gen string, ok bool, err error) {
	if gen, ok, err = currentName(dir); err != nil || !ok {
		return "", false, err
	}
	if _, err := os.Stat(GenerationPath(dir, gen)); err != nil {
		return "", false, fmt.Errorf("%s names %s, which has no index file (%w): %w (or escurel rollback)", filepath.Join(dir, CurrentName), gen, err, ErrDamaged)
	}
	return gen, true, nil
}

// Current returns the live generation (see the function Current).
func (d *Dir) Current() (string, bool, error) { return Current(d.path) }

// currentName returns what CURRENT names, without checking that the
// generation exists.
func currentName(dir string) (gen string, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, CurrentName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	gen = strings.TrimSpace(string(b))
	if !IsGeneration(gen) {
		return "", false, fmt.Errorf("%s: %q is not a generation name (gen-NNNNNN): %w", filepath.Join(dir, CurrentName), gen, ErrDamaged)
	}
	return gen, true, nil
}

// Generations returns the generation directories of dir, oldest first.
func Generations(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && IsGeneration(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out) // fixed width: lexical order is numeric order
	return out, nil
}

// Publish makes gen the live generation: CURRENT is replaced by a file
// naming it (temporary file, fsync, rename, fsync of the directory). It
// refuses a gen without an index file. nil means durable. On an error
// CURRENT names the old generation or gen: re-read it with Current.
func (d *Dir) Publish(gen string) error {
	if !IsGeneration(gen) {
		return fmt.Errorf("publish %q: not a generation name", gen)
	}
	if _, err := os.Stat(d.GenerationPath(gen)); err != nil {
		return fmt.Errorf("publish %s: %w", gen, err)
	}
	if err := CheckPurged(d.path, gen); err != nil {
		return fmt.Errorf("publish %w", err)
	}
	// The generation's own entries (its index file, the marker's removal)
	// are durable before CURRENT names it.
	genDir := filepath.Join(d.path, gen)
	if err := os.Remove(filepath.Join(genDir, UnfinishedName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("publish %s: %w", gen, err)
	}
	if err := syncDir(genDir); err != nil {
		return fmt.Errorf("publish %s: %w", gen, err)
	}
	if err := writeFile(d.path, CurrentName, []byte(gen+"\n")); err != nil {
		return fmt.Errorf("publish %s: %w", gen, err)
	}
	d.mu.Lock()
	delete(d.building, gen)
	d.mu.Unlock()
	if AfterPublish != nil {
		AfterPublish(d.path, gen)
	}
	return nil
}

// PublishSettled is Publish, settled: when Publish fails, CURRENT names
// the old generation or gen, and PublishSettled re-reads it. It returns nil
// when CURRENT names gen after all (the failure came after the rename),
// else Publish's error (also when CURRENT cannot be read).
func (d *Dir) PublishSettled(gen string) error {
	err := d.Publish(gen)
	if err == nil {
		return nil
	}
	if cur, ok, rerr := d.Current(); rerr == nil && ok && cur == gen {
		return nil
	}
	return err
}

// AfterPublish, when not nil, is called after each successful Publish,
// with the directory and the generation now live. For tests: it lets one
// act (cancel a context, crash) at the moment CURRENT has moved. Set it
// before and clear it after the calls it should see.
var AfterPublish func(dir, gen string)

// NewGeneration creates the directory of the next generation, numbered one
// past the highest there and the highest ever made (LASTGEN, written
// durably first), and returns its name. The generation counts as being
// built by this process until Publish or Abandon: Clean leaves it alone.
func (d *Dir) NewGeneration() (string, error) {
	gens, err := Generations(d.path)
	if err != nil {
		return "", fmt.Errorf("new generation: %w", err)
	}
	n := 1
	if len(gens) > 0 {
		n = genNumber(gens[len(gens)-1]) + 1
	}
	if b, err := os.ReadFile(filepath.Join(d.path, LastGenName)); err == nil {
		if last, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && last >= n {
			n = last + 1
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("new generation: %w", err)
	}
	gen := genName(n)
	if err := writeFile(d.path, LastGenName, []byte(strconv.Itoa(n)+"\n")); err != nil {
		return "", fmt.Errorf("new generation: %w", err)
	}
	d.mu.Lock()
	d.building[gen] = true
	d.mu.Unlock()
	genDir := filepath.Join(d.path, gen)
	if err := os.Mkdir(genDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("new generation: %w", err)
	}
	if err := writeFile(genDir, UnfinishedName, nil); err != nil {
		return "", fmt.Errorf("new generation: %w", err)
	}
	if err := syncDir(d.path); err != nil {
		return "", fmt.Errorf("new generation: %w", err)
	}
	return gen, nil
}

// Abandon gives up a generation made by NewGeneration: it is removed
// unless CURRENT names it (a publish whose error hid its success), in which
// case it is kept and Abandon says so with ErrPublished.
func (d *Dir) Abandon(gen string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.building, gen)
	cur, ok, err := currentName(d.path)
	if err != nil {
		return fmt.Errorf("abandon %s: %w", gen, err)
	}
	if ok && cur == gen {
		return fmt.Errorf("abandon %s: %w", gen, ErrPublished)
	}
	if d.held[gen] > 0 {
		return nil // still open here; the next Clean removes it
	}
	if err := os.RemoveAll(filepath.Join(d.path, gen)); err != nil {
		return fmt.Errorf("abandon %s: %w", gen, err)
	}
	return nil
}

// ErrPublished is returned, wrapped, by Abandon for the generation CURRENT
// names: it is live and stays.
var ErrPublished = errors.New("layout: generation is live")

// ErrDamaged marks a derived file that cannot be read: a CURRENT that
// names no generation or a lost one, a generation's database that does not
// open. Everything derived is rebuilt from the blob store by escurel
// rebuild, whatever state it is in.
var ErrDamaged = errors.New("damaged; run escurel rebuild to re-derive the index from the blob store")

// Hold marks gen as open in this process until the returned function is
// called (once): Clean does not remove it meanwhile.
func (d *Dir) Hold(gen string) (release func()) {
	d.mu.Lock()
	d.held[gen]++
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			if d.held[gen]--; d.held[gen] <= 0 {
				delete(d.held, gen)
			}
			close(d.released)
			d.released = make(chan struct{})
			d.mu.Unlock()
		})
	}
}

// Clean is the one cleaner of the directory. It removes temporary files
// left by a crash (not those in use: CreateTemp), generations newer than
// CURRENT that this process is not building (unfinished rebuilds),
// generations older than the last purge (they may hold erased text), and
// generations older than CURRENT past the keep newest (CURRENT's
// included, keep ≥ 1), except those this process holds open. It never removes the generation CURRENT names.
// Without a valid CURRENT, or one naming a generation without an index
// file, only temporary files go. It returns the generations removed.
func (d *Dir) Clean(keep int) ([]string, error) {
	r, err := d.CleanFiles(keep, false)
	return r.Generations, err
}

// CleanFiles is Clean, returning everything it removed with its size; with
// dryRun it removes nothing and returns what Clean would remove now.
func (d *Dir) CleanFiles(keep int, dryRun bool) (Removal, error) {
	var out Removal
	if keep < 1 {
		return out, fmt.Errorf("clean %s: keep %d generations: want at least 1", d.path, keep)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return out, fmt.Errorf("clean %s: %w", d.path, err)
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), tmpSuffix) && !d.temps[e.Name()] {
			if fi, err := e.Info(); err == nil {
				out.TempBytes += fi.Size()
			}
			out.Temp = append(out.Temp, e.Name())
			if dryRun {
				continue
			}
			if err := os.Remove(filepath.Join(d.path, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return out, fmt.Errorf("clean %s: %w", d.path, err)
			}
		}
	}
	cur, ok, err := currentName(d.path)
	if err != nil || !ok {
		return out, nil // the generations may be all there is: the operator decides
	}
	if _, err := os.Stat(d.GenerationPath(cur)); err != nil {
		return out, nil
	}
	floor, purged, err := purgeFloor(d.path)
	if err != nil {
		return out, fmt.Errorf("clean %s: %w", d.path, err)
	}
	gens, err := Generations(d.path)
	if err != nil {
		return out, fmt.Errorf("clean %s: %w", d.path, err)
	}
	kept := 0
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		switch {
		case g == cur:
			kept++
			continue
		case g > cur:
			if d.building[g] {
				continue
			}
		case purged && g < floor:
			// erased text may lie in it: never kept for a rollback
		case kept < keep:
			kept++
			continue
		}
		if d.held[g] > 0 {
			continue
		}
		size := dirSize(filepath.Join(d.path, g))
		if !dryRun {
			if err := os.RemoveAll(filepath.Join(d.path, g)); err != nil {
				return out, fmt.Errorf("clean %s: %w", d.path, err)
			}
		}
		out.Generations = append(out.Generations, g)
		out.GenerationBytes += size
	}
	if len(out.Generations) > 0 && !dryRun {
		if err := syncDir(d.path); err != nil {
			return out, fmt.Errorf("clean %s: %w", d.path, err)
		}
	}
	return out, nil
}

// CreateTemp creates a temporary file in the directory, named by pattern
// as os.CreateTemp names it (end it in .tmp: a crash's leftover is then
// Clean's), which Clean leaves in place until release is called: a file
// written over a long time beside writers that clean, such as a publish's
// copy, made with the writer lock held and uploaded after its verify,
// which runs without it (a gc meanwhile removed it). release does not
// remove the file.
func (d *Dir) CreateTemp(pattern string) (f *os.File, release func(), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, err = os.CreateTemp(d.path, pattern); err != nil {
		return nil, nil, err
	}
	name := filepath.Base(f.Name())
	d.temps[name] = true
	return f, func() {
		d.mu.Lock()
		delete(d.temps, name)
		d.mu.Unlock()
	}, nil
}

// Previous returns the newest generation older than CURRENT's that has an
// index file; ok is false when there is none.
func (d *Dir) Previous() (gen string, ok bool, err error) {
	cur, has, err := currentName(d.path)
	if err != nil || !has {
		return "", false, err
	}
	gens, err := Generations(d.path)
	if err != nil {
		return "", false, err
	}
	for i := len(gens) - 1; i >= 0; i-- {
		if gens[i] < cur {
			if _, err := os.Stat(d.GenerationPath(gens[i])); err == nil {
				return gens[i], true, nil
			}
		}
	}
	return "", false, nil
}

// CurrentNameUnchecked returns what CURRENT names without checking that
// the generation exists (a rollback away from a lost generation needs it).
func (d *Dir) CurrentNameUnchecked() (string, bool, error) { return currentName(d.path) }

// Unfinished reports whether generation gen of dir carries the mark of one
// being built (NewGeneration) that no Publish finished.
func Unfinished(dir, gen string) bool {
	_, err := os.Stat(filepath.Join(dir, gen, UnfinishedName))
	return err == nil
}

// Resolve returns the live generation for an open. A directory of the
// one-file layout (DIR/index.duckdb, schema ≤ 7 releases) is moved into
// gen-000001 and published; a directory without an index gets gen-000001,
// made and marked as being built (created true: the caller publishes it
// once its file is initialised, or abandons it); a lone finished generation
// without CURRENT (a crash between the last write and the publish) is
// published, and a lone unfinished one (UNFINISHED: a creation or a
// rebuild into an empty directory that was killed) is removed and a new one
// made, so that part of an index is never served; several without CURRENT
// are refused, as guessing could serve an old or unfinished one. A purge
// that crashed between its mark and its publish is finished first
// (PurgedName).
func (d *Dir) Resolve() (gen string, created bool, err error) {
	if _, err := d.finishPurge(); err != nil {
		return "", false, err
	}
	if err := d.removePurged(); err != nil {
		return "", false, err
	}
	if gen, ok, err := Current(d.path); err != nil || ok {
		return gen, false, err
	}
	legacy := filepath.Join(d.path, FileName)
	if _, err := os.Stat(legacy); err == nil {
		gen = genName(1)
		if err := os.MkdirAll(filepath.Join(d.path, gen), 0o700); err != nil {
			return "", false, err
		}
		for _, suffix := range []string{".wal", ""} { // the log first: a crash between leaves the main file where it was
			err := os.Rename(legacy+suffix, GenerationPath(d.path, gen)+suffix)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", false, fmt.Errorf("move %s into %s: %w", legacy+suffix, gen, err)
			}
		}
		return gen, false, d.Publish(gen)
	}
	gens, err := Generations(d.path)
	if err != nil {
		return "", false, err
	}
	switch len(gens) {
	case 0:
		gen, err := d.NewGeneration()
		return gen, err == nil, err
	case 1:
		if Unfinished(d.path, gens[0]) {
			// A creation or a rebuild into an empty directory that never
			// finished: it may hold part of the documents, so it is not
			// served. Start a new, empty index (a rebuild can fill it).
			if err := os.RemoveAll(filepath.Join(d.path, gens[0])); err != nil {
				return "", false, err
			}
			gen, err := d.NewGeneration()
			return gen, err == nil, err
		}
		if _, err := os.Stat(d.GenerationPath(gens[0])); err != nil {
			return "", false, fmt.Errorf("%s has %s without an index file and no %s: remove it, or run escurel rebuild", d.path, gens[0], CurrentName)
		}
		// Finished (no marker) but never published: a crash between the
		// two, or a generation made before markers existed.
		return gens[0], false, d.Publish(gens[0])
	}
	return "", false, fmt.Errorf("%s has generations %s but no %s: write the live one's name into it (echo %s > %s), or run escurel rebuild",
		d.path, strings.Join(gens, ", "), CurrentName, gens[len(gens)-1], filepath.Join(d.path, CurrentName))
}

// UpgradeLayout moves an index file of the one-file layout into
// gen-000001 and publishes it; a no-op for a directory with a CURRENT or
// without an index, and for a damaged CURRENT (ErrDamaged: a rebuild
// replaces it).
func (d *Dir) UpgradeLayout() error {
	if _, ok, err := currentName(d.path); errors.Is(err, ErrDamaged) || ok {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(d.path, FileName)); err != nil {
		return nil
	}
	_, _, err := d.Resolve()
	return err
}

// LivePath returns the index file of the live generation of dir, or the
// one-file layout's DIR/index.duckdb; an error wrapping fs.ErrNotExist
// when there is neither. It takes no lock.
func LivePath(dir string) (string, error) {
	gen, ok, err := Current(dir)
	if err != nil {
		return "", err
	}
	if ok {
		return GenerationPath(dir, gen), nil
	}
	legacy := filepath.Join(dir, FileName)
	if _, err := os.Stat(legacy); err != nil {
		return "", err
	}
	return legacy, nil
}

// Exists reports whether dir holds an index: a CURRENT, or an index file
// of the one-file layout.
func Exists(dir string) bool {
	_, err := LivePath(dir)
	return err == nil
}

// StoreURL returns the blob store the index directory dir derives from:
// the URL its BLOBS file records, or DefaultBlobURL.
func StoreURL(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, BlobsName))
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return DefaultBlobURL(dir)
}

// SetStoreURL records u as the blob store the directory derives from
// (BLOBS, written durably), or removes BLOBS when u is the default. A
// mem:// store is never recorded.
func (d *Dir) SetStoreURL(u string) error {
	if strings.HasPrefix(u, "mem:") {
		return nil
	}
	def, err := DefaultBlobURL(d.path)
	if err != nil {
		return err
	}
	if u == def {
		err := os.Remove(filepath.Join(d.path, BlobsName))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("record blob store: %w", err)
		}
		if err == nil {
			return syncDir(d.path)
		}
		return nil
	}
	if err := writeFile(d.path, BlobsName, []byte(u+"\n")); err != nil {
		return fmt.Errorf("record blob store: %w", err)
	}
	return nil
}

// DefaultBlobURL returns the blob store of an index directory when none is
// configured: file://<absolute dir>/blobs.
func DefaultBlobURL(dir string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(dir, "blobs"))
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}
