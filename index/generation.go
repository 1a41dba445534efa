package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/escurel/escurel/blobstore"
)

// An index directory holds generations: gen-000001/index.duckdb,
// gen-000002/index.duckdb, … and a file CURRENT naming the live one. A
// rebuild writes a new generation beside the live one and then points
// CURRENT at it (SetCurrent: written to a temporary file, fsynced, renamed,
// the directory fsynced), so a reader always opens a whole generation and
// a crash at any step leaves the live one as it was. Generations newer than
// CURRENT are unfinished rebuilds, never served, removed by the next
// rebuild (Prune).

// CurrentName is the file naming the live generation.
const CurrentName = "CURRENT"

var genPattern = regexp.MustCompile(`^gen-[0-9]{6}$`)

func genName(n int) string { return fmt.Sprintf("gen-%06d", n) }

func genNumber(gen string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(gen, "gen-"))
	return n
}

// GenerationPath returns the DuckDB file of generation gen of dir.
func GenerationPath(dir, gen string) string { return filepath.Join(dir, gen, FileName) }

// Current returns the live generation of dir, as CURRENT names it; ok is
// false when dir has no CURRENT. A CURRENT that does not name a generation
// directory holding an index file is an error.
func Current(dir string) (gen string, ok bool, err error) {
	if gen, ok, err = currentName(dir); err != nil || !ok {
		return "", false, err
	}
	if _, err := os.Stat(GenerationPath(dir, gen)); err != nil {
		return "", false, fmt.Errorf("%s names %s, which has no index file (%w); run escurel rollback or escurel rebuild", filepath.Join(dir, CurrentName), gen, err)
	}
	return gen, true, nil
}

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
	if !genPattern.MatchString(gen) {
		return "", false, fmt.Errorf("%s: %q is not a generation name (gen-NNNNNN)", filepath.Join(dir, CurrentName), gen)
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
		if e.IsDir() && genPattern.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out) // fixed width: lexical order is numeric order
	return out, nil
}

// SetCurrent makes gen the live generation of dir, atomically and durably.
// The caller holds the directory's lock.
func SetCurrent(dir, gen string) error {
	if !genPattern.MatchString(gen) {
		return fmt.Errorf("set current: %q is not a generation name", gen)
	}
	if _, err := os.Stat(GenerationPath(dir, gen)); err != nil {
		return fmt.Errorf("set current %s: %w", gen, err)
	}
	tmp := filepath.Join(dir, CurrentName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(gen + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("set current %s: %w", gen, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, CurrentName)); err != nil {
		return fmt.Errorf("set current %s: %w", gen, err)
	}
	return syncDir(dir)
}

// lastGenName is the file recording the highest generation number ever
// made in a directory, so that a number is never given twice (a
// generation rolled back from, then pruned, had content of its own).
const lastGenName = "LASTGEN"

// NewGeneration creates the directory of the next generation of dir, one
// past the highest there or ever made there, and returns its name. The
// caller holds the directory's lock.
func NewGeneration(dir string) (string, error) {
	gens, err := Generations(dir)
	if err != nil {
		return "", err
	}
	n := 1
	if len(gens) > 0 {
		n = genNumber(gens[len(gens)-1]) + 1
	}
	if b, err := os.ReadFile(filepath.Join(dir, lastGenName)); err == nil {
		if last, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && last >= n {
			n = last + 1
		}
	}
	gen := genName(n)
	if err := os.WriteFile(filepath.Join(dir, lastGenName), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dir, gen), 0o755); err != nil {
		return "", err
	}
	return gen, syncDir(dir)
}

// Previous returns the newest generation of dir older than the live one;
// ok is false when there is none.
func Previous(dir string) (gen string, ok bool, err error) {
	cur, has, err := currentName(dir)
	if err != nil || !has {
		return "", false, err
	}
	gens, err := Generations(dir)
	if err != nil {
		return "", false, err
	}
	for i := len(gens) - 1; i >= 0; i-- {
		if gens[i] < cur {
			if _, err := os.Stat(GenerationPath(dir, gens[i])); err == nil {
				return gens[i], true, nil
			}
		}
	}
	return "", false, nil
}

// Prune removes the generations of dir newer than the live one (unfinished
// rebuilds) and all but the keep newest of the others, the live one always
// kept. It returns the names removed. The caller holds the directory's
// lock.
func Prune(dir string, keep int) ([]string, error) {
	cur, ok, err := currentName(dir)
	if err != nil || !ok {
		return nil, err
	}
	gens, err := Generations(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	kept := 0
	for i := len(gens) - 1; i >= 0; i-- {
		g := gens[i]
		switch {
		case g > cur:
		case g == cur || kept < keep:
			kept++
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, g)); err != nil {
			return removed, err
		}
		removed = append(removed, g)
	}
	return removed, syncDir(dir)
}

