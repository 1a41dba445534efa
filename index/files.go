package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/escurel/escurel/index/extract"
)

// DefaultMaxFileBytes is the default size cap of an ingested file: 100 MiB.
const DefaultMaxFileBytes = 100 << 20

// IngestOptions apply to every file of an IngestFiles call.
type IngestOptions struct {
	// Language and Sensitivity apply to documents whose front matter does
	// not set them (Input.Language, Input.Sensitivity).
	Language    string
	Sensitivity string
	// Meta is every file's Input.Meta: nil keeps what documents already
	// in the index were given.
	Meta map[string]any
	// MaxFileBytes caps a file's size; a larger file fails unread.
	// 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Listed, when not nil, is called once the paths are walked, with the
	// number of files found (the total Progress counts up to).
	Listed func(files int)
	// Progress, when not nil, is called after each file, from the calling
	// goroutine.
	Progress func(FileResult)
}

// FileResult is the outcome for one file.
type FileResult struct {
	Path   string // as found by the walk
	Result        // valid when Err is nil
	Bytes  int64
	Err    error // a *DocumentError; nil on success
}

// Summary totals an IngestFiles call.
type Summary struct {
	Added, Replaced, Unchanged int
	MetaUpdated                int // same bytes, other metadata (Status MetaUpdated)
	// Failed lists the files that are not searchable, in walk order: those
	// stored as failed (Result.Status Failed) and those of which nothing
	// was stored (Status "").
	Failed []FileResult
	// Formats totals the files read, by format name (extract.Extractor
	// Name: "markdown", "pdf", …).
	Formats map[string]*FormatSummary
	Skipped []string // in directories: hidden entries, symlinked directories, other extensions
	Blocks  int      // blocks of the added and replaced documents
	Bytes   int64    // bytes read
	Elapsed time.Duration

	// Textless lists the files stored with pages on which no block lies
	// (Result.TextlessPages: scanned pages), in walk order.
	Textless []FileResult
}

// FormatSummary totals the files of one format in an IngestFiles call.
type FormatSummary struct {
	Documents int           `json:"documents"`  // files read, failed ones included
	Pages     int           `json:"pages"`      // pages of the paged ones (PDF)
	Blocks    int           `json:"blocks"`     // blocks they have now (unchanged ones included)
	Failed    int           `json:"failed"`     // files not searchable
	Extract   time.Duration `json:"extract_ns"` // extraction wall time, summed over files

	// TextlessPages counts their pages without a block (no text layer).
	TextlessPages int `json:"textless_pages"`
}

// IngestFiles ingests files and directories (recursively, in lexical order).
//
// A document's source is the file's absolute path with symbolic links
// resolved, so one file reached by two paths is one document. In a
// directory, hidden entries (name starting with "."), symbolic links to
// directories (not followed) and files with an extension escurel does not
// read are skipped and listed in Summary.Skipped.
//
// A bad file is recorded in Summary.Failed and the batch goes on. Files
// whose bytes fail extraction (Ingest) and files over the size cap are
// also stored as failed documents, listed by Index.Failed (over the cap,
// with a record but no blob: the bytes are never read). Of an unreadable
// file or directory, one that is not a regular file (a FIFO, a device),
// or a named file whose type escurel does not read, nothing is stored. A
// named file is read whatever its extension, and its content decides its
// type (extract.Detect). The returned
// error is for what stops the batch: a cancelled ctx, a path argument that
// does not exist, a storage failure. Summary counts what was done before it.
func (ix *Index) IngestFiles(ctx context.Context, paths []string, opts IngestOptions) (sum Summary, err error) {
	start := time.Now()
	defer func() { sum.Elapsed = time.Since(start) }()
	if opts.MaxFileBytes == 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	files, err := listFiles(ctx, paths, &sum)
	if err != nil {
		return sum, err
	}
	return sum, ix.ingestListed(ctx, files, opts, &sum)
}

