package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/term"

	"github.com/escurel/escurel/analysis"
	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/rebuild"
)

// RebuildCommand is "escurel rebuild" and "escurel reembed": re-derive the
// index, or its vectors, from the blob store into a new generation, with
// new settings if given, and make it live.
type RebuildCommand struct {
	m       *Main
	g       globals
	reembed bool
}

// Run rebuilds the index.
func (c *RebuildCommand) Run(ctx context.Context, args []string) error {
	name := "rebuild"
	if c.reembed {
		name = "reembed"
	}
	fs := c.m.newFlagSet(name, &c.g)
	var contextualize, analyzer *string
	var allowMissing, allowFailures *bool
	if !c.reembed {
		contextualize = fs.String("contextualize", "", "structural or off (default: the index's)")
		analyzer = fs.String("analyzer", "", "analyzer: standard or simple (default: the index's)")
		allowMissing = fs.Bool("allow-missing", false, "drop live documents that have no record in the blob store instead of refusing")
		allowFailures = fs.Bool("allow-failures", false, "let documents served now become failed documents when they no longer extract, instead of refusing")
	}
	keep := fs.Int("keep", rebuild.DefaultKeep, "generations to keep, the new live one included (for escurel rollback)")
	dryRun := fs.Bool("dry-run", false, "print the plan (live generation, settings and their changes, documents) and change nothing")
	workers := fs.Int("workers", 0, "documents derived and embedding calls run at once (default: the number of CPUs)")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("%s: unexpected argument %q", name, args[0])
	}
	if *keep < 1 {
		return usageError("%s: --keep %d: want at least 1", name, *keep)
	}
	if *workers < 0 {
		return usageError("%s: --workers %d: want at least 1", name, *workers)
	}
	if c.reembed && c.g.embedder == "" {
		return usageError("reembed: --embedder SPEC is required (the model to re-embed with)")
	}
	opts, err := c.m.options(c.g)
	if err != nil {
		return err
	}
	if !c.reembed {
		if *contextualize != "" {
			if opts.Contextualize, err = index.ParseContextualize(*contextualize); err != nil {
				return usageError("rebuild: %v", err)
			}
		}
		if *analyzer != "" {
			if _, err := analysis.ByName(*analyzer); err != nil {
				return usageError("rebuild: %v", err)
			}
		}
		opts.Analyzer = *analyzer
	}
	opts.Workers = *workers
	ropts := rebuild.Options{Dir: c.g.indexDir, Index: *opts, Keep: *keep, Progress: c.progress(name)}
	var blobURL string
	if c.m.live != nil {
		// In a server: a live rebuild of its index, which serves on
		// meanwhile and switches at the end.
		if err := c.m.checkLive(c.g, true); err != nil {
			return err
		}
		ropts.Dir, ropts.Live, ropts.Blobs = c.m.live.Dir(), c.m.live, c.m.live.Blobs()
		blobURL = ropts.Blobs.Redacted()
	} else {
		store, u, err := c.m.openBlobs(ctx, c.g)
		if err != nil {
			return err
		}
		defer store.Close()
		ropts.Blobs, blobURL = store, blobstore.Redact(u)
	}
	if *dryRun {
		var p *rebuild.Plan
		if c.reembed {
			p, err = rebuild.PlanReembed(ctx, ropts)
		} else {
			ropts.AllowMissing, ropts.AllowFailures = *allowMissing, *allowFailures
			p, err = rebuild.PlanRun(ctx, ropts)
		}
		if err != nil {
			return err
		}
		fmt.Fprint(c.m.Stdout, p)
		return nil
	}
	var sum rebuild.Summary
	if c.reembed {
		sum, err = rebuild.Reembed(ctx, ropts)
	} else {
		ropts.AllowMissing, ropts.AllowFailures = *allowMissing, *allowFailures
		sum, err = rebuild.Run(ctx, ropts)
	}
	if err != nil {
		return err
	}
	m := sum.Manifest
	if sum.Dropped > 0 {
		fmt.Fprintf(c.m.Stdout, "dropped %d documents that have no record in %s\n", sum.Dropped, blobURL)
	}
	if sum.Restored > 0 {
		fmt.Fprintf(c.m.Stdout, "restored %s from the live generation's rows\n", plural(sum.Restored, "damaged record", "damaged records"))
	}
	if sum.RepairedBlobs > 0 {
		fmt.Fprintf(c.m.Stdout, "repaired %s from their source files\n", plural(sum.RepairedBlobs, "damaged or missing blob", "damaged or missing blobs"))
	}
	secs := sum.Elapsed.Seconds()
	fmt.Fprintf(c.m.Stdout, "%s: %s, %s from %s in %.2fs (%.0f docs/s, %.1f MB/s)\n",
		name, plural(sum.Documents, "document", "documents"), plural(sum.Blocks, "block", "blocks"), blobURL, secs, float64(sum.Documents)/secs, float64(sum.Bytes)/1e6/secs)
	if sum.Failed > 0 || sum.Recovered > 0 {
		fmt.Fprintf(c.m.Stdout, "failed documents: %d (escurel status lists them); %d that failed before extract now\n", sum.Failed, sum.Recovered)
	}
	prev := sum.Previous
	if prev == "" {
		prev = "none"
	}
	fmt.Fprintf(c.m.Stdout, "live generation %s (was %s; %d removed); digest %s\n", sum.Generation, prev, sum.Removed, sum.Verify.Digest)
	fmt.Fprintf(c.m.Stdout, "embedder %s, chunker %s, analyzer %s, contextualize %s\n",
		m.Embedder(), m.Chunker, m.Analyzer, m.Contextualize)
	return nil
}

