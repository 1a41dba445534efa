package index

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/dense"
	"github.com/escurel/escurel/index/fts"
	"github.com/escurel/escurel/internal/duck"
)

// Values of documents.title_from.
const (
	titleFromExtraction = "extraction"
	titleFromInput      = "input"
)

func titleFrom(given bool) string {
	if given {
		return titleFromInput
	}
	return titleFromExtraction
}

// level is the fts sensitivity level of a document sensitivity. A level
// escurel does not know is restricted: it fails closed (writes check the
// value, so only a damaged or hand-edited row has one).
func level(sensitivity string) uint8 {
	switch sensitivity {
	case Public:
		return 0
	case Internal:
		return 1
	}
	return 2
}

// write replaces the rows of each document in docs with its blocks, and
// their full-text postings, in one transaction; then lets the full-text
// index merge segments as its policy says. The transaction commits only
// once ready returns nil (the batch's records are durable: they may be
// written meanwhile). committed reports whether the transaction committed:
// an error after it (a merge) does not undo the write, and the merge runs
// whatever becomes of ctx.
func (ix *state) write(ctx context.Context, docs []pending, ready func() error) (committed bool, err error) {
	tx, err := duck.Begin(ctx, ix.db)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var replaced []any
	for _, d := range docs {
		if d.exists {
			replaced = append(replaced, d.rec.DocID)
		}
	}
	del, err := ix.deleteRows(ctx, tx, replaced)
	if err != nil {
		return false, err
	}
	removed, langs, replacedIDs := del.blocks, del.langs, del.docs
	if langs == nil {
		langs = langDelta{}
	}
	addedIDs := make([]string, len(docs))
	texts := -del.texts
	for i, d := range docs {
		langs.add(d.rec.Language, d.rec.Sensitivity, 1)
		addedIDs[i] = d.rec.DocID
		if d.text != "" {
			texts++
		}
	}
	rm, err := ix.fts.Remove(ctx, tx, removed)
	if err != nil {
		return false, err
	}
	n := 0
	for _, d := range docs {
		n += len(d.blocks)
	}
	ids, err := nextBlockIDs(ctx, tx, n)
	if err != nil {
		return false, err
	}
	// The full-text inversion (pure Go) runs while this goroutine appends
	// the documents and blocks (DuckDB): two cores instead of one.
	added := make([]fts.Block, 0, n)
	for _, d := range docs {
		for _, b := range d.blocks {
			added = append(added, fts.Block{ID: ids[len(added)], Level: level(d.rec.Sensitivity), Terms: b.terms})
		}
	}
	var inv *fts.Inverted
	var invErr error
	inverted := make(chan struct{})
	go func() {
		defer close(inverted)
		inv, invErr = ix.fts.Invert(added)
	}()
	defer func() { <-inverted }() // never left running past the write
	err = duck.Append(ctx, tx.Conn, "documents", []string{"doc_id", "source", "media_type", "title", "title_from", "sensitivity", "blob_id", "language", "ingested_at",
		"status", "reason", "extractor", "pages", "bytes", "source_mtime", "meta", "meta_given", "first_block", "block_count"},
		func(add func(...driver.Value) error) error {
			i := 0 // a document's blocks are numbered consecutively: ids[i:i+len(d.blocks)]
			for _, d := range docs {
				r := d.rec
				first, count := docBlockRange(ids, i, len(d.blocks))
				if err := add(r.DocID, r.Source, r.MediaType, r.Title, titleFrom(r.TitleGiven), r.Sensitivity, r.BlobID, r.Language, r.IngestedAt,
					d.status, d.reason(), d.extractor, int32(d.pages), r.Bytes, r.SourceMTime, metaJSON(d.meta), givenJSON(r.Meta), first, count); err != nil {
					return err
				}
				i += len(d.blocks)
			}
			return nil
		})
	if err != nil {
		return false, err
	}
	err = duck.Append(ctx, tx.Conn, "document_text", []string{"doc_id", "text"},
		func(add func(...driver.Value) error) error {
			for _, d := range docs {
				if d.text != "" {
					if err := add(d.rec.DocID, d.text); err != nil {
						return err
					}
				}
			}
			return nil
		})
	if err != nil {
		return false, err
	}
	public := make([]string, 0, n)
	err = duck.Append(ctx, tx.Conn, "blocks", []string{"block_id", "doc_id", "ord", "body", "byte_start", "byte_end", "context", "heading_path", "page",
		"parent_id", "heading", "window_text", "parent_locator", "public_id"},
		func(add func(...driver.Value) error) error {
			i := 0
			for _, d := range docs {
				for ord, b := range d.blocks {
					if err := add(ids[i], d.rec.DocID, int32(ord), b.body, int64(b.Start), int64(b.End), b.context, headingJSON(b.HeadingPath), int32(b.Page),
						b.parentID, b.Heading, b.window, b.locator, b.id); err != nil {
						return err
					}
					public = append(public, b.id)
					i++
				}
			}
			return nil
		})
	if err != nil {
		if cerr := ix.collision(ctx, docs); cerr != nil {
			return false, cerr
		}
		return false, err
	}
	var denseAdd []dense.Entry
	if ix.vec != nil {
		err = duck.Append(ctx, tx.Conn, ix.vec.table, []string{"block_id", "vector"},
			func(add func(...driver.Value) error) error {
				i := 0
				for _, d := range docs {
					for _, b := range d.blocks {
						if err := add(ids[i], vectorValue(b.vector)); err != nil {
							return err
						}
						denseAdd = append(denseAdd, dense.Entry{Block: ids[i], Level: level(d.rec.Sensitivity), Vector: b.vector})
						i++
					}
				}
				return nil
			})
		if err != nil {
			return false, err
		}
	}
	<-inverted
	if invErr != nil {
		return false, invErr
	}
	ad, err := ix.fts.Append(ctx, tx, inv)
	if err != nil {
		return false, err
	}
	gone := blockIDs(removed)
	ix.reserveDense(len(denseAdd))
	if err := ready(); err != nil {
		return false, err
	}
	if err := ix.fts.CommitWith(ctx, tx, func() {
		ix.applyDense(denseAdd, gone)
		ix.applyLanguages(langs)
		ix.texts.apply(texts)
		ix.metaChanged(addedIDs, replacedIDs)
		ix.wrote.Store(true)
		ix.pub.apply(ids, public, gone)
		ix.docs.apply(addedIDs, replacedIDs)
		ix.hitDocs.apply(hitDocUpdates(docs, ids), replacedIDs)
	}, rm, ad); err != nil {
		return false, err
	}
	return true, nil // the caller merges (Index.mergeAfter)
}

