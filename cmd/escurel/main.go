// Command escurel is an embedded document index for retrieval-augmented
// generation: it ingests documents into a DuckDB index backed by a blob
// store and searches them.
//
//	escurel [--index DIR] [--blobs URL] <command> [flags] [args]
//
// Commands: ingest, sync, search, documents, status, rebuild, … Run "escurel help" for details.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	// Blob store URL schemes this binary opens (credentials come from each
	// cloud's usual environment). A Go program using the library registers
	// the ones it needs itself.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	// The onnx embedder, registered by name; a Go program using the
	// library imports it only if it runs ONNX models.
	_ "github.com/escurel/escurel/embed/onnx"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/chunk"
	// The PDF extractor (PDFium on wazero), registered by media type; a
	// Go program using the library imports it only if it reads PDFs.
	"github.com/escurel/escurel/index/extract/pdf"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/rebuild"
	"github.com/escurel/escurel/rerank"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	err := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(m.Stderr, err))
}

// Main runs escurel commands with injected output and environment, so tests
// run them in-process.
type Main struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string

	// live, when not nil, is the index that escurel serve holds in this
	// process, liveDir its directory: a command forwarded by a CLI
	// (remote.go) runs on it instead of opening the directory, whose
	// lock the server holds. wd is then the client's working directory.
	live    *index.Index
	liveDir string
	wd      string
	// exclusive, in a server, runs a write command as one of its write
	// jobs (serve.Server.RunWrite): one write at a time.
	exclusive func(ctx context.Context, kind string, fn func(context.Context) error) error
}

// errUsage marks a command-line mistake: exit status 2.
var errUsage = errors.New("usage")

// errFailed marks a command that ran but reports a failure it has already
// printed (such as files that could not be ingested): exit status 1.
var errFailed = errors.New("failed")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

func exitCode(stderr io.Writer, err error) int {
	var forwarded exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &forwarded):
		return int(forwarded) // the server printed the command's messages
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFailed):
		return 1
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "escurel: %s\nTry: escurel help\n", shown(strings.TrimPrefix(err.Error(), "usage: "), true))
		return 2
	}
	fmt.Fprintf(stderr, "escurel: %s\n", shown(err.Error(), true))
	if a := advice(err); a != "" {
		fmt.Fprintf(stderr, "Fix: %s\n", a)
	}
	return 1
}

// advice turns the library's typed errors into the command that fixes
// them, for an operator.
func advice(err error) string {
	var mismatch *index.MismatchError
	var missing *rebuild.MissingError
	var stale *index.StaleError
	switch {
	case errors.As(err, &mismatch):
		return fmt.Sprintf("run `escurel rebuild --%s '%s'` to rebuild the index from the blob store with the new setting, or drop the setting to use the index's own",
			strings.ToLower(mismatch.Option), mismatch.Want)
	case errors.As(err, &missing):
		return "check --blobs, or run `escurel rebuild --allow-missing` to drop those documents"
	case errors.Is(err, rebuild.ErrNewFailures):
		return "if a limit was too tight (--extract-timeout, --max-unzipped-bytes), rebuild again without it; to take them out of service, run `escurel rebuild --allow-failures`"
	case errors.As(err, &stale):
		return "run `escurel rebuild`, or `escurel rollback --force` to serve the old generation anyway"
	case errors.Is(err, index.ErrPurged):
		return "a purge erased documents that the older generations held; run `escurel rebuild` to re-derive the index from the blob store instead"
	case errors.Is(err, index.ErrDeleteAll):
		return "mount or restore the directory; if its files are gone for good, run `escurel sync --allow-delete-all DIR`"
	case errors.Is(err, index.ErrDowngrade):
		return "to lower the documents' sensitivity, run `escurel sync --allow-downgrade --sensitivity LEVEL DIR`"
	case errors.Is(err, index.ErrNoVectors):
		return "search with --mode bm25, or run `escurel rebuild --embedder hash` to add vectors"
	}
	return ""
}

// globals are the flags every command takes.
type globals struct {
	indexDir string
	blobURL  string
	embedder string // an embed.ParseSpec string; "" means the index's
	chunker  string // a chunk.ParseSpec string; "" means the index's
	// Extraction limits (index.Options.Extract): a duration and a byte
	// count as typed; "" means the defaults.
	extractTimeout, maxUnzipped string
	// looseBlobs gives a new blob store the loose layout
	// (index.Options.LooseBlobs).
	looseBlobs bool
}