// ingestListed ingests listed files in batches, adding the outcomes to
// sum in the files' order. opts.MaxFileBytes is resolved.
//
// Up to ingestAhead batches are under way at once: while one commits
// (DuckDB's appends and commit, under the writer lock: one core), the
// next reads its files and derives them (extraction, chunking, analysis,
// embedding, its blobs stored), so an ingest of many files keeps both
// cores of a small machine busy. A batch starts only while the bytes of
// the files under way stay within ingestAheadBytes, or alone. A batch
// that fails starts no more: those under way finish, and one that
// commits is counted, so the summary says what is stored; the first
// error is returned.
func (ix *Index) ingestListed(ctx context.Context, files []fileEntry, opts IngestOptions, sum *Summary) error {
	if opts.Listed != nil {
		opts.Listed(len(files))
	}
	type flight struct {
		out   []FileResult
		err   error
		bytes int64
		done  chan struct{}
	}
	var failed atomic.Bool // a batch failed: start no more
	// next is the size of the next batch: at most batchFiles files, or
	// fewer once they reach batchBytes.
	next := func() (n int, size int64) {
		for n < len(files) && n < batchFiles && size < batchBytes {
			size += files[n].size
			n++
		}
		return n, size
	}
	var queue []*flight
	var inFlight int64
	start := func() bool {
		n, size := next()
		if n == 0 || failed.Load() || len(queue) >= ingestAhead || len(queue) > 0 && inFlight+size > ingestAheadBytes {
			return false
		}
		batch := files[:n]
		files = files[n:]
		f := &flight{bytes: size, done: make(chan struct{})}
		inFlight += size
		queue = append(queue, f)
		go func() {
			defer close(f.done)
			f.out, f.err = ix.ingestFileBatch(ctx, batch, opts)
			if f.err != nil && !Committed(f.err) {
				failed.Store(true)
			}
		}()
		return true
	}
	var err error
	for start() {
	}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		<-f.done
		inFlight -= f.bytes
		if f.out != nil { // stored, even when an error followed the commit
			tally(f.out, opts, sum)
		}
		if f.err != nil && err == nil {
			err = f.err
			failed.Store(true)
		}
		for start() {
		}
	}
	return err
}

// ingestAheadBytes bounds the bytes of the files ingestListed holds
// under way while more than one batch is: a batch that would pass it
// waits, and then runs alone (one holding a file of up to MaxFileBytes).
const ingestAheadBytes = 2 * batchBytes

// ingestAhead is how many batches ingestListed has under way at once (a
// variable for BenchmarkIngestFiles, which measures 1 against 2). On 2
// cores, SciFact's 5,183 abstracts as Markdown files: 1,911 documents a
// second against 1,472 with the default embedder (hash/384), 2,913
// against 2,775 with none; the command line's ingest of them took
// 3.04-3.31 s against 3.46-4.27 (three alternating pairs).
var ingestAhead = 2

// Files are ingested in batches of at most batchFiles files or, past
// batchBytes, one transaction per batch.
const (
	batchFiles = 64
	batchBytes = 32 << 20
)

type fileEntry struct {
	path  string // as found by the walk
	real  string // absolute, symbolic links resolved: the document's source; "" when unknown (err)
	size  int64
	mtime int64 // modification time, nanoseconds since the Unix epoch
	err   error // why the file cannot be ingested, found while listing
	// sensitivity, when not "", replaces the options' (Sync sets it for a
	// file whose bytes a more sensitive document holds).
	sensitivity string
}