// collision explains a failed append of docs' blocks when the cause is a
// block id that another block holds (blocks.public_id is UNIQUE): another
// of docs, or a document the index holds and the write does not replace.
// It returns nil when that is not the cause. It reads outside the failed
// transaction, from what is committed; the caller holds writeMu.
func (ix *state) collision(ctx context.Context, docs []pending) error {
	holder := map[string]string{} // block id → source
	replaced := map[string]bool{}
	var ids []any
	for _, d := range docs {
		replaced[d.rec.DocID] = true
		for _, b := range d.blocks {
			if other, ok := holder[b.id]; ok {
				return &CollisionError{ID: b.id, Source: d.rec.Source, Other: other}
			}
			holder[b.id] = d.rec.Source
			ids = append(ids, b.id)
		}
	}
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		rows, err := ix.db.QueryContext(ctx, `SELECT b.public_id, b.doc_id, d.source FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
			WHERE b.public_id IN (`+placeholders(n)+`)`, ids[:n]...)
		if err != nil {
			return nil
		}
		for rows.Next() {
			var id, doc, src string
			if rows.Scan(&id, &doc, &src) == nil && !replaced[doc] {
				rows.Close()
				return &CollisionError{ID: id, Source: holder[id], Other: src}
			}
		}
		rows.Close()
		ids = ids[n:]
	}
	return nil
}