// resolve returns the live generation of dir for Open. A directory in the
// layout of schema ≤ 7 releases (dir/index.duckdb) is moved into
// gen-000001; a directory without an index gets gen-000001, made current
// by Open once the file is initialised (created true); a lone generation
// without CURRENT is adopted; several are refused. The caller holds the
// directory's lock.
func resolve(dir string) (gen string, created bool, err error) {
	if gen, ok, err := Current(dir); err != nil || ok {
		return gen, false, err
	}
	legacy := filepath.Join(dir, FileName)
	if _, err := os.Stat(legacy); err == nil {
		gen = genName(1)
		if err := os.MkdirAll(filepath.Join(dir, gen), 0o755); err != nil {
			return "", false, err
		}
		for _, suffix := range []string{"", ".wal"} {
			err := os.Rename(legacy+suffix, GenerationPath(dir, gen)+suffix)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", false, fmt.Errorf("move %s into %s: %w", legacy+suffix, gen, err)
			}
		}
		return gen, false, SetCurrent(dir, gen)
	}
	// No CURRENT. One generation: a creation or a layout upgrade that
	// crashed before writing CURRENT; it is the index (Open completes an
	// unfinished creation). Several: CURRENT was lost, and guessing could
	// serve an old or unfinished one.
	gens, err := Generations(dir)
	if err != nil {
		return "", false, err
	}
	switch len(gens) {
	case 0:
		gen = genName(1)
		return gen, true, os.Mkdir(filepath.Join(dir, gen), 0o755)
	case 1:
		return gens[0], false, SetCurrent(dir, gens[0])
	}
	return "", false, fmt.Errorf("%s has generations %s but no %s: write the live one's name into it (echo %s > %s), or run escurel rebuild",
		dir, strings.Join(gens, ", "), CurrentName, gens[len(gens)-1], filepath.Join(dir, CurrentName))
}

// livePath returns the index file Inspect reads: the live generation's, or
// the legacy dir/index.duckdb; fs.ErrNotExist when there is neither.
func livePath(dir string) (string, error) {
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// Exists reports whether dir holds an index: a CURRENT, or an index file of
// the older one-file layout.
func Exists(dir string) bool {
	_, err := livePath(dir)
	return err == nil
}

// UpgradeLayout moves an index file of the older one-file layout
// (dir/index.duckdb) into gen-000001 and makes it current; a no-op for a
// directory with a CURRENT or without an index. The caller holds the
// directory's lock.
func UpgradeLayout(dir string) error {
	if _, ok, err := currentName(dir); err != nil || ok {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		return nil
	}
	_, _, err := resolve(dir)
	return err
}

// RollbackOptions configure Rollback.
type RollbackOptions struct {
	// Blobs, when not nil, is the blob store: the generation rolled back
	// to must verify against its records (Verify), or the rollback is
	// refused. A document deleted or made restricted since that generation
	// was built would otherwise be served again as it was.
	Blobs *blobstore.Store
	// Force rolls back although the generation does not verify.
	Force bool
}

// Rollback makes the generation before the live one live again and returns
// both names. It takes the directory's lock, so no process may have the
// index open; a process that has it open switches with Index.Reload. The
// generation rolled back from stays on disk until the next rebuild removes
// it.
func Rollback(ctx context.Context, dir string, opts *RollbackOptions) (from, to string, err error) {
	if opts == nil {
		opts = &RollbackOptions{}
	}
	lock, err := LockDir(dir)
	if err != nil {
		return "", "", err
	}
	defer lock.Unlock()
	from, ok, err := currentName(dir) // the live file may be lost: that is a reason to roll back
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", fmt.Errorf("rollback %s: no generations (no %s)", dir, CurrentName)
	}
	to, ok, err = Previous(dir)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", fmt.Errorf("rollback %s: no generation older than %s; nothing to roll back to", dir, from)
	}
	if opts.Blobs != nil && !opts.Force {
		ix, err := OpenGeneration(ctx, dir, to, &Options{Blobs: opts.Blobs})
		if err != nil {
			return "", "", fmt.Errorf("rollback %s to %s: %w", dir, to, err)
		}
		v, err := ix.Verify(ctx, &VerifyOptions{SkipOrphans: true})
		ix.Close()
		if err != nil {
			return "", "", fmt.Errorf("rollback %s to %s: %w", dir, to, err)
		}
		if !v.OK() {
			return "", "", fmt.Errorf("rollback %s to %s: refused: %d documents changed in the blob store since %s was built (deleted, re-ingested or re-classified; first: %s), and rolling back would serve them as they were; run escurel rebuild, or force the rollback (escurel rollback --force; RollbackOptions.Force)",
				dir, to, len(v.RowsWithoutRecords)+len(v.RecordsWithoutRows), to, firstOf(v.RowsWithoutRecords, v.RecordsWithoutRows))
		}
	}
	return from, to, SetCurrent(dir, to)
}

func firstOf(lists ...[]string) string {
	for _, l := range lists {
		if len(l) > 0 {
			return l[0]
		}
	}
	return ""
}

// Documents returns the index's documents, doc id → source.
func (ix *Index) Documents(ctx context.Context) (map[string]string, error) {
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	rows, err := ix.db.QueryContext(ctx, `SELECT doc_id, source FROM documents`)
	if err != nil {
		return nil, fmt.Errorf("documents: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, src string
		if err := rows.Scan(&id, &src); err != nil {
			return nil, err
		}
		out[id] = src
	}
	return out, rows.Err()
}

// CopyTo writes a copy of the generation open to the file dst, with writes
// held back and the write-ahead log folded in first, so the copy is one
// consistent state.
func (ix *Index) CopyTo(ctx context.Context, dst string) error {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.genMu.RLock()
	defer ix.genMu.RUnlock()
	if _, err := ix.db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("copy %s: %w", ix.path, err)
	}
	return copyFile(ix.path, dst)
}

// CopyGeneration copies the live generation's file of dir to dst. The
// caller holds the directory's lock and no process has the index open.
func CopyGeneration(dir, dst string) error {
	src, err := livePath(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(src + ".wal"); err == nil {
		return fmt.Errorf("copy %s: it has a write-ahead log; open and close the index first", src)
	}
	return copyFile(src, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
