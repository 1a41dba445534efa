package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/escurel/escurel/index"
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
	textless := fs.Bool("textless", false, "list the documents with pages without text (scanned: no text layer, no blocks)")
	clearance := fs.String("clearance", "", "show the failure details of documents up to this sensitivity (default public: others show only the kind of failure); restricted also shows the reclaimable bytes")
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("status: unexpected argument %q", args[0])
	}
	if *clearance != "" {
		if err := index.CheckSensitivity(*clearance); err != nil {
			return usageError("status: --clearance: %v", err)
		}
	}
	ix, err := c.m.openExisting(ctx, c.g)
	if err != nil {
		return err
	}
	defer c.m.closeIndex(ix)
	st, err := ix.Stats(ctx)
	if err != nil {
		return err
	}
	all, err := ix.Failed(ctx, *clearance)
	if err != nil {
		return err
	}
	// A source may itself be confidential: failed documents above the
	// clearance are counted, not listed (as escurel serve does).
	var failed []index.FailedDocument
	withheld := 0
	for _, f := range all {
		if index.CheckSensitivity(f.Sensitivity) == nil && levelOf(f.Sensitivity) <= levelOf(*clearance) {
			failed = append(failed, f)
		} else {
			withheld++
		}
	}
	// Sizes of garbage reveal the sizes of deleted documents: only for a
	// caller cleared for restricted ones.
	var reclaim *index.Reclaimable
	if *clearance == index.Restricted {
		if reclaim, err = ix.Reclaimable(ctx); err != nil {
			return err
		}
	}
	// Metadata keys of the documents the clearance may see: a key only
	// documents above it have is not named.
	metaKeys, err := ix.MetaKeys(ctx, *clearance)
	if err != nil {
		return err
	}
	var textlessDocs []index.TextlessDocument
	if *textless {
		if textlessDocs, err = ix.TextlessDocuments(ctx); err != nil {
			return err
		}
	}
	// A read replica says which published generation it serves and how
	// old it is: its staleness is explicit.
	var rep *replicaStatus
	if info, ok := ix.Replica(); ok {
		rep = &replicaStatus{ReplicaInfo: info, AgeSeconds: info.Age(time.Now()).Seconds()}
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(struct {
			index.Stats
			FailedDocuments   []index.FailedDocument   `json:"failed_documents"`
			FailedWithheld    int                      `json:"failed_withheld"`
			TextlessDocuments []index.TextlessDocument `json:"textless_documents_list,omitempty"`
			Reclaimable       *index.Reclaimable       `json:"reclaimable,omitempty"`
			MetaKeys          map[string]int           `json:"meta_keys"`
			Replica           *replicaStatus           `json:"replica,omitempty"`
		}{st, failed, withheld, textlessDocs, reclaim, metaKeys, rep})
	}
	m := st.Manifest
	w := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "index\t%s (%.1f MB)\n", st.Path, float64(st.FileBytes)/1e6)
	fmt.Fprintf(w, "blobs\t%s\n", st.BlobURL)
	if rep != nil {
		fmt.Fprintf(w, "replica of\t%s\n", rep.From)
		fmt.Fprintf(w, "serving\t%s, digest %s, publish %d, published %s (%s ago)\n", rep.Generation, rep.Digest, rep.Seq,
			rep.PublishedAt.Format(time.RFC3339), time.Duration(rep.AgeSeconds*float64(time.Second)).Round(time.Second))
		checked := "last looked " + rep.CheckedAt.Format(time.RFC3339)
		if rep.CheckError != "" {
			checked += ", failed: " + rep.CheckError
		}
		fmt.Fprintf(w, "published CURRENT\t%s\n", checked)
	}
	fmt.Fprintf(w, "schema version\t%d\n", st.SchemaVersion)
	fmt.Fprintf(w, "embedder\t%s\n", m.Embedder())
	fmt.Fprintf(w, "chunker\t%s\n", m.Chunker)
	fmt.Fprintf(w, "analyzer\t%s\n", m.Analyzer)
	fmt.Fprintf(w, "contextualize\t%s\n", m.Contextualize)
	fmt.Fprintf(w, "built by\tescurel %s, created %s, updated %s\n", m.EscurelVersion,
		m.CreatedAt.Format(time.RFC3339), m.UpdatedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "documents\t%d (%d failed)\n", st.Documents, st.Failed)
	var ex []string
	for id, n := range st.Extractors {
		if id == "" {
			id = "none (over the size cap, never read)"
		}
		ex = append(ex, fmt.Sprintf("%s %d", id, n))
	}
	sort.Strings(ex)
	fmt.Fprintf(w, "extractors\t%s\n", strings.Join(ex, ", "))
	if len(st.StaleExtractors) > 0 {
		fmt.Fprintf(w, "\tdocuments read by older extractors (%s): run escurel rebuild to read them again\n", strings.Join(st.StaleExtractors, ", "))
	}
	fmt.Fprintf(w, "blocks\t%d\n", st.Blocks)
	if line := metaKeysLine(metaKeys); line != "" {
		fmt.Fprintf(w, "metadata keys\t%s\n", line)
	}
	if st.TextlessPages > 0 {
		fmt.Fprintf(w, "pages without text\t%d in %s (scanned; escurel status --textless lists them)\n",
			st.TextlessPages, plural(int(st.TextlessDocuments), "document", "documents"))
	}
	if st.EmbeddingSet != "" {
		fmt.Fprintf(w, "embeddings\t%d (embedding set %s)\n", st.Embeddings, st.EmbeddingSet)
	} else {
		fmt.Fprintf(w, "embeddings\tnone\n")
	}
	fmt.Fprintf(w, "default mode\t%s\n", ix.DefaultMode())
	ft := st.FullText
	fmt.Fprintf(w, "full-text\t%d terms, %s, %.1f MB of posting lists, %d tombstones\n",
		ft.Terms, plural(int(ft.Segments), "segment", "segments"), float64(ft.Bytes)/1e6, ft.Tombstones)
	if reclaim != nil {
		fmt.Fprintf(w, "reclaimable\t%s: %s (%s), %s kept for rollback (%s), %s (%s), dead bytes in packs %s; escurel gc removes orphans and leftovers (and rewrites packs past half dead)\n",
			byteSize(reclaim.Bytes()), plural(reclaim.OrphanBlobs, "orphan blob", "orphan blobs"), byteSize(reclaim.OrphanBlobBytes),
			plural(reclaim.OldGenerations, "generation", "generations"), byteSize(reclaim.OldGenerationBytes),
			plural(reclaim.Leftovers, "leftover", "leftovers"), byteSize(reclaim.LeftoverBytes), byteSize(reclaim.PackDeadBytes))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(textlessDocs) > 0 {
		fmt.Fprintf(c.m.Stdout, "\ndocuments with pages without text (no text layer: their words cannot be found):\n")
		for _, d := range textlessDocs {
			fmt.Fprintf(c.m.Stdout, "  %s: %d of %d pages\n", shown(d.Source, false), d.TextlessPages, d.Pages)
		}
	}
	if len(failed) > 0 || withheld > 0 {
		fmt.Fprintf(c.m.Stdout, "\nfailed documents (no blocks; escurel rebuild extracts them again, except those never read):\n")
		for _, f := range failed {
			fmt.Fprintf(c.m.Stdout, "  %s: %s\n", shown(f.Source, false), shown(f.Reason, false))
		}
		if withheld > 0 {
			fmt.Fprintf(c.m.Stdout, "  and %s above clearance %s, not listed (escurel status --clearance restricted lists them)\n",
				plural(withheld, "document", "documents"), orPublic(*clearance))
		}
	}
	return nil
}

// levelOf orders sensitivities: public 0, internal 1, restricted 2; ""
// is public (a clearance not given).
func levelOf(s string) int {
	switch s {
	case index.Internal:
		return 1
	case index.Restricted:
		return 2
	}
	return 0
}

func orPublic(clearance string) string {
	if clearance == "" {
		return index.Public
	}
	return clearance
}

// metaKeysLine lists metadata keys with their document counts, most
// common first, built-in fields (which every document has) left out.
func metaKeysLine(keys map[string]int) string {
	builtin := map[string]bool{index.MetaSource: true, index.MetaMediaType: true, index.MetaLanguage: true,
		index.MetaTitle: true, index.MetaIngestedAt: true, index.MetaFolder: true}
	var names []string
	for k := range keys {
		if !builtin[k] {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if keys[names[i]] != keys[names[j]] {
			return keys[names[i]] > keys[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s (%d)", shown(k, false), keys[k])
	}
	return strings.Join(parts, ", ")
}

// replicaStatus is a read replica's part of status --json: what it
// serves and its age, in seconds, when status ran.
type replicaStatus struct {
	index.ReplicaInfo
	AgeSeconds float64 `json:"age_seconds"`
}