// openBlobs opens the blob store of the globals: --blobs, or the index
// directory's own. It returns the store and its URL.
func (m *Main) openBlobs(ctx context.Context, g globals) (*blobstore.Store, string, error) {
	blobURL := g.blobURL
	if blobURL == "" {
		var err error
		if blobURL, err = layout.StoreURL(g.indexDir); err != nil {
			return nil, "", err
		}
	}
	store, err := blobstore.Open(ctx, blobURL)
	return store, blobURL, err
}

// progress shows a progress bar (github.com/cheggaaa/pb/v3) when stderr is
// a terminal, else prints a line to stderr at most every two seconds.
func (c *RebuildCommand) progress(name string) func(done, total int) {
	if f, ok := c.m.Stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		var bar *pb.ProgressBar
		return func(done, total int) {
			if bar == nil {
				bar = pb.New(total).SetWriter(f).Set("prefix", name+" ").Start()
			}
			bar.SetCurrent(int64(done))
			if done >= total {
				bar.Finish()
			}
		}
	}
	start, last := time.Now(), time.Time{}
	return func(done, total int) {
		if time.Since(last) < 2*time.Second && done < total {
			return
		}
		last = time.Now()
		fmt.Fprintf(c.m.Stderr, "%s: %d/%d documents, %.1fs\n", name, done, total, time.Since(start).Seconds())
	}
}

// RollbackCommand is "escurel rollback": make the previous generation live.
type RollbackCommand struct {
	m *Main
	g globals
}

// Run rolls back.
func (c *RollbackCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("rollback", &c.g)
	force := fs.Bool("force", false, "roll back although the previous generation no longer matches the blob store")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("rollback: unexpected argument %q", args[0])
	}
	if c.m.live != nil {
		// In a server: the in-process rollback of its open index, against
		// its own blob store.
		if err := c.m.checkLive(c.g, false); err != nil {
			return err
		}
		from, to, err := c.m.live.Rollback(ctx, &index.RollbackOptions{Force: *force})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "live generation %s (was %s)\n", to, from)
		return nil
	}
	store, _, err := c.m.openBlobs(ctx, c.g)
	if err != nil {
		return err
	}
	defer store.Close()
	from, to, err := index.Rollback(ctx, c.g.indexDir, &index.RollbackOptions{Blobs: store, Force: *force})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.m.Stdout, "live generation %s (was %s)\n", to, from)
	return nil
}