// register adds the global flags to fs, with defaults from the environment.
func (m *Main) register(fs *flag.FlagSet, g *globals) {
	fs.StringVar(&g.indexDir, "index", m.envOr("ESCUREL_INDEX", "./.escurel"), "index directory (env ESCUREL_INDEX)")
	fs.StringVar(&g.blobURL, "blobs", m.Getenv("ESCUREL_BLOBS"), "blob store URL (env ESCUREL_BLOBS; default: the one the index was created with, file://<index dir>/blobs for a new one)")
	fs.StringVar(&g.embedder, "embedder", m.Getenv("ESCUREL_EMBEDDER"), "embedder spec (env ESCUREL_EMBEDDER; default: the index's, hash/384 for a new one)")
	fs.StringVar(&g.chunker, "chunker", m.Getenv("ESCUREL_CHUNKER"), "chunker spec (env ESCUREL_CHUNKER; default: the index's, default for a new one)")
	fs.StringVar(&g.extractTimeout, "extract-timeout", m.Getenv("ESCUREL_EXTRACT_TIMEOUT"), "time limit of one document's extraction, e.g. 30s (env ESCUREL_EXTRACT_TIMEOUT; default 1m)")
	fs.StringVar(&g.maxUnzipped, "max-unzipped-bytes", m.Getenv("ESCUREL_MAX_UNZIPPED_BYTES"), "bytes a DOCX may decompress to (env ESCUREL_MAX_UNZIPPED_BYTES; default 268435456, 256 MiB)")
	fs.BoolVar(&g.looseBlobs, "loose-blobs", m.Getenv("ESCUREL_LOOSE_BLOBS") == "1", "a new blob store keeps one file per blob and record instead of packs (env ESCUREL_LOOSE_BLOBS=1)")
}

// plural is n and the noun, singular for 1: plural(2, "file", "files") is
// "2 files".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func (m *Main) envOr(key, def string) string {
	if v := m.Getenv(key); v != "" {
		return v
	}
	return def
}

// options returns the index options from the globals and the environment.
func (m *Main) options(g globals) (*index.Options, error) {
	if u, err := url.Parse(g.blobURL); err == nil && u.Scheme == "mem" {
		return nil, usageError("--blobs %s keeps the blobs in this process's memory only: the index on disk "+
			"would hold the only copy of the documents once escurel exits; use file:// or s3://", g.blobURL)
	}
	opts := &index.Options{BlobURL: g.blobURL, LooseBlobs: g.looseBlobs}
	if g.embedder != "" {
		spec, err := embed.ParseSpec(g.embedder)
		if err != nil {
			return nil, usageError("%v", err)
		}
		opts.Embedder = spec
	}
	if g.chunker != "" {
		spec, err := chunk.ParseSpec(g.chunker)
		if err != nil {
			return nil, usageError("%v", err)
		}
		opts.Chunker = spec.String()
	}
	if g.extractTimeout != "" {
		d, err := time.ParseDuration(g.extractTimeout)
		if err != nil || d <= 0 {
			return nil, usageError("--extract-timeout %q: want a positive duration such as 30s or 2m", g.extractTimeout)
		}
		opts.Extract.Timeout = d
	}
	if g.maxUnzipped != "" {
		n, err := strconv.ParseInt(g.maxUnzipped, 10, 64)
		if err != nil || n <= 0 {
			return nil, usageError("--max-unzipped-bytes %q: want a positive number of bytes", g.maxUnzipped)
		}
		opts.Extract.MaxDecompressedBytes = n
	}
	if v := m.Getenv("ESCUREL_INGEST_CONTEXTUALIZE"); v != "" {
		mode, err := index.ParseContextualize(v)
		if err != nil {
			return nil, fmt.Errorf("ESCUREL_INGEST_CONTEXTUALIZE: %w", err)
		}
		opts.Contextualize = mode
	}
	return opts, nil
}

// openExisting opens the index in g.indexDir, which must exist; in a
// server, it returns the server's open index. Release it with closeIndex.
func (m *Main) openExisting(ctx context.Context, g globals) (*index.Index, error) {
	if m.live != nil {
		if err := m.checkLive(g, false); err != nil {
			return nil, err
		}
		return m.live, nil
	}
	if _, _, err := layout.Current(g.indexDir); err != nil {
		return nil, err // CURRENT damaged or naming a lost generation: say so
	}
	if !index.Exists(g.indexDir) {
		if gens, _ := layout.Generations(g.indexDir); len(gens) > 0 {
			return nil, fmt.Errorf("%s has generations (%s) but no CURRENT naming the live one: %w",
				g.indexDir, strings.Join(gens, ", "), index.ErrDamaged)
		}
		return nil, fmt.Errorf("no index in %s (create one with: escurel --index %s ingest PATH...)", g.indexDir, g.indexDir)
	}
	opts, err := m.options(g)
	if err != nil {
		return nil, err
	}
	return index.Open(ctx, g.indexDir, opts)
}

