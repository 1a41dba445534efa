package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/escurel/escurel/index"
)

// DeleteCommand is "escurel delete": remove documents from the index and
// their records from the blob store; with --purge, erase them (index.Purge).
type DeleteCommand struct {
	m *Main
	g globals
}

// Run deletes the documents named by args (sources or doc ids).
func (c *DeleteCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("delete", &c.g)
	purge := fs.Bool("purge", false, "erase the documents: their blobs, the freed pages of the live database (rewritten into a new generation) and the older generations")
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
	if *purge {
		res, err := ix.Purge(ctx, names...)
		printPurge(c.m.Stdout, res)
		return err
	}
	done, err := ix.Delete(ctx, names...)
	fmt.Fprintf(c.m.Stdout, "deleted %s\n", plural(len(done), "document", "documents"))
	return err
}

// printPurge prints what a purge removed; nothing when it did not get as
// far as deleting.
func printPurge(w io.Writer, r *index.PurgeResult) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "purged %s\n", plural(len(r.Documents), "document", "documents"))
	fmt.Fprintf(w, "  blobs removed         %d (%s)\n", len(r.Blobs), byteSize(r.BlobBytes))
	if r.Generation != "" {
		fmt.Fprintf(w, "  live index rewritten  %s (%s)\n", r.Generation, byteSize(r.FileBytes))
		fmt.Fprintf(w, "  generations dropped   %d (%s)%s\n", len(r.Dropped), byteSize(r.DroppedBytes), listed(r.Dropped))
		fmt.Fprintf(w, "  reclaimed             %s in %s\n", byteSize(r.Reclaimed()), r.Elapsed.Round(time.Millisecond))
	}
}

// listed is ": a, b" for a non-empty list, "" otherwise.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return ": " + strings.Join(names, ", ")
}

// byteSize is n bytes in B, kB, MB or GB (powers of 1000), with a sign.
func byteSize(n int64) string {
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	switch {
	case n < 1000:
		return fmt.Sprintf("%s%d B", sign, n)
	case n < 1e6:
		return fmt.Sprintf("%s%.1f kB", sign, float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%s%.1f MB", sign, float64(n)/1e6)
	}
	return fmt.Sprintf("%s%.2f GB", sign, float64(n)/1e9)
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
	fmt.Fprintf(c.m.Stdout, "compacted: %d segments -> %d, %d tombstones dropped, posting lists %.1f MB -> %.1f MB, file %.1f MB -> %.1f MB\n",
		before.FullText.Segments, after.FullText.Segments, before.FullText.Tombstones,
		float64(before.FullText.Bytes)/1e6, float64(after.FullText.Bytes)/1e6,
		float64(before.FileBytes)/1e6, float64(after.FileBytes)/1e6)
	return nil
}
