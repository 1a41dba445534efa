package main

import (
	"context"
	"fmt"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/analysis"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/rebuild"
)

// RebuildCommand is "escurel rebuild": re-derive the index from the blob
// store, with new settings if given, and swap it in.
type RebuildCommand struct {
	m *Main
	g globals
}

// Run rebuilds the index.
func (c *RebuildCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("rebuild", &c.g)
	contextualize := fs.String("contextualize", "", "structural or off (default: the index's)")
	chunker := fs.String("chunker", "", "chunker, e.g. default or 'default(max_bytes=800)' (default: the index's)")
	analyzer := fs.String("analyzer", "", "analyzer: simple (default: the index's)")
	allowMissing := fs.Bool("allow-missing", false, "drop live documents that have no record in the blob store instead of refusing")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("rebuild: unexpected argument %q", args[0])
	}
	opts, err := c.m.options(c.g)
	if err != nil {
		return err
	}
	if *contextualize != "" {
		if opts.Contextualize, err = index.ParseContextualize(*contextualize); err != nil {
			return usageError("rebuild: %v", err)
		}
	}
	if *chunker != "" {
		if _, err := chunk.ParseSpec(*chunker); err != nil {
			return usageError("rebuild: %v", err)
		}
	}
	if *analyzer != "" {
		if _, err := analysis.ByName(*analyzer); err != nil {
			return usageError("rebuild: %v", err)
		}
	}
	opts.Chunker, opts.Analyzer = *chunker, *analyzer
	blobURL := c.g.blobURL
	if blobURL == "" {
		if blobURL, err = index.DefaultBlobURL(c.g.indexDir); err != nil {
			return err
		}
	}
	store, err := blobstore.Open(ctx, blobURL)
	if err != nil {
		return err
	}
	defer store.Close()
	sum, err := rebuild.Run(ctx, rebuild.Options{Dir: c.g.indexDir, Blobs: store, Index: *opts, AllowMissing: *allowMissing})
	if err != nil {
		return err
	}
	m := sum.Manifest
	if sum.Dropped > 0 {
		fmt.Fprintf(c.m.Stdout, "dropped %d documents that have no record in %s\n", sum.Dropped, blobURL)
	}
	fmt.Fprintf(c.m.Stdout, "rebuilt %d documents, %d blocks from %s in %.2fs (embedder %s, chunker %s, analyzer %s, contextualize %s)\n",
		sum.Documents, sum.Blocks, blobURL, sum.Elapsed.Seconds(), m.Embedder(), m.Chunker, m.Analyzer, m.Contextualize)
	return nil
}
