package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/replica"
)

// PublishCommand is "escurel publish --to URL": it verifies the live
// generation, uploads a copy of it to an object store and moves the
// published CURRENT there (package replica), for read replicas
// (escurel serve --replica-of URL). Through a running server it runs as a
// read, not a write job: it holds writes back only while it copies the
// generation (its verify reads the copied rows' snapshot after), and
// uploads without them.
type PublishCommand struct {
	m *Main
	g globals
}

// Run publishes the live generation.
func (c *PublishCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("publish", &c.g)
	to := fs.String("to", c.m.Getenv("ESCUREL_PUBLISH_TO"), "where to publish: a gocloud blob URL, s3://bucket?prefix=…&region=…, gs://, azblob:// or file:///dir (env ESCUREL_PUBLISH_TO)")
	asJSON := fs.Bool("json", false, "print the publication as one JSON object")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("publish: unexpected argument %q", args[0])
	}
	if *to == "" {
		return usageError("publish: --to URL is required (where replicas will read from)")
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	p, err := replica.Publish(ctx, ix, *to, nil)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(p)
	}
	if p.Unchanged {
		fmt.Fprintf(c.m.Stdout, "unchanged: %s (digest %s) is already published as publish %d to %s\n", p.Generation, p.Digest, p.Seq, blobstore.Redact(*to))
		return nil
	}
	image := "no full-text image (replicas load the full-text index from the tables)"
	if p.ImageBytes > 0 {
		image = "full-text image " + sizeText(p.ImageBytes)
	}
	fmt.Fprintf(c.m.Stdout, "published %s (digest %s) as publish %d to %s: %s, %s, %.1f MB; %s\n", p.Generation, p.Digest, p.Seq, blobstore.Redact(*to),
		plural(int(p.Documents), "document", "documents"), plural(int(p.Blocks), "block", "blocks"), float64(p.Bytes)/1e6, image)
	return nil
}

// sizeText is n bytes for a person: in MB with one decimal from 0.1 MB,
// in KB below.
func sizeText(n int64) string {
	if n < 100_000 {
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
