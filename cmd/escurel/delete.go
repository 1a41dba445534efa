package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DeleteCommand is "escurel delete": remove documents from the index and
// their records from the blob store.
type DeleteCommand struct {
	m *Main
	g globals
}

// Run deletes the documents named by args (sources or doc ids).
func (c *DeleteCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("delete", &c.g)
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageError("delete: no SOURCE or DOC_ID given")
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = a
		// A file named as ingest named it: its real absolute path (a
		// relative path or a symbolic link would miss the document).
		// A file already removed from disk resolves through its
		// directory.
		if strings.Contains(a, "://") {
			continue
		}
		abs := c.m.abs(a)
		if _, err := os.Stat(abs); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				names[i] = real
			}
		} else if !filepath.IsAbs(a) && strings.ContainsAny(a, `/\.`) {
			if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
				names[i] = filepath.Join(dir, filepath.Base(abs))
			}
		}
	}
	done, err := ix.Delete(ctx, names...)
	fmt.Fprintf(c.m.Stdout, "deleted %s\n", plural(len(done), "document", "documents"))
	return err
}

// CompactCommand is "escurel compact": merge the full-text index into one
// segment and drop the postings of deleted blocks.
type CompactCommand struct {
	m *Main
	g globals
}

// Run compacts.
func (c *CompactCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("compact", &c.g)
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("compact: unexpected argument %q", args[0])
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	before, _ := ix.Stats(ctx)
	if err := ix.Compact(ctx); err != nil {
		return err
	}
	after, err := ix.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.m.Stdout, "compacted: %d segments -> %d, %d tombstones dropped, posting lists %.1f MB -> %.1f MB\n",
		before.FullText.Segments, after.FullText.Segments, before.FullText.Tombstones,
		float64(before.FullText.Bytes)/1e6, float64(after.FullText.Bytes)/1e6)
	return nil
}
