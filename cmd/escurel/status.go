package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"
)

// StatusCommand is "escurel status": schema version, manifest and counts.
type StatusCommand struct {
	m *Main
	g globals
}

// Run prints the status of the index.
func (c *StatusCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("status", &c.g)
	asJSON := fs.Bool("json", false, "print the status as one JSON object")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("status: unexpected argument %q", args[0])
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer ix.Close()
	st, err := ix.Stats(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(st)
	}
	m := st.Manifest
	w := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "index\t%s (%.1f MB)\n", st.Path, float64(st.FileBytes)/1e6)
	fmt.Fprintf(w, "blobs\t%s\n", st.BlobURL)
	fmt.Fprintf(w, "schema version\t%d\n", st.SchemaVersion)
	fmt.Fprintf(w, "embedder\t%s\n", m.Embedder())
	fmt.Fprintf(w, "chunker\t%s\n", m.Chunker)
	fmt.Fprintf(w, "analyzer\t%s\n", m.Analyzer)
	fmt.Fprintf(w, "contextualize\t%s\n", m.Contextualize)
	fmt.Fprintf(w, "built by\tescurel %s, created %s, updated %s\n", m.EscurelVersion,
		m.CreatedAt.Format(time.RFC3339), m.UpdatedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "documents\t%d\n", st.Documents)
	fmt.Fprintf(w, "blocks\t%d\n", st.Blocks)
	if st.EmbeddingSet != "" {
		fmt.Fprintf(w, "embeddings\t%d (embedding set %s)\n", st.Embeddings, st.EmbeddingSet)
	} else {
		fmt.Fprintf(w, "embeddings\tnone\n")
	}
	fmt.Fprintf(w, "default mode\t%s\n", ix.DefaultMode())
	ft := st.FullText
	fmt.Fprintf(w, "full-text\t%d terms, %d segments, %.1f MB of posting lists, %d tombstones\n",
		ft.Terms, ft.Segments, float64(ft.Bytes)/1e6, ft.Tombstones)
	return w.Flush()
}
