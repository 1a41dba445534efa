package index

import (
	"context"
	"errors"
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
	one := func(p string) error {
		fr := ix.ingestFile(ctx, p, opts)
		switch {
		case fr.Err == nil:
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
		case isFileError(fr.Err):
			sum.Failed = append(sum.Failed, fr)
		default:
			return fr.Err
		}
		sum.Bytes += fr.Bytes
		if opts.Progress != nil {
			opts.Progress(fr)
		}
		return nil
	}
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return sum, fmt.Errorf("ingest: %w", err)
		}
		if !info.IsDir() {
			if err := one(root); err != nil {
				return sum, err
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
			return one(p)
		})
		if err != nil {
			return sum, fmt.Errorf("ingest %s: %w", root, err)
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

func (ix *Index) ingestFile(ctx context.Context, p string, opts IngestOptions) FileResult {
	fr := FileResult{Path: p}
	abs, err := filepath.Abs(p)
	if err != nil {
		fr.Err = &DocumentError{Source: p, Err: err}
		return fr
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		fr.Err = &DocumentError{Source: abs, Err: err}
		return fr
	}
	fr.Bytes = int64(len(data))
	fr.Result, fr.Err = ix.Ingest(ctx, Input{
		Source: filepath.ToSlash(abs), Name: filepath.Base(abs), Data: data,
		Language: opts.Language, Sensitivity: opts.Sensitivity,
	})
	return fr
}

func isFileError(err error) bool {
	var de *DocumentError
	return errors.As(err, &de)
}
