package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/escurel/escurel/index"
)

// ExpandCommand is "escurel expand": a block with its neighbours and its
// window, bounded in size.
type ExpandCommand struct {
	m *Main
	g globals
}

// Run expands the block named in args.
func (c *ExpandCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("expand", &c.g)
	asJSON := fs.Bool("json", false, `print {"block":…,"before":[…],"after":[…],"bytes":N,"truncated":B} as JSON`)
	n := fs.Int("n", index.DefaultNeighbours, "neighbouring blocks each side")
	maxBytes := fs.Int("max-bytes", index.DefaultExpandBytes, "bound on the text returned, bytes")
	clearance := fs.String("clearance", index.Public, "highest document sensitivity to return: public, internal or restricted")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usageError("expand: want one BLOCK_ID")
	}
	id := args[0]
	if err := index.CheckBlockID(id); err != nil {
		return usageError("expand: %v", err)
	}
	if *n < 0 || *maxBytes < 1 {
		return usageError("expand: -n must be ≥ 0 and --max-bytes ≥ 1")
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	before := *n
	if before == 0 {
		before = -1 // none
	}
	x, err := ix.Expand(ctx, id, &index.ExpandOptions{Before: before, After: before, MaxBytes: *maxBytes, Clearance: *clearance})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(x)
	}
	w := c.m.Stdout
	b := x.Block
	fmt.Fprintf(w, "block %s  %s:%d-%d\n", b.BlockID, shown(b.Source, false), b.ByteStart, b.ByteEnd)
	if b.Context != "" {
		fmt.Fprintf(w, "%s\n", shown(b.Context, false))
	}
	for _, h := range x.Before {
		fmt.Fprintf(w, "\n[before, block %s]\n%s\n", h.BlockID, shown(h.Body, true))
	}
	fmt.Fprintf(w, "\n[block %s]\n%s\n", b.BlockID, shown(b.Body, true))
	for _, h := range x.After {
		fmt.Fprintf(w, "\n[after, block %s]\n%s\n", h.BlockID, shown(h.Body, true))
	}
	if b.PromptText != "" {
		l := b.ParentLocator
		fmt.Fprintf(w, "\n[window, bytes %d-%d, paragraphs %d-%d]\n%s\n", l.ByteStart, l.ByteEnd, l.ParagraphStart, l.ParagraphEnd, shown(b.PromptText, true))
	}
	if x.Truncated {
		fmt.Fprintf(w, "\n(cut to %d bytes; --max-bytes raises the bound)\n", *maxBytes)
	}
	return nil
}
