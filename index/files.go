package index

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/escurel/escurel/index/extract"
)

// IngestOptions apply to every file of an IngestFiles call.
type IngestOptions struct {
	// Language and Sensitivity apply to documents whose front matter does
	// not set them (Input.Language, Input.Sensitivity).
	Language    string
	Sensitivity string
	// Progress, when not nil, is called after each file, from the calling
	// goroutine.
	Progress func(FileResult)
}

// FileResult is the outcome for one file.
type FileResult struct {
	Path   string // as found by the walk
	Result        // valid when Err is nil
	Bytes  int64
	Err    error // a *DocumentError or a read error; nil on success
}

// Summary totals an IngestFiles call.
type Summary struct {
	Added, Replaced, Unchanged int
	Failed                     []FileResult // files that could not be ingested, in walk order
	Skipped                    []string     // files in directories with an extension escurel does not read, and hidden entries
	Blocks                     int          // blocks of the added and replaced documents
	Bytes                      int64        // bytes read
	Elapsed                    time.Duration
}

// IngestFiles ingests files and directories (recursively, in lexical order).
// In a directory, hidden entries (name starting with ".") and files with an
// extension escurel does not read are skipped and listed in
// Summary.Skipped; a file named explicitly must be readable. A document's
// source is its absolute path.
//
// A bad file (unreadable, empty, binary, invalid UTF-8, …) is recorded in
// Summary.Failed and the batch goes on. The returned error is for what stops
// the batch: a cancelled ctx, a missing path argument, a storage failure.
func (ix *Index) IngestFiles(ctx context.Context, paths []string, opts IngestOptions) (Summary, error) {
	start := time.Now()
	var sum Summary
	files, err := listFiles(ctx, paths, &sum)
	if err != nil {
		return sum, err
	}
	for len(files) > 0 {
		n, size := 0, int64(0)
		for n < len(files) && n < batchFiles && size < batchBytes {
			size += files[n].size
			n++
		}
		if err := ix.ingestFileBatch(ctx, files[:n], opts, &sum); err != nil {
			return sum, err
		}
		files = files[n:]
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// Files are ingested in batches of at most batchFiles files or, past
// batchBytes, one transaction per batch.
const (
	batchFiles = 64
	batchBytes = 32 << 20
)

type fileEntry struct {
	path string // as found by the walk
	abs  string
	size int64
}

// listFiles expands paths into the files to ingest, in order, each once.
func listFiles(ctx context.Context, paths []string, sum *Summary) ([]fileEntry, error) {
	var files []fileEntry
	seen := map[string]bool{}
	add := func(p string, size int64) error {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("ingest %s: %w", p, err)
		}
		if !seen[abs] {
			seen[abs] = true
			files = append(files, fileEntry{path: p, abs: abs, size: size})
		}
		return nil
	}
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		if !info.IsDir() {
			if err := add(root, info.Size()); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			if p != root && strings.HasPrefix(d.Name(), ".") {
				sum.Skipped = append(sum.Skipped, p)
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			if _, err := extract.MediaType(d.Name()); err != nil {
				sum.Skipped = append(sum.Skipped, p)
				return nil
			}
			var size int64
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			return add(p, size)
		})
		if err != nil {
			return nil, fmt.Errorf("ingest %s: %w", root, err)
		}
	}
	return files, nil
}

// ingestFileBatch reads files and ingests them in one transaction, adding
// the outcomes to sum and reporting each file to opts.Progress.
func (ix *Index) ingestFileBatch(ctx context.Context, files []fileEntry, opts IngestOptions, sum *Summary) error {
	out := make([]FileResult, len(files))
	var ins []Input
	var at []int // ins[j] is files[at[j]]
	for i, f := range files {
		out[i].Path = f.path
		data, err := os.ReadFile(f.abs)
		if err != nil {
			out[i].Err = &DocumentError{Source: f.abs, Err: err}
			continue
		}
		out[i].Bytes = int64(len(data))
		ins = append(ins, Input{
			Source: filepath.ToSlash(f.abs), Name: filepath.Base(f.abs), Data: data,
			Language: opts.Language, Sensitivity: opts.Sensitivity,
		})
		at = append(at, i)
	}
	res, errs, err := ix.IngestBatch(ctx, ins)
	if err != nil {
		return err
	}
	for j, i := range at {
		out[i].Result, out[i].Err = res[j], errs[j]
	}
	for _, fr := range out {
		sum.Bytes += fr.Bytes
		if fr.Err != nil {
			sum.Failed = append(sum.Failed, fr)
		} else {
			switch fr.Status {
			case Added:
				sum.Added++
			case Replaced:
				sum.Replaced++
			case Unchanged:
				sum.Unchanged++
			}
			if fr.Status != Unchanged {
				sum.Blocks += fr.Blocks
			}
		}
		if opts.Progress != nil {
			opts.Progress(fr)
		}
	}
	return nil
}
