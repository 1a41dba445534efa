package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
)

// BlobsCommand is "escurel blobs pack": move the index's blob store from
// the loose layout into packs (blobstore.Pack).
type BlobsCommand struct {
	m *Main
	g globals
}

// Run converts the store, holding the index directory's lock so that no
// other process has the store open, and prints what it did.
func (c *BlobsCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("blobs", &c.g)
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 || args[0] != "pack" {
		return usageError("blobs: want `escurel blobs pack`")
	}
	if c.g.looseBlobs {
		return usageError("blobs pack: --loose-blobs asks for the layout this command leaves")
	}
	if !index.Exists(c.g.indexDir) {
		return fmt.Errorf("no index in %s", c.g.indexDir)
	}
	d, err := layout.Lock(c.g.indexDir)
	if errors.Is(err, layout.ErrLocked) {
		return fmt.Errorf("blobs pack: %w: the store must not be open elsewhere; stop escurel serve (or the command running) and run it again", err)
	}
	if err != nil {
		return err
	}
	defer d.Unlock()
	recorded, err := layout.StoreURL(c.g.indexDir)
	if err != nil {
		return err
	}
	if c.g.blobURL != "" && !blobstore.SameURL(c.g.blobURL, recorded) {
		return usageError("blobs pack: the index derives from the blob store %s, not %s", blobstore.Redact(recorded), blobstore.Redact(c.g.blobURL))
	}
	r, err := blobstore.Pack(ctx, recorded)
	if r != nil {
		state := "converted to the pack layout"
		if r.WasPacked {
			state = "in the pack layout already"
		}
		fmt.Fprintf(c.m.Stdout, "blob store %s: %s\n", blobstore.Redact(recorded), state)
		fmt.Fprintf(c.m.Stdout, "  packed        %s, %s into %s (%s)\n", plural(r.Blobs, "blob", "blobs"), plural(r.Records, "record", "records"), plural(r.Packs, "pack", "packs"), byteSize(r.PackBytes))
		fmt.Fprintf(c.m.Stdout, "  loose removed %d\n", r.Removed)
		if r.KeptLoose > 0 {
			fmt.Fprintf(c.m.Stdout, "  kept loose    %s of 4 MiB or more\n", plural(r.KeptLoose, "blob", "blobs"))
		}
	}
	return err
}