// VerifyCommand is "escurel verify": the digest of the derived rows and the
// coverage checks against the blob store.
type VerifyCommand struct {
	m *Main
	g globals
}

// Run verifies; exit status 1 when a coverage check fails.
func (c *VerifyCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("verify", &c.g)
	asJSON := fs.Bool("json", false, "print the verification as one JSON object")
	deep := fs.Bool("deep", false, "also read every blob and check that its bytes hash to its id")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("verify: unexpected argument %q", args[0])
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	v, err := ix.Verify(ctx, &index.VerifyOptions{Deep: *deep})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else {
		w := c.m.Stdout
		fmt.Fprintf(w, "generation %s\ndigest %s\n", v.Generation, v.Digest)
		fmt.Fprintf(w, "%d documents, %d blocks, %d postings, %d vectors\n", v.Documents, v.Blocks, v.Postings, v.Vectors)
		list := func(what string, n int, items []string) {
			if n > 0 {
				shownItems := make([]string, len(items))
				for i, s := range items {
					shownItems[i] = shown(s, false)
				}
				fmt.Fprintf(w, "%s: %d: %v\n", what, n, shownItems)
			}
		}
		list("records without rows", len(v.RecordsWithoutRows), v.RecordsWithoutRows)
		list("rows without records", len(v.RowsWithoutRecords), v.RowsWithoutRecords)
		list("blocks without postings", len(v.BlocksWithoutPostings), v.BlocksWithoutPostings)
		list("blocks without vectors", len(v.BlocksWithoutVectors), v.BlocksWithoutVectors)
		if n := len(v.RecordsWithoutBlobs); n > 0 {
			fmt.Fprintf(w, "records without blobs (cannot be rebuilt): %d\n", n)
		}
		for _, src := range v.RecordsWithoutBlobs {
			fmt.Fprintf(w, "  missing blob of %s; repair: escurel ingest %s (its original bytes), or escurel delete %s\n",
				shown(src, false), shown(src, false), shown(src, false))
		}
		for _, b := range v.DamagedBlobs {
			fmt.Fprintf(w, "damaged blob %s of %s: %s; repair: escurel ingest %s (its original bytes), or escurel delete %s\n",
				b.BlobID, shown(b.Source, false), shown(b.Reason, false), shown(b.Source, false), shown(b.Source, false))
		}
		if n := len(v.DamagedRecords); n > 0 {
			fmt.Fprintf(w, "damaged records: %d\n", n)
		}
		for _, d := range v.DamagedRecords {
			if d.DocID == "" {
				// A whole pack: it names no document, and rebuild refuses
				// while it is there (the other packs hold older versions).
				fmt.Fprintf(w, "  damaged pack %s: %s; repair: restore the pack from a backup, or remove it by hand (its documents then read as their previous versions), then escurel verify again\n",
					d.Key, shown(d.Reason, false))
				continue
			}
			src, repair := "source unknown", ""
			if d.Source != "" {
				src = "source " + shown(d.Source, false)
				repair = "escurel ingest " + shown(d.Source, false) + " (re-ingest the source), or "
			}
			fmt.Fprintf(w, "  damaged record %s (%s): %s; repair: escurel rebuild (restores it from the live row), or %sescurel delete %s\n",
				d.Key, src, shown(d.Reason, false), repair, d.DocID)
		}
		if v.DuplicatePostings > 0 {
			fmt.Fprintf(w, "duplicate postings: %d\n", v.DuplicatePostings)
		}
		list("orphan blobs (garbage, not drift)", len(v.OrphanBlobs), v.OrphanBlobs)
	}
	if !v.OK() {
		fmt.Fprintf(c.m.Stderr, "escurel: verify: the index has drifted from the blob store; run escurel rebuild\n")
		return errFailed
	}
	return nil
}
