package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/term"

	"github.com/escurel/escurel/index"
)

// SyncCommand is "escurel sync": make the documents under directories what
// the files there are now.
type SyncCommand struct {
	m *Main
	g globals
}

// syncShown is how many sources of each kind the plan names.
const syncShown = 5

// Run syncs the directories in args. It returns errFailed, after the
// summary, when a file could not be ingested.
func (c *SyncCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("sync", &c.g)
	lang := fs.String("lang", "", "language of documents without front-matter lang (default: the document's, en for a new one)")
	sens := fs.String("sensitivity", "", "public, internal or restricted, for documents without front-matter sensitivity (default: the document's, public for a new one)")
	maxBytes := fs.Int64("max-file-bytes", index.DefaultMaxFileBytes, "size cap of a file; a larger one is recorded as failed, unread")
	dryRun := fs.Bool("dry-run", false, "print the plan and change nothing")
	var metaArgs metaFlag
	fs.Var(&metaArgs, "meta", "key=value metadata of every file, over its front matter (repeatable; a key repeated is a list; --meta= clears)")
	allowDeleteAll := fs.Bool("allow-delete-all", false, "allow deleting every document under a directory (DIR or one below it) that is missing or holds no file")
	allowDowngrade := fs.Bool("allow-downgrade", false, "allow --sensitivity to lower the sensitivity of documents that have a higher one")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageError("sync: no DIR given")
	}
	if *lang != "" {
		if err := index.CheckLanguage(*lang); err != nil {
			return usageError("sync: --lang: %v", err)
		}
	}
	if *sens != "" {
		if err := index.CheckSensitivity(*sens); err != nil {
			return usageError("sync: --sensitivity: %v", err)
		}
	}
	if *maxBytes <= 0 {
		return usageError("sync: --max-file-bytes %d: want a positive number of bytes", *maxBytes)
	}
	if c.m.live != nil {
		for i, a := range args {
			args[i] = c.m.abs(a) // the client's working directory, not the server's
		}
	}
	ix, err := c.m.openOrCreate(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	meta, err := metaArgs.meta()
	if err != nil {
		return usageError("sync: --meta: %v", err)
	}
	so := &index.SyncOptions{IngestOptions: index.IngestOptions{Language: *lang, Sensitivity: *sens, MaxFileBytes: *maxBytes, Meta: meta},
		DryRun: *dryRun, AllowDeleteAll: *allowDeleteAll, AllowDowngrade: *allowDowngrade}
	var bar *pb.ProgressBar
	if f, ok := c.m.Stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		so.Listed = func(n int) { bar = pb.New(n).SetWriter(f).Set("prefix", "sync ").Start() }
		so.Progress = func(index.FileResult) { bar.Increment() }
	}
	sum, err := ix.Sync(ctx, args, so)
	if bar != nil {
		bar.Finish()
	}
	c.printPlan(sum.Plan, *dryRun)
	for _, fr := range sum.Ingest.Failed {
		fmt.Fprintf(c.m.Stderr, "escurel: sync: %v\n", fr.Err)
	}
	if err != nil || *dryRun {
		return err
	}
	in := sum.Ingest
	unchanged := fmt.Sprintf("%d unchanged", in.Unchanged+sum.Plan.Unchanged)
	if in.MetaUpdated > 0 {
		unchanged += fmt.Sprintf(", %d metadata updated", in.MetaUpdated)
	}
	fmt.Fprintf(c.m.Stdout, "synced into %s: %d added, %d replaced, %s, %d failed, %d deleted; %s written in %.2fs\n",
		ix.Path(), in.Added, in.Replaced, unchanged, len(in.Failed), len(sum.Deleted),
		plural(in.Blocks, "block", "blocks"), sum.Elapsed.Seconds())
	if len(in.Failed) > 0 {
		return errFailed
	}
	return nil
}

// printPlan prints the counts of the plan and the first sources of each
// kind.
func (c *SyncCommand) printPlan(p index.SyncPlan, dryRun bool) {
	what := "plan"
	if dryRun {
		what = "plan (dry run: nothing changed)"
	}
	touched := ""
	if p.Touched > 0 {
		touched = fmt.Sprintf(" (%d with a new time only)", p.Touched)
	}
	kept := ""
	if len(p.NotFromFiles) > 0 {
		kept = fmt.Sprintf("; %d not from files, left alone", len(p.NotFromFiles))
	}
	fmt.Fprintf(c.m.Stdout, "%s: add %d, change %d, delete %d, unchanged %d%s%s\n", what, len(p.Add), len(p.Change), len(p.Delete), p.Unchanged, touched, kept)
	for _, k := range []struct {
		name    string
		sources []string
	}{{"add", p.Add}, {"change", p.Change}, {"delete", p.Delete},
		{"raised", p.Raised},     // added at the level of a document with the same bytes (a renamed file)
		{"kept", p.NotFromFiles}, // no file, but not from a file either: left alone
	} {
		if len(k.sources) == 0 {
			continue
		}
		names := make([]string, 0, syncShown)
		for _, s := range k.sources[:min(len(k.sources), syncShown)] {
			names = append(names, shown(filepath.FromSlash(s), false))
		}
		more := ""
		if len(k.sources) > syncShown {
			more = fmt.Sprintf(", … and %d more", len(k.sources)-syncShown)
		}
		fmt.Fprintf(c.m.Stdout, "  %-7s%s%s\n", k.name, strings.Join(names, ", "), more)
	}
}
