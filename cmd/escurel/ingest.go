package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/term"

	"github.com/escurel/escurel/analysis"
	"github.com/escurel/escurel/index"
)

// IngestCommand is "escurel ingest": it ingests files and directories.
type IngestCommand struct {
	m *Main
	g globals
}

// Run ingests the paths in args. It returns errFailed, after printing each
// failure and the summary, when any file could not be ingested, and the
// error of closing the index (its final checkpoint: a full disk) when that
// fails, so an ingest whose writes did not reach the file never exits 0.
func (c *IngestCommand) Run(ctx context.Context, args []string) (err error) {
	fs := c.m.newFlagSet("ingest", &c.g)
	lang := fs.String("lang", "", "language of documents without front-matter lang (default en)")
	sens := fs.String("sensitivity", "", "public, internal or restricted, for documents without front-matter sensitivity (default public)")
	maxBytes := fs.Int64("max-file-bytes", index.DefaultMaxFileBytes, "size cap of a file; a larger one is recorded as failed, unread")
	var metaArgs metaFlag
	fs.Var(&metaArgs, "meta", "key=value metadata of every file, over its front matter (repeatable; a key repeated is a list; --meta= clears)")
	args, err = c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageError("ingest: no PATH given")
	}
	if *lang != "" && !index.Exists(c.m.abs(c.g.indexDir)) {
		// A new index analyzes with the default analyzer: refuse a
		// language it does not know before the index is created.
		if err := checkLanguage(*lang, analysis.Standard{}.ID()); err != nil {
			return err
		}
	}
	if *sens != "" {
		if err := index.CheckSensitivity(*sens); err != nil {
			return usageError("ingest: --sensitivity: %v", err)
		}
	}
	if *maxBytes <= 0 {
		return usageError("ingest: --max-file-bytes %d: want a positive number of bytes", *maxBytes)
	}
	meta, err := metaArgs.meta()
	if err != nil {
		return usageError("ingest: --meta: %v", err)
	}
	for i, p := range args { // before the index exists: a typo creates nothing
		if _, err := os.Stat(c.m.abs(p)); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		if c.m.live != nil {
			args[i] = c.m.abs(p) // the client's working directory, not the server's
		}
	}
	ix, err := c.m.openOrCreate(ctx, c.g)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := c.m.closeIndex(ix); cerr != nil && (err == nil || errors.Is(err, errFailed)) {
			err = fmt.Errorf("ingest: %w", cerr)
		}
	}()
	if *lang != "" {
		// The index's own analyzer decides, before any file is read.
		if err := checkLanguage(*lang, ix.Manifest().Analyzer); err != nil {
			return err
		}
	}
	iopts := index.IngestOptions{Language: *lang, Sensitivity: *sens, MaxFileBytes: *maxBytes, Meta: meta}
	// On a terminal, a progress bar, and the failures after it; elsewhere
	// each failure as it happens.
	var bar *pb.ProgressBar
	if f, ok := c.m.Stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		iopts.Listed = func(n int) { bar = pb.New(n).SetWriter(f).Set("prefix", "ingest ").Start() }
		iopts.Progress = func(index.FileResult) { bar.Increment() }
	} else {
		iopts.Progress = func(fr index.FileResult) {
			if fr.Err != nil {
				fmt.Fprintf(c.m.Stderr, "escurel: ingest: %s\n", shown(fr.Err.Error(), true))
			}
		}
	}
	sum, err := ix.IngestFiles(ctx, args, iopts)
	if bar != nil {
		bar.Finish()
		for _, fr := range sum.Failed {
			fmt.Fprintf(c.m.Stderr, "escurel: ingest: %s\n", shown(fr.Err.Error(), true))
		}
	}
	total := sum.Added + sum.Replaced + sum.Unchanged + sum.MetaUpdated + len(sum.Failed)
	if err != nil {
		if total > 0 {
			fmt.Fprintf(c.m.Stdout, "stopped after %d files (%d added, %d replaced, %d unchanged, %d failed); what they wrote is committed\n",
				total, sum.Added, sum.Replaced, sum.Unchanged, len(sum.Failed))
		}
		return err
	}
	unchanged := fmt.Sprintf("%d unchanged", sum.Unchanged)
	if sum.MetaUpdated > 0 {
		unchanged += fmt.Sprintf(", %d metadata updated", sum.MetaUpdated)
	}
	fmt.Fprintf(c.m.Stdout, "%s into %s: %d added, %d replaced, %s, %d failed; %s written, %.1f MB in %.2fs\n",
		plural(total, "file", "files"), ix.Path(), sum.Added, sum.Replaced, unchanged, len(sum.Failed), plural(sum.Blocks, "block", "blocks"),
		float64(sum.Bytes)/1e6, sum.Elapsed.Seconds())
	c.formats(sum)
	if len(sum.Textless) > 0 {
		var names []string
		for _, f := range sum.Textless {
			names = append(names, fmt.Sprintf("%s (%d of %d pages)", shown(filepath.Base(f.Path), false), f.TextlessPages, f.Pages))
		}
		fmt.Fprintf(c.m.Stderr, "escurel: warning: %s with pages without text (scanned: escurel does no OCR; their words cannot be found; escurel status --textless lists them): %s\n",
			plural(len(names), "document", "documents"), strings.Join(names, ", "))
	}
	if len(sum.Skipped) > 0 {
		fmt.Fprintf(c.m.Stdout, "skipped %s: hidden, symlinked directories, or not .md, .markdown, .txt, .html, .htm, .xhtml, .pdf or .docx (first: %s)\n",
			plural(len(sum.Skipped), "entry", "entries"), shown(sum.Skipped[0], false))
	}
	if len(sum.Failed) > 0 {
		var names []string
		stored := 0
		for _, f := range sum.Failed {
			names = append(names, shown(filepath.Base(f.Path), false))
			if f.Status == index.Failed {
				stored++
			}
		}
		kept := ""
		if stored > 0 {
			kept = fmt.Sprintf(" (%s, listed by escurel status)", plural(stored, "kept as a failed document", "kept as failed documents"))
		}
		fmt.Fprintf(c.m.Stderr, "escurel: %d of %s failed%s: %s\n",
			len(sum.Failed), plural(total, "file", "files"), kept, strings.Join(names, ", "))
		return errFailed
	}
	return nil
}

