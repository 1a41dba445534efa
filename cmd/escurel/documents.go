package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/escurel/escurel/index"
)

// DocumentsCommand is "escurel documents": the documents of the index
// within a clearance.
type DocumentsCommand struct {
	m *Main
	g globals
}

// Run lists the documents, by source.
func (c *DocumentsCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("documents", &c.g)
	asJSON := fs.Bool("json", false, `print {"documents":[…],"withheld":N} as JSON`)
	source := fs.String("source", "", "only documents whose source starts with this path (a directory: the documents under it)")
	status := fs.String("status", "", "only documents with this status: ok or failed")
	clearance := fs.String("clearance", index.Public, "highest document sensitivity to list: public, internal or restricted")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("documents: unexpected argument %q", args[0])
	}
	if err := index.CheckSensitivity(*clearance); err != nil {
		return usageError("documents: --clearance: %v", err)
	}
	if *status != "" && *status != index.StatusOK && *status != index.StatusFailed {
		return usageError("documents: --status %q: want ok or failed", *status)
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	opts := &index.ListOptions{Clearance: *clearance, SourcePrefix: sourcePrefix(c.m.existing(*source)), Status: *status}
	withheld, err := ix.DocumentsWithheld(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(ctx, ix, opts, withheld)
	}
	w := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "DOC ID\tSOURCE\tTITLE\tTYPE\tSENSITIVITY\tSTATUS\tBLOCKS\tBYTES\tINGESTED\tMETA\n")
	var failed []index.DocumentInfo
	n := 0
	for d, err := range ix.ListDocuments(ctx, opts) {
		if err != nil {
			w.Flush()
			return err
		}
		n++
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.DocID, shown(d.Source, false), shown(snippet(d.Title, 40), false), d.MediaType, d.Sensitivity,
			d.Status, d.Blocks, d.Bytes, d.IngestedAt.Format(time.RFC3339), shown(snippet(string(d.Meta), 80), false))
		if d.Status == index.StatusFailed {
			failed = append(failed, d)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.m.Stdout, "%s\n", plural(n, "document", "documents"))
	if len(failed) > 0 {
		fmt.Fprintf(c.m.Stdout, "\nfailed (no blocks):\n")
		for _, d := range failed {
			fmt.Fprintf(c.m.Stdout, "  %s: %s\n", shown(d.Source, false), shown(d.Reason, false))
		}
	}
	if withheld > 0 {
		fmt.Fprintf(c.m.Stdout, "and %s above clearance %s in the index, not listed (escurel documents --clearance restricted lists them)\n",
			plural(int(withheld), "document", "documents"), *clearance)
	}
	return nil
}

// printJSON writes one JSON object, the documents streamed into it as the
// iterator gives them.
func (c *DocumentsCommand) printJSON(ctx context.Context, ix *index.Index, opts *index.ListOptions, withheld int64) error {
	out := c.m.Stdout
	fmt.Fprint(out, `{"documents":[`)
	sep := ""
	for d, err := range ix.ListDocuments(ctx, opts) {
		if err != nil {
			return err
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s%s", sep, bytes.TrimSuffix(b.Bytes(), []byte("\n")))
		sep = ","
	}
	_, err := fmt.Fprintf(out, "],\"withheld\":%d}\n", withheld)
	return err
}

// sourcePrefix turns --source as typed into a source prefix: an existing
// path becomes its real absolute path (as ingest names sources), a
// directory's with a trailing separator, so that /docs does not match
// /docs2; anything else (a URI, a prefix of a name) is kept.
func sourcePrefix(s string) string {
	if s == "" || strings.Contains(s, "://") {
		return s
	}
	fi, err := os.Stat(s)
	if err != nil {
		return s
	}
	real, err := filepath.EvalSymlinks(s)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return s
	}
	real = filepath.ToSlash(real)
	if fi.IsDir() && !strings.HasSuffix(real, "/") {
		real += "/"
	}
	return real
}