// listFiles expands paths into the files to ingest, in order, each once.
func listFiles(ctx context.Context, paths []string, sum *Summary) ([]fileEntry, error) {
	var files []fileEntry
	seen := map[string]bool{}
	// add lists the file at p, whose target info is fi; real, when not
	// "", is its real absolute path, known without resolving it.
	add := func(p, real string, fi fs.FileInfo) {
		e := fileEntry{path: p, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		var err error
		if real == "" {
			if real, err = filepath.EvalSymlinks(p); err == nil {
				real, err = filepath.Abs(real)
			}
		}
		switch {
		case err != nil:
			e.err = err
		case !fi.Mode().IsRegular():
			e.err = fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
		}
		e.real = real
		if e.err == nil && !utf8.ValidString(real) {
			// A source is stored as text: a name that is not UTF-8 would
			// fail the whole batch's transaction.
			e.err = errNameNotUTF8
		}
		if e.err != nil {
			e.err = &DocumentError{Source: p, Err: e.err}
		} else if seen[real] {
			return
		}
		seen[real] = true
		files = append(files, e)
	}
	for _, root := range paths {
		fi, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		if !fi.IsDir() {
			add(root, "", fi)
			continue
		}
		realRoot, err := filepath.EvalSymlinks(root) // walk a named symlinked directory
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		absRoot, err := filepath.Abs(realRoot)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		err = filepath.WalkDir(realRoot, func(p string, d fs.DirEntry, err error) error {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			shown := filepath.Join(root, strings.TrimPrefix(p, realRoot))
			if err != nil {
				if p == realRoot {
					return err
				}
				files = append(files, fileEntry{path: shown, err: &DocumentError{Source: shown, Err: err}})
				if d != nil && d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if p != realRoot && strings.HasPrefix(d.Name(), ".") {
				sum.Skipped = append(sum.Skipped, shown)
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			fi, err := os.Stat(p) // follows a symbolic link
			if err == nil && fi.IsDir() {
				sum.Skipped = append(sum.Skipped, shown) // symlinked directory: not followed
				return nil
			}
			if _, mtErr := extract.MediaType(d.Name()); mtErr != nil {
				sum.Skipped = append(sum.Skipped, shown)
				return nil
			}
			if err != nil {
				files = append(files, fileEntry{path: shown, err: &DocumentError{Source: shown, Err: err}})
				return nil
			}
			// Under the resolved root, a walked entry that is not a
			// symbolic link is its own real path (WalkDir follows no
			// link): resolving it again would cost a lstat per path
			// component, the most of a walk of unchanged files.
			real := ""
			if d.Type()&fs.ModeSymlink == 0 {
				real = filepath.Join(absRoot, strings.TrimPrefix(p, realRoot))
			}
			add(shown, real, fi)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("ingest %s: %w", root, err)
		}
	}
	return files, nil
}

// ingestFileBatch reads files and ingests them in one transaction, and
// returns their outcomes in order (tally adds them to a summary). An
// error before the commit returns no outcomes (nothing is stored); one
// after it (Committed: a merge) returns them with it.
func (ix *Index) ingestFileBatch(ctx context.Context, files []fileEntry, opts IngestOptions) ([]FileResult, error) {
	out := make([]FileResult, len(files))
	var ins []input
	var at []int // ins[j] is files[at[j]]
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i].Path = f.path
		if out[i].Err = f.err; f.err != nil {
			continue
		}
		in := input{Input: Input{Source: filepath.ToSlash(f.real), Name: filepath.Base(f.real), Language: opts.Language, Sensitivity: firstNonEmpty(f.sensitivity, opts.Sensitivity),
			Meta: opts.Meta}, size: f.size, mtime: f.mtime}
		data, err := readFile(f, opts.MaxFileBytes)
		switch {
		case errors.Is(err, errTooLarge):
			if _, mtErr := extract.MediaType(f.path); mtErr != nil {
				out[i].Err = &DocumentError{Source: f.real, Err: err}
				continue
			}
			in.failure = err.Error()
		case err != nil:
			out[i].Err = &DocumentError{Source: f.real, Err: err}
			continue
		}
		out[i].Bytes = int64(len(data))
		in.Data = data
		ins = append(ins, in)
		at = append(at, i)
	}
	res, errs, err := ix.ingest(ctx, ins)
	if err != nil && !Committed(err) {
		return nil, err
	}
	for j, i := range at {
		out[i].Result, out[i].Err = res[j], errs[j]
	}
	return out, err // after a commit, err is what failed after it: the outcomes stand
}

// tally adds the outcomes of a batch of files to sum, and shows each to
// opts.Progress.
func tally(out []FileResult, opts IngestOptions, sum *Summary) {
	for _, fr := range out {
		sum.Bytes += fr.Bytes
		if fr.MediaType != "" {
			if sum.Formats == nil {
				sum.Formats = map[string]*FormatSummary{}
			}
			name := fr.MediaType
			if e, err := extract.For(fr.MediaType); err == nil {
				name = e.Name
			}
			f := sum.Formats[name]
			if f == nil {
				f = &FormatSummary{}
				sum.Formats[name] = f
			}
			f.Documents++
			f.Pages += fr.Pages
			f.TextlessPages += fr.TextlessPages
			f.Blocks += fr.Blocks
			f.Extract += fr.ExtractTime
			if fr.Err != nil {
				f.Failed++
			}
		}
		if fr.Err == nil && fr.TextlessPages > 0 {
			sum.Textless = append(sum.Textless, fr)
		}
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
			case MetaUpdated:
				sum.MetaUpdated++
			}
			if fr.Status != Unchanged && fr.Status != MetaUpdated {
				sum.Blocks += fr.Blocks
			}
		}
		if opts.Progress != nil {
			opts.Progress(fr)
		}
	}
}

// errNameNotUTF8 is a file whose path is not valid UTF-8: escurel cannot
// name it as a source. The DocumentError prints the path escaped.
var errNameNotUTF8 = errors.New("file name is not valid UTF-8: rename the file")

// errTooLarge is a file over the size cap.
var errTooLarge = errors.New("file over the size cap")

// readFile reads a listed file after checking, without reading it, that
// its size is within max.
func readFile(f fileEntry, max int64) ([]byte, error) {
	if f.size > max {
		return nil, fmt.Errorf("%w: %d bytes, over %d; not read, so no rebuild can retry it: ingest it again with a larger --max-file-bytes", errTooLarge, f.size, max)
	}
	fh, err := os.Open(f.real)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes; not read, so no rebuild can retry it: ingest it again with a larger --max-file-bytes", errTooLarge, max)
	}
	return data, nil
}
