package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// ExportCommand is "escurel export --parquet URL": the documents, blocks
// and vectors as Parquet files (index.Export), into a directory or a
// bucket. An operator's command: within its clearance it writes the
// documents' whole text.
type ExportCommand struct {
	m *Main
	g globals
}

// exportOutput is the --json document.
type exportOutput struct {
	To        string `json:"to"`        // where the files went, secrets redacted
	Clearance string `json:"clearance"` // the highest level exported
	*index.ExportResult
	// Withheld counts the documents above the clearance, left out.
	Withheld int64 `json:"withheld"`
}

// Run exports.
func (c *ExportCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("export", &c.g)
	to := fs.String("parquet", "", "where to write documents.parquet, blocks.parquet and vectors.parquet: a directory, file:///dir, or a bucket URL (s3://bucket/prefix?region=…, gs://, azblob://)")
	clearance := fs.String("clearance", index.Public, "highest document sensitivity exported: public, internal or restricted")
	asJSON := fs.Bool("json", false, "print what was written as JSON")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("export: unexpected argument %q", args[0])
	}
	if *to == "" {
		return usageError("export: --parquet URL is required (a directory or a bucket URL)")
	}
	if err := index.CheckSensitivity(*clearance); err != nil {
		return usageError("export: --clearance: %v", err)
	}
	dir, bucket, err := c.destination(*to)
	if err != nil {
		return err
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	if bucket != "" {
		// Written locally, then uploaded: DuckDB writes files.
		tmp, err := os.MkdirTemp("", "escurel-export-")
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	res, err := ix.Export(ctx, dir, &index.ExportOptions{Clearance: *clearance})
	if err != nil {
		return err
	}
	shownTo := dir
	if bucket != "" {
		if err := blobstore.UploadFiles(ctx, bucket, dir, res.Files); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		shownTo = blobstore.Redact(bucket)
		res.Dir = shownTo
	}
	withheld, err := ix.DocumentsWithheld(ctx, &index.ListOptions{Clearance: *clearance})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(exportOutput{To: shownTo, Clearance: *clearance, ExportResult: res, Withheld: withheld})
	}
	vecs := "no vectors (no embedder)"
	if res.EmbeddingSet != "" {
		vecs = fmt.Sprintf("%s (%s)", plural(int(res.Vectors), "vector", "vectors"), res.EmbeddingSet)
	}
	fmt.Fprintf(c.m.Stdout, "exported %s, %s, %s of %s at clearance %s to %s: %s\n",
		plural(int(res.Documents), "document", "documents"), plural(int(res.Blocks), "block", "blocks"), vecs,
		res.Generation, *clearance, shown(shownTo, false), strings.Join(res.Files, ", "))
	if withheld > 0 {
		fmt.Fprintf(c.m.Stdout, "%s above %s left out (--clearance to include them)\n", plural(int(withheld), "document", "documents"), *clearance)
	}
	return nil
}

// destination splits --parquet into a local directory (a path or a
// file:// URL; relative to the caller's working directory) or a bucket URL.
func (c *ExportCommand) destination(to string) (dir, bucket string, err error) {
	u, err := url.Parse(to)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 { // a path (C:\… on Windows)
		return c.m.abs(to), "", nil
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" {
			return "", "", usageError("export: --parquet %s: want file:///absolute/dir", to)
		}
		return c.m.abs(u.Path), "", nil
	case "mem":
		return "", "", usageError("export: --parquet %s: memory dies with this process; give a directory or a bucket", to)
	}
	return "", to, nil
}