// checkLanguage is a usage error unless lang is a language tag that the
// analyzer with ID analyzerID supports (an unsupported one would fail every
// file).
func checkLanguage(lang, analyzerID string) error {
	if err := index.CheckLanguage(lang); err != nil {
		return usageError("ingest: --lang: %v", err)
	}
	a, err := analysis.ByID(analyzerID)
	if err != nil {
		return err
	}
	if err := a.CheckLanguage(lang); err != nil {
		return usageError("ingest: --lang: %v", err)
	}
	return nil
}

// formats prints the per-format table of an ingest: documents, pages,
// pages without text, blocks, failures and extraction seconds.
func (c *IngestCommand) formats(sum index.Summary) {
	if len(sum.Formats) == 0 {
		return
	}
	names := make([]string, 0, len(sum.Formats))
	for n := range sum.Formats {
		names = append(names, n)
	}
	sort.Strings(names)
	w := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "format\tdocuments\tpages\twithout text\tblocks\tfailed\textract s (summed)\t\n")
	for _, n := range names {
		f := sum.Formats[n]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t\n", n, f.Documents, f.Pages, f.TextlessPages, f.Blocks, f.Failed, f.Extract.Seconds())
	}
	w.Flush()
}

// shown is s as a terminal may show it, so that what a document controls
// (its file name, headings, text) cannot forge output lines or send
// terminal sequences. A name or other one-line field (text false) is shown
// as it is, or quoted in Go syntax (escapes visible) when it is not valid
// UTF-8 or holds a control character: C0 (newline, CR, ESC…), DEL or C1.
// Text (text true) keeps its newlines and tabs and has every other control
// character and invalid byte escaped in place (\x1b, \u0085, \xff).
func shown(s string, text bool) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	if !text {
		return strconv.Quote(s)
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[0])
		case r == '\n' || r == '\t' || !unicode.IsControl(r):
			b.WriteString(s[:n])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\u0085', '\r'
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}

// echo is a query as output quotes it: Go syntax, cut to maxEcho bytes
// with its length when longer (a megabyte query is not echoed whole).
func echo(query string) string {
	if len(query) <= maxEcho {
		return strconv.Quote(query)
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(query[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(query[:cut]), len(query))
}

// maxEcho is how many bytes of a query output quotes.
const maxEcho = 200

// metaFlag collects --meta key=value arguments.
type metaFlag struct {
	args []string
	set  bool
}

func (f *metaFlag) String() string { return strings.Join(f.args, " ") }

func (f *metaFlag) Set(v string) error {
	f.set = true
	if v != "" {
		f.args = append(f.args, v)
	}
	return nil
}

// meta returns the metadata given: nil without --meta (documents keep
// theirs), empty with only --meta= (clear).
func (f *metaFlag) meta() (map[string]any, error) {
	if !f.set {
		return nil, nil
	}
	m, err := index.ParseMetaArgs(f.args)
	if m == nil && err == nil {
		m = map[string]any{}
	}
	return m, err
}