// openOrCreate opens the index in g.indexDir, creating it when missing
// (ingest, sync); in a server, it returns the server's open index, as
// openExisting does. Release it with closeIndex.
func (m *Main) openOrCreate(ctx context.Context, g globals) (*index.Index, error) {
	if m.live != nil {
		return m.openExisting(ctx, g)
	}
	opts, err := m.options(g)
	if err != nil {
		return nil, err
	}
	return index.Open(ctx, g.indexDir, opts)
}

// closeIndex closes an index that openExisting opened; the server's own
// stays open.
func (m *Main) closeIndex(ix *index.Index) error {
	if ix == m.live {
		return nil
	}
	return ix.Close()
}

// checkLive refuses, for a command run in a server, settings that would
// open the index differently from how the server holds it (direct mode
// would refuse them too, or open another blob store); a rebuild
// (rebuilding true) takes a new embedder, chunker and extraction limits,
// as in direct mode.
func (m *Main) checkLive(g globals, rebuilding bool) error {
	man := m.live.Manifest()
	same := map[string]bool{
		"blobs":              g.blobURL == "" || blobstore.SameURL(g.blobURL, m.live.Blobs().URL()),
		"loose-blobs":        !g.looseBlobs || !m.live.Blobs().Packed(),
		"embedder":           g.embedder == "" || rebuilding,
		"chunker":            g.chunker == "" || rebuilding,
		"extract-timeout":    g.extractTimeout == "" || rebuilding,
		"max-unzipped-bytes": g.maxUnzipped == "" || rebuilding,
	}
	if spec, err := embed.ParseSpec(g.embedder); err == nil && spec.String() == man.Embedder().String() {
		same["embedder"] = true
	}
	if spec, err := chunk.ParseSpec(g.chunker); err == nil && spec.String() == man.Chunker {
		same["chunker"] = true
	}
	for _, name := range []string{"blobs", "loose-blobs", "embedder", "chunker", "extract-timeout", "max-unzipped-bytes"} {
		if !same[name] {
			return usageError("--%s: escurel serve holds %s with its own settings and runs this command on them; "+
				"drop --%s, set it with rebuild, or stop the server", name, m.liveDir, name)
		}
	}
	return nil
}

// Run runs the command in args (without the program name).
func (m *Main) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("escurel", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var g globals
	m.register(fs, &g)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			m.usage()
			return err
		}
		return usageError("%v", err)
	}
	if fs.NArg() == 0 {
		m.usage()
		return usageError("no command")
	}
	// Process-wide: a server (m.live) set it when it started, and a
	// forwarded command must not change it under the server's feet.
	if m.live == nil {
		if err := pdf.SetCacheDir(m.Getenv("ESCUREL_CACHE_DIR")); err != nil {
			return err
		}
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if m.live != nil {
		if !forwarded[cmd] {
			return usageError("%s does not run through escurel serve; stop the server to run it", cmd)
		}
		if dir := m.abs(indexFlag(rest, g.indexDir)); !sameDir(dir, m.liveDir) {
			return fmt.Errorf("this escurel serve holds %s, not %s", m.liveDir, dir)
		}
		if kind := writeKinds[cmd]; kind != "" && m.exclusive != nil {
			// A write waits its turn among the server's write jobs.
			return m.exclusive(ctx, kind, func(ctx context.Context) error { return m.dispatch(ctx, cmd, g, rest) })
		}
	} else if forwarded[cmd] {
		if done, err := m.forward(ctx, m.abs(indexFlag(rest, g.indexDir)), args); done || err != nil {
			return err
		}
	}
	return m.dispatch(ctx, cmd, g, rest)
}

