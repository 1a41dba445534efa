package main

import (
	"context"
	"fmt"
	"time"

	"github.com/escurel/escurel/index"
)

// GCCommand is "escurel gc": remove orphan blobs and crash leftovers.
type GCCommand struct {
	m *Main
	g globals
}

// Run removes (or, with --dry-run, lists) the garbage and prints what it
// reclaimed.
func (c *GCCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("gc", &c.g)
	dryRun := fs.Bool("dry-run", false, "print what would be removed, remove nothing")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("gc: unexpected argument %q", args[0])
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	// Direct mode: this process holds the directory alone and ingests
	// nothing, so no blob is young because an ingest is about to name it.
	// In a server, ingests run beside the gc: spare the young ones.
	minAge := time.Duration(-1)
	if c.m.live != nil {
		minAge = 0 // index.DefaultGCMinAge
	}
	r, err := ix.GC(ctx, &index.GCOptions{DryRun: *dryRun, MinAge: minAge})
	if r != nil {
		verb := "removed"
		if r.DryRun {
			verb = "would remove"
		}
		fmt.Fprintf(c.m.Stdout, "gc %s:\n", verb)
		fmt.Fprintf(c.m.Stdout, "  orphan blobs       %d (%s)\n", len(r.OrphanBlobs), byteSize(r.OrphanBytes))
		fmt.Fprintf(c.m.Stdout, "  temporary files    %d (%s)\n", len(r.TempFiles), byteSize(r.TempBytes))
		fmt.Fprintf(c.m.Stdout, "  generations        %d (%s)%s\n", len(r.Generations), byteSize(r.GenerationBytes), listed(r.Generations))
		fmt.Fprintf(c.m.Stdout, "  total              %s\n", byteSize(r.Bytes()))
		if r.Repacked != nil && len(r.Repacked.Damaged) > 0 {
			fmt.Fprintf(c.m.Stdout, "  damaged packs      %d, left as they are (escurel verify --deep reports them)\n", len(r.Repacked.Damaged))
		}
	}
	return err
}