// docBlockRange is the block range (documents.first_block, block_count)
// of a document whose n blocks have the ids ids[i:i+n]: the first and the
// count, 0 and 0 for none, -1 and -1 when they are not consecutive.
func docBlockRange(ids []int64, i, n int) (first int64, count int32) {
	if n == 0 {
		return 0, 0
	}
	first = ids[i]
	if ids[i+n-1]-first != int64(n-1) {
		return -1, -1
	}
	return first, int32(n)
}

func blockIDs(bs []fts.Block) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

// langDelta is a write's change to the documents per language and
// sensitivity level (the counts countLanguages reads).
type langDelta map[string][3]int

func (d langDelta) add(lang, sens string, n int) {
	c := d[lang]
	c[level(sens)] += n
	d[lang] = c
}

// applyLanguages adds a committed write's change to the documents per
// language; it runs with the commit, under the full-text write lock, as
// setLanguages does. A language left without documents is dropped, as
// countLanguages leaves it out.
func (ix *state) applyLanguages(deltas ...langDelta) {
	ix.langMu.Lock()
	defer ix.langMu.Unlock()
	next := make(map[string][3]int, len(ix.langs)+1)
	for l, c := range ix.langs {
		next[l] = c
	}
	for _, d := range deltas {
		for l, dc := range d {
			c := next[l]
			for i := range c {
				c[i] += dc[i]
			}
			if c == [3]int{} {
				delete(next, l)
			} else {
				next[l] = c
			}
		}
	}
	ix.langs = next
}

// Compact merges the full-text index into one segment and drops the
// postings of deleted blocks (see fts.Index.Compact); then, when a tenth
// of the DuckDB file or more is reclaimable (free blocks, less those the
// next write fills again, and deleted rows still stored), it rewrites the
// live rows into a new generation, makes it live and removes the one it
// replaced (index/compact.go). Searches give the same results before and
// after.
func (ix *Index) Compact(ctx context.Context) error {
	replaced, err := ix.compactLive(ctx)
	if err != nil || replaced == "" {
		return err
	}
	if err := ix.layout.WaitReleased(ctx, replaced); err != nil {
		return err // left to Clean
	}
	// Under writeMu, so that no rollback makes it live again meanwhile
	// (RemoveReplaced refuses it if one did before).
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	return ix.layout.RemoveReplaced(replaced)
}

// compact is Index.Compact on one generation.
func (ix *state) compact(ctx context.Context) error {
	return ix.fts.Compact(ctx, ix.db)
}

// seeReindexJoin is called when reindex runs its anti-join (a test hook).
var seeReindexJoin = func() {}

