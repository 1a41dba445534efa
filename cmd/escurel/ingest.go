package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/escurel/escurel/index"
)

// IngestCommand is "escurel ingest": it ingests files and directories.
type IngestCommand struct {
	m *Main
	g globals
}

// Run ingests the paths in args. It returns errFailed, after printing each
// failure and the summary, when any file could not be ingested.
func (c *IngestCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("ingest", &c.g)
	lang := fs.String("lang", "", "language of documents without front-matter lang (default en)")
	sens := fs.String("sensitivity", "", "public, internal or restricted, for documents without front-matter sensitivity (default public)")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageError("ingest: no PATH given")
	}
	if *lang != "" {
		if err := index.CheckLanguage(*lang); err != nil {
			return usageError("ingest: --lang: %v", err)
		}
	}
	if *sens != "" {
		if err := index.CheckSensitivity(*sens); err != nil {
			return usageError("ingest: --sensitivity: %v", err)
		}
	}
	for _, p := range args { // before the index exists: a typo creates nothing
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	opts, err := c.m.options(c.g)
	if err != nil {
		return err
	}
	ix, err := index.Open(ctx, c.g.indexDir, opts)
	if err != nil {
		return err
	}
	defer ix.Close()
	sum, err := ix.IngestFiles(ctx, args, index.IngestOptions{
		Language: *lang, Sensitivity: *sens,
		Progress: func(fr index.FileResult) {
			if fr.Err != nil {
				fmt.Fprintf(c.m.Stderr, "escurel: ingest: %v\n", fr.Err)
			}
		},
	})
	total := sum.Added + sum.Replaced + sum.Unchanged + len(sum.Failed)
	if err != nil {
		if total > 0 {
			fmt.Fprintf(c.m.Stdout, "stopped after %d files (%d added, %d replaced, %d unchanged, %d failed); what they wrote is committed\n",
				total, sum.Added, sum.Replaced, sum.Unchanged, len(sum.Failed))
		}
		return err
	}
	fmt.Fprintf(c.m.Stdout, "ingested %d files into %s: %d added, %d replaced, %d unchanged, %d failed; %d blocks, %.1f MB in %.2fs\n",
		total, ix.Path(), sum.Added, sum.Replaced, sum.Unchanged, len(sum.Failed), sum.Blocks,
		float64(sum.Bytes)/1e6, sum.Elapsed.Seconds())
	if len(sum.Skipped) > 0 {
		fmt.Fprintf(c.m.Stdout, "skipped %d entries: hidden, symlinked directories, or not .md, .markdown or .txt (first: %s)\n",
			len(sum.Skipped), sum.Skipped[0])
	}
	if len(sum.Failed) > 0 {
		var names []string
		for _, f := range sum.Failed {
			names = append(names, filepath.Base(f.Path))
		}
		fmt.Fprintf(c.m.Stderr, "escurel: %d of %d files failed: %s\n", len(sum.Failed), total, strings.Join(names, ", "))
		return errFailed
	}
	return nil
}