// dispatch runs command cmd with its arguments rest.
func (m *Main) dispatch(ctx context.Context, cmd string, g globals, rest []string) error {
	switch cmd {
	case "ingest":
		return (&IngestCommand{m: m, g: g}).Run(ctx, rest)
	case "search":
		return (&SearchCommand{m: m, g: g}).Run(ctx, rest)
	case "status":
		return (&StatusCommand{m: m, g: g}).Run(ctx, rest)
	case "rebuild":
		return (&RebuildCommand{m: m, g: g}).Run(ctx, rest)
	case "reembed":
		return (&RebuildCommand{m: m, g: g, reembed: true}).Run(ctx, rest)
	case "rollback":
		return (&RollbackCommand{m: m, g: g}).Run(ctx, rest)
	case "verify":
		return (&VerifyCommand{m: m, g: g}).Run(ctx, rest)
	case "expand":
		return (&ExpandCommand{m: m, g: g}).Run(ctx, rest)
	case "eval":
		return (&EvalCommand{m: m, g: g}).Run(ctx, rest)
	case "delete":
		return (&DeleteCommand{m: m, g: g}).Run(ctx, rest)
	case "documents":
		return (&DocumentsCommand{m: m, g: g}).Run(ctx, rest)
	case "sync":
		return (&SyncCommand{m: m, g: g}).Run(ctx, rest)
	case "compact":
		return (&CompactCommand{m: m, g: g}).Run(ctx, rest)
	case "gc":
		return (&GCCommand{m: m, g: g}).Run(ctx, rest)
	case "blobs":
		return (&BlobsCommand{m: m, g: g}).Run(ctx, rest)
	case "serve":
		return (&ServeCommand{m: m, g: g}).Run(ctx, rest)
	case "export":
		return (&ExportCommand{m: m, g: g}).Run(ctx, rest)
	case "publish":
		return (&PublishCommand{m: m, g: g}).Run(ctx, rest)
	case "version":
		fmt.Fprintf(m.Stdout, "escurel %s (schema %d)\n", index.Version, index.SchemaVersion)
		return nil
	case "help", "-h", "--help":
		m.usage()
		return nil
	}
	return usageError("unknown command %q", cmd)
}

// newFlagSet returns a command's flag set, with the global flags.
func (m *Main) newFlagSet(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The globals parsed before the command are the defaults here.
	fs.StringVar(&g.indexDir, "index", g.indexDir, "index directory")
	fs.StringVar(&g.blobURL, "blobs", g.blobURL, "blob store URL")
	fs.StringVar(&g.embedder, "embedder", g.embedder, "embedder spec")
	fs.StringVar(&g.chunker, "chunker", g.chunker, "chunker spec")
	fs.StringVar(&g.extractTimeout, "extract-timeout", g.extractTimeout, "time limit of one extraction")
	fs.StringVar(&g.maxUnzipped, "max-unzipped-bytes", g.maxUnzipped, "bytes a DOCX may decompress to")
	fs.BoolVar(&g.looseBlobs, "loose-blobs", g.looseBlobs, "a new blob store keeps the loose layout")
	return fs
}

// rerankOptions are the reranker flags of search and eval.
type rerankOptions struct {
	url, model string
	timeout    time.Duration
	getenv     func(string) string
}

func (m *Main) rerankFlags(fs *flag.FlagSet) *rerankOptions {
	r := &rerankOptions{getenv: m.Getenv}
	fs.StringVar(&r.url, "rerank", m.Getenv("ESCUREL_RERANK_URL"), "reranker endpoint, e.g. http://127.0.0.1:8080/rerank (env ESCUREL_RERANK_URL; key in ESCUREL_RERANK_API_KEY)")
	fs.StringVar(&r.model, "rerank-model", "", "model name sent to a /v1/rerank or /v2/rerank endpoint")
	fs.DurationVar(&r.timeout, "rerank-timeout", 0, "reranker request timeout (default 60s)")
	return r
}

// reranker returns the configured reranker, nil when none.
func (r *rerankOptions) reranker() (rerank.Reranker, error) {
	if r.timeout < 0 {
		return nil, fmt.Errorf("--rerank-timeout %s: want a positive duration such as 30s (0: the default)", r.timeout)
	}
	if r.url == "" {
		return nil, nil
	}
	return rerank.New("http", rerank.Options{URL: r.url, Model: r.model, Key: r.getenv("ESCUREL_RERANK_API_KEY"), Timeout: r.timeout})
}

// parse parses a command's flags and returns its positional arguments.
// Flags may come before, between or after them ("search -k 3 q" and
// "search q -k 3" are the same); after "--" everything is positional. -h
// prints the usage.
func (m *Main) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				m.usage()
				return nil, err
			}
			return nil, usageError("%s: %v", fs.Name(), err)
		}
		consumed := len(args) - fs.NArg()
		rest := fs.Args()
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return pos, nil
}