// reindex adds to the full-text index every block that has no entry there
// (an index upgraded from the row-per-posting schema, or damaged), from the
// blocks' stored body and context.
//
// Every Open runs it: the ids are found first, from the two id columns
// alone, and only the blocks found are read and analyzed (an anti-join
// that read every block's body and context made an Open at 1M passages
// 3.3 s instead of 1.6).
func (ix *state) reindex(ctx context.Context) error {
	// In a sound index the blocks are exactly the full-text index's live
	// blocks. When their count and two sums (fts.Index.LiveSums) agree
	// with memory's, no block lacks its row, and the anti-join (150 ms at
	// 1M passages) is skipped. BIGINT arithmetic: a HUGEINT product took
	// 590 ms at 1M.
	var n, sum, mix int64
	if err := ix.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(block_id), 0)::BIGINT,
		coalesce(sum((block_id % 32749) * (block_id % 32749)), 0)::BIGINT FROM blocks`).Scan(&n, &sum, &mix); err != nil {
		return err
	}
	if ln, lsum, lmix := ix.fts.LiveSums(); n == ln && sum == lsum && mix == lmix {
		return nil
	}
	seeReindexJoin()
	missing, err := queryColumn[int64](ctx, ix.db, `SELECT block_id FROM blocks WHERE block_id NOT IN (SELECT block_id FROM fts_blocks)`)
	if err != nil || len(missing) == 0 {
		return err
	}
	blocks, err := ix.analyzedBlocks(ctx, ix.db, `b.block_id IN (SELECT unnest(?::BIGINT[]))`, missing)
	if err != nil || len(blocks) == 0 {
		return err
	}
	if ix.fts.Stats().Segments > 0 {
		// A block can lack its fts_blocks row and still have postings in
		// the segments (the row alone was lost): a compaction keeps only
		// live blocks' postings, so adding the block again cannot post it
		// twice.
		if err := ix.fts.CompactAll(ctx, ix.db); err != nil {
			return fmt.Errorf("reindex: %w", err)
		}
		// The document frequencies in memory were loaded with the
		// dropped postings counted: load them again from the rows.
		if ix.fts, err = fts.Load(ctx, ix.db); err != nil {
			return fmt.Errorf("reindex: %w", err)
		}
	}
	tx, err := duck.Begin(ctx, ix.db)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ad, err := ix.fts.Add(ctx, tx, blocks)
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	return ix.fts.Commit(ctx, tx, ad)
}

// analyzedBlocks reads the blocks that match the condition where (over
// blocks b joined with their documents), in block id order, and analyzes
// their body and context as their document's language: the terms the
// full-text index holds for them.
func (ix *state) analyzedBlocks(ctx context.Context, q querier, where string, args ...any) ([]fts.Block, error) {
	rows, err := q.QueryContext(ctx, `SELECT b.block_id, b.body, b.context, d.language, d.sensitivity
		FROM blocks b JOIN documents d ON d.doc_id = b.doc_id WHERE `+where+` ORDER BY b.block_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fts.Block
	for rows.Next() {
		var b fts.Block
		var body, context, lang, sens string
		if err := rows.Scan(&b.ID, &body, &context, &lang, &sens); err != nil {
			return nil, err
		}
		b.Level = level(sens)
		b.Terms[fts.Body] = ix.analyzer.Terms(nil, body, lang)
		b.Terms[fts.Context] = ix.analyzer.Terms(nil, context, lang)
		out = append(out, b)
	}
	return out, rows.Err()
}

// Locator is where a block's window lies in its document's text: a byte
// range, and the range of content units (paragraphs, list items, code
// blocks; 0-based, end exclusive) it covers.
type Locator struct {
	ByteStart      int64 `json:"byte_start"`
	ByteEnd        int64 `json:"byte_end"`
	ParagraphStart int   `json:"paragraph_start"`
	ParagraphEnd   int   `json:"paragraph_end"`
}

// locatorJSON encodes a block's window as blocks.parent_locator stores it.
func locatorJSON(b chunk.Block) string {
	out, _ := json.Marshal(Locator{int64(b.Window[0]), int64(b.Window[1]), b.Units[0], b.Units[1]}) // a struct of ints always marshals
	return string(out)
}

// headingJSON encodes a heading path as stored in blocks.heading_path: a JSON
// array of strings, "[]" when empty.
func headingJSON(path []string) string {
	if len(path) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(path) // []string always marshals
	return string(b)
}

// nextBlockIDs reserves n block ids from the block_ids sequence, ascending.
func nextBlockIDs(ctx context.Context, tx *duck.Tx, n int) ([]int64, error) {
	if n == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT nextval('block_ids') FROM range(?)`, n)
	if err != nil {
		return nil, fmt.Errorf("reserve block ids: %w", err)
	}
	defer rows.Close()
	ids := make([]int64, 0, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}
