package index

// Deletes: Index.Delete, and the rows of a delete or a replace (an
// ingest's new version of a document deletes the old one's rows the same
// way, deleteRows). Moved out of write.go (1,084 lines) unchanged.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index/fts"
	"github.com/escurel/escurel/internal/duck"
)

// deleteRows deletes the rows of the documents docIDs within tx and returns
// what deleteDocRows does.
func (ix *state) deleteRows(ctx context.Context, tx *duck.Tx, docIDs []any) (deletedRows, error) {
	if len(docIDs) == 0 {
		return deletedRows{}, nil
	}
	docs, known := ix.hitDocs.docRanges(docIDs)
	var err error
	if known {
		err = deleteDocumentRows(ctx, tx, docIDs, len(docs))
	} else {
		docs, err = deleteDocuments(ctx, tx, docIDs)
	}
	if err != nil {
		return deletedRows{}, fmt.Errorf("delete replaced documents: %w", err)
	}
	return ix.deleteDocRows(ctx, tx, docIDs, docs)
}

// deletedRows is what deleteDocRows deleted: the blocks, re-analyzed as
// the full-text index needs to remove them, the change to the documents
// per language, the doc ids, and the rows of document_text.
type deletedRows struct {
	blocks []fts.Block
	langs  langDelta
	docs   []string
	texts  int64
}

// textRows counts the rows of document_text (the extracted text of
// documents whose text is not their blob: HTML, DOCX, PDF), so that a
// delete of documents of an index without any (Markdown and plain text
// only) skips that table. It is counted within the first write
// transaction that needs it and changed by each committed write; writers
// hold writeMu, which guards it.
type textRows struct {
	known bool
	n     int64
}

// count returns the rows of document_text as tx sees them (the committed
// count, read within tx the first time).
func (t *textRows) count(ctx context.Context, tx *duck.Tx) (int64, error) {
	if !t.known {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM document_text`).Scan(&n); err != nil {
			return 0, fmt.Errorf("count document_text: %w", err)
		}
		t.n, t.known = n, true
	}
	return t.n, nil
}

// apply adds a committed write's change to the rows of document_text;
// call it with the commit.
func (t *textRows) apply(delta int64) {
	if t.known {
		t.n += delta
	}
}

// deleteDocRows deletes the rows other than documents' of the documents
// docIDs, whose documents rows deleteDocuments deleted within tx and
// returned (docs), and returns their blocks re-analyzed, as deleteRows
// does, the change to the documents per language, and the doc ids.
//
// A document's blocks are found by its block range (documents.first_block,
// block_count: the block_id key, no scan of the blocks table), each
// statement deleting them and returning their text at once; the ranges of
// the documents are merged. A range that holds another document's blocks
// (a file written otherwise) gives them back (restoreBlocks). A document
// whose range is not known, or does not hold all its blocks, or all of
// them when there are more than maxRanges ranges, has its (remaining)
// blocks found by doc id. Statements per document deleted alone: its
// blocks, its vectors (if any), document_text (none when the table is
// empty, textRows).
func (ix *state) deleteDocRows(ctx context.Context, tx *duck.Tx, docIDs []any, docs map[string]*docRange) (deletedRows, error) {
	gone := langDelta{}
	deleted := make([]string, 0, len(docs))
	for id, d := range docs {
		gone.add(d.lang, d.sens, -1)
		deleted = append(deleted, id)
	}
	var out []fts.Block
	var others []int64 // blocks of documents not deleted, deleted by a range
	scan := func(rows *sql.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b fts.Block
			var doc, body, context string
			if err := rows.Scan(&b.ID, &doc, &body, &context); err != nil {
				return err
			}
			d := docs[doc]
			if d == nil {
				others = append(others, b.ID)
				continue
			}
			d.seen++
			b.Level = level(d.sens)
			b.Terms[fts.Body] = ix.analyzer.Terms(nil, body, d.lang)
			b.Terms[fts.Context] = ix.analyzer.Terms(nil, context, d.lang)
			out = append(out, b)
		}
		return rows.Err()
	}
	// An index lookup (block_id =) is only used when it is the one
	// condition: the statement cannot also name the documents.
	const returning = ` RETURNING block_id, doc_id, body, context`
	spans, byID := blockSpans(docs)
	for _, sp := range spans {
		if err := scan(deleteQuery(ctx, tx, `DELETE FROM blocks WHERE `+rangeWhere(sp[0], sp[1])+returning)); err != nil {
			return deletedRows{}, fmt.Errorf("delete replaced blocks: %w", err)
		}
	}
	if len(others) > 0 {
		if err := ix.restoreBlocks(ctx, tx, others); err != nil {
			return deletedRows{}, fmt.Errorf("delete replaced blocks: %w", err)
		}
	}
	if spans != nil {
		byID = byID[:0]
		for id, d := range docs {
			if d.seen != d.count { // not known, or blocks outside the range
				byID = append(byID, id)
			}
		}
	}
	if len(byID) > 0 {
		q := `DELETE FROM blocks WHERE doc_id IN (` + placeholders(len(byID)) + `)` + returning
		if err := scan(deleteQuery(ctx, tx, q, byID...)); err != nil {
			return deletedRows{}, fmt.Errorf("delete replaced blocks: %w", err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if ix.vec != nil && len(out) > 0 {
		if err := ix.deleteVectors(ctx, tx, out); err != nil {
			return deletedRows{}, fmt.Errorf("delete replaced vectors: %w", err)
		}
	}
	texts, err := ix.texts.count(ctx, tx)
	if err != nil {
		return deletedRows{}, err
	}
	if texts > 0 {
		res, err := deleteExec(ctx, tx, `DELETE FROM document_text WHERE doc_id IN (`+placeholders(len(docIDs))+`)`, docIDs...)
		if err == nil {
			texts, err = res.RowsAffected()
		}
		if err != nil {
			return deletedRows{}, fmt.Errorf("delete replaced rows: %w", err)
		}
	}
	return deletedRows{out, gone, deleted, texts}, nil
}

// seeDelete, when not nil (tests), is shown each statement that deletes
// rows of a delete or a replace, with its arguments, within its
// transaction before it runs: TestDeleteStatementsUseKeys explains them.
var seeDelete func(ctx context.Context, tx *duck.Tx, query string, args []any)

// deleteQuery runs query, a statement that deletes rows and returns
// some, within tx.
func deleteQuery(ctx context.Context, tx *duck.Tx, query string, args ...any) (*sql.Rows, error) {
	if seeDelete != nil {
		seeDelete(ctx, tx, query, args)
	}
	return tx.QueryContext(ctx, query, args...)
}

// deleteExec runs query, a statement that deletes rows, within tx.
func deleteExec(ctx context.Context, tx *duck.Tx, query string, args ...any) (sql.Result, error) {
	if seeDelete != nil {
		seeDelete(ctx, tx, query, args)
	}
	return tx.ExecContext(ctx, query, args...)
}

// deleteVectors deletes the vectors of blocks (ascending ids): by runs of
// consecutive ids (the block_id key), or, past maxRanges runs, by a list.
func (ix *state) deleteVectors(ctx context.Context, tx *duck.Tx, blocks []fts.Block) error {
	var runs [][2]int64
	for _, b := range blocks {
		if n := len(runs); n > 0 && b.ID == runs[n-1][1]+1 {
			runs[n-1][1] = b.ID
			continue
		}
		runs = append(runs, [2]int64{b.ID, b.ID})
	}
	if len(runs) > maxRanges {
		_, err := deleteExec(ctx, tx, `DELETE FROM `+ix.vec.table+` WHERE block_id IN (SELECT unnest(?::BIGINT[]))`, blockIDs(blocks))
		return err
	}
	for _, r := range runs {
		if _, err := deleteExec(ctx, tx, `DELETE FROM `+ix.vec.table+` WHERE `+rangeWhere(r[0], r[1])); err != nil {
			return err
		}
	}
	return nil
}

// docRange is what a delete reads of a document's row: its source (for
// errors), language and sensitivity, and where its blocks lie (count -1:
// not known).
type docRange struct {
	source, lang, sens string
	first              int64
	count, seen        int32
}

// deleteDocumentRows deletes, within tx, the documents rows of docIDs by
// doc id (the primary key), of which held exist (the in-memory table,
// docRanges, says so); a count other than held is an error: the table
// and the rows disagree, and the delete must not go on.
func deleteDocumentRows(ctx context.Context, tx *duck.Tx, docIDs []any, held int) error {
	res, err := deleteExec(ctx, tx, `DELETE FROM documents WHERE doc_id IN (`+placeholders(len(docIDs))+`)`, docIDs...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(held) {
		return fmt.Errorf("%d documents rows deleted, the in-memory table holds %d of them", n, held)
	}
	return nil
}

// deleteDocuments deletes, within tx, the documents rows of docIDs that
// exist, by doc id (the primary key), and returns what a delete needs of
// each (docRange), read by the same statement.
func deleteDocuments(ctx context.Context, tx *duck.Tx, docIDs []any) (map[string]*docRange, error) {
	rows, err := deleteQuery(ctx, tx, `DELETE FROM documents WHERE doc_id IN (`+placeholders(len(docIDs))+`)
		RETURNING doc_id, source, language, sensitivity, first_block, block_count`, docIDs...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	docs := map[string]*docRange{}
	for rows.Next() {
		var id string
		d := &docRange{}
		if err := rows.Scan(&id, &d.source, &d.lang, &d.sens, &d.first, &d.count); err != nil {
			return nil, err
		}
		docs[id] = d
	}
	return docs, rows.Err()
}

// rangeWhere is the condition on block_id of an inclusive range: one
// block by equality (an index lookup), more by BETWEEN (zone maps). The
// bounds are written as constants: a BETWEEN of parameters is not pushed
// into the scan, and the scan then reads every row group.
func rangeWhere(lo, hi int64) string {
	if lo == hi {
		return `block_id = ` + strconv.FormatInt(lo, 10)
	}
	return `block_id BETWEEN ` + strconv.FormatInt(lo, 10) + ` AND ` + strconv.FormatInt(hi, 10)
}

// maxRanges bounds the block ranges a delete deletes one by one; past it,
// one scan by doc id is cheaper.
const maxRanges = 16

// blockSpans merges the block ranges (inclusive) of docs, adjacent or
// overlapping ones into one, ascending, and returns the documents whose
// range is not known. It returns no ranges, and every document with
// blocks or an unknown range in byID, when there would be more than
// maxRanges.
func blockSpans(docs map[string]*docRange) (spans [][2]int64, byID []any) {
	var all [][2]int64
	for id, d := range docs {
		switch {
		case d.count < 0 || d.first < 0:
			byID = append(byID, id)
		case d.count > 0:
			all = append(all, [2]int64{d.first, d.first + int64(d.count) - 1})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i][0] < all[j][0] })
	for _, r := range all {
		if n := len(spans); n > 0 && r[0] <= spans[n-1][1]+1 {
			spans[n-1][1] = max(spans[n-1][1], r[1])
			continue
		}
		spans = append(spans, r)
	}
	if len(spans) > maxRanges {
		byID = byID[:0]
		for id, d := range docs {
			if d.count != 0 {
				byID = append(byID, id)
			}
		}
		return nil, byID
	}
	return spans, byID
}

// Delete removes documents from the index and their records from the blob
// store, so that a rebuild does not bring them back. A document is named by
// its doc id or its source. The records go first (the blob store is the
// source of truth); the raw blobs stay, as other documents may share them.
// A record the index holds no rows of is deleted as well.
// It returns the doc ids deleted; names that match no document are an
// error, after the others are deleted.
func (ix *Index) Delete(ctx context.Context, names ...string) ([]string, error) {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	s, err := ix.live()
	if err != nil {
		return nil, err
	}
	done, err := s.deleteDocs(ctx, names...)
	if s.outOfMemory(ctx, "delete", err) { // records removed are removed again, idempotently
		done, err = s.deleteDocs(ctx, names...)
	}
	ix.foldAfter() // each removal leaves a pack of tombstones, even one that failed after
	return done, err
}

// deleteDocs is Index.Delete on one generation.
//
// It deletes the documents' rows in one transaction, and removes their
// records from the blob store before that transaction commits: the
// directory fsync that makes the removals durable runs while the
// transaction deletes the rows, and the commit waits for it. What it
// needs of the documents rows (their sources, languages, sensitivities
// and block ranges) comes from the in-memory table of hits (hitDocs,
// when a search has loaded it; the records are then removed first and
// the rows deleted by key after), or else from the rows as the first
// statement deletes them (DELETE … RETURNING). When a record cannot be
// removed, the rows of the documents named after it are left: only
// those whose records are gone are deleted (read from the rows: the
// transaction starts again).
func (ix *state) deleteDocs(ctx context.Context, names ...string) (done []string, err error) {
	ids := make([]any, 0, len(names))
	for _, name := range names {
		id := name
		if !blobstore.IsDocID(name) {
			id = blobstore.DocID(name)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// What the rows hold comes from memory when the table is loaded (a
	// server that has searched): the documents rows are then deleted by
	// key once the records are removed. Else the first statement deletes
	// them and reads it back (RETURNING).
	var tx *duck.Tx
	defer func() {
		if tx != nil {
			tx.Rollback()
		}
	}()
	held, known := ix.hitDocs.docRanges(ids)
	if !known {
		if tx, err = duck.Begin(ctx, ix.db); err != nil {
			return nil, err
		}
		if held, err = deleteDocuments(ctx, tx, ids); err != nil {
			return nil, fmt.Errorf("delete documents: %w", err)
		}
	}
	var missing []string
	var rowIDs []any // documents with rows whose records are removed
	var failed error // a record that could not be removed: the names after it are left
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		id := ids[i].(string)
		if seen[id] {
			continue // named twice
		}
		seen[id] = true
		d := held[id]
		if d == nil {
			// A record the index has no rows of (a batch that failed
			// after its records were stored) can be deleted too.
			source := name
			rec, err := ix.blobs.GetRecord(ctx, id)
			switch {
			case errors.Is(err, blobstore.ErrNotFound):
				missing = append(missing, name)
				continue
			case errors.Is(err, blobstore.ErrCorrupt):
				// A damaged record without rows: deleting it is its
				// repair; its blob, if any, is left to gc.
			case err != nil:
				failed = fmt.Errorf("delete %s: %w", name, err)
			default:
				source = rec.Source
			}
			if failed != nil {
				break
			}
			if err := ix.blobs.RemoveRecord(ctx, id); err != nil {
				failed = fmt.Errorf("delete %s: %w", source, err)
				break
			}
			done = append(done, id)
			continue
		}
		if err := ix.blobs.RemoveRecord(ctx, id); err != nil {
			failed = fmt.Errorf("delete %s: %w", d.source, err)
			break
		}
		rowIDs = append(rowIDs, id)
		done = append(done, id)
	}
	if len(done) == 0 {
		if failed != nil {
			return nil, failed
		}
		return nil, fmt.Errorf("delete: %w %s", errNoDocument, strings.Join(missing, ", "))
	}
	// From here on, a failure before the commit leaves the rows of
	// rowIDs served: their records are put back (undo).
	undo := func(err error) error {
		if tx != nil {
			tx.Rollback()
		}
		if uerr := ix.restoreRemoved(context.WithoutCancel(ctx), rowIDs); uerr != nil {
			err = fmt.Errorf("%w; and the records could not be put back (escurel verify lists them): %v", err, uerr)
		}
		return err
	}
	docs := held
	if known && len(rowIDs) > 0 {
		// The removals become durable while the rows are deleted.
		synced := ix.syncRemovals()
		if len(rowIDs) < len(held) {
			docs = make(map[string]*docRange, len(rowIDs))
			for _, id := range rowIDs {
				docs[id.(string)] = held[id.(string)]
			}
		}
		if tx, err = duck.Begin(ctx, ix.db); err != nil {
			<-synced
			return nil, undo(err)
		}
		if err := deleteDocumentRows(ctx, tx, rowIDs, len(rowIDs)); err != nil {
			<-synced
			return nil, undo(fmt.Errorf("delete documents: %w", err))
		}
		return ix.deleteFinish(ctx, tx, rowIDs, docs, synced, done, failed, missing, undo)
	}
	if len(rowIDs) < len(held) && len(rowIDs) > 0 {
		// Rows deleted whose records stay (a removal failed before
		// them): delete only the others, in a new transaction. writeMu
		// is held: nothing wrote meanwhile.
		tx.Rollback()
		again, err := duck.Begin(ctx, ix.db)
		if err != nil {
			<-ix.syncRemovals()
			return nil, undo(err) // tx has ended: its Rollback is a no-op
		}
		tx = again
		if docs, err = deleteDocuments(ctx, tx, rowIDs); err != nil {
			<-ix.syncRemovals()
			return nil, undo(fmt.Errorf("delete documents: %w", err))
		}
	}
	// The removals become durable while the rows are deleted; the commit
	// waits for them (the source of truth first).
	return ix.deleteFinish(ctx, tx, rowIDs, docs, ix.syncRemovals(), done, failed, missing, undo)
}

// deleteFinish is the end of deleteDocs: the rows of rowIDs (docs)
// deleted within tx, whose documents rows are, committed once synced says
// the records' removal is durable (deleteCommit), or, without rows, the
// wait for synced; then the error for names that failed (failed) or
// matched nothing (missing). undo is deleteDocs' for a failure before the
// commit.
func (ix *state) deleteFinish(ctx context.Context, tx *duck.Tx, rowIDs []any, docs map[string]*docRange, synced <-chan error,
	done []string, failed error, missing []string, undo func(error) error) ([]string, error) {
	if len(rowIDs) > 0 {
		if committed, err := ix.deleteCommit(ctx, tx, rowIDs, docs, synced); err != nil {
			if committed {
				return nil, fmt.Errorf("delete: committed, then: %w", err)
			}
			return nil, undo(err)
		}
	} else if err := <-synced; err != nil {
		return nil, err
	}
	if failed != nil {
		return done, failed
	}
	if len(missing) > 0 {
		return done, fmt.Errorf("delete: %w %s", errNoDocument, strings.Join(missing, ", "))
	}
	return done, nil
}

// syncRemovals makes the blob store's record removals durable in the
// background; the channel gives the result.
func (ix *state) syncRemovals() <-chan error {
	synced := make(chan error, 1)
	go func() { synced <- ix.blobs.SyncRemovals() }()
	return synced
}

// deleteCommit deletes the rows of the documents docIDs (whose rows are
// docs) within tx and commits, once synced says their records' removal is
// durable; then lets the full-text index merge as its policy says. It
// waits for synced whatever happens. committed reports whether the
// transaction committed (an error after it is the merge's).
func (ix *state) deleteCommit(ctx context.Context, tx *duck.Tx, docIDs []any, docs map[string]*docRange, synced <-chan error) (committed bool, err error) {
	waited := false
	wait := func() error {
		waited = true
		return <-synced
	}
	defer func() {
		if !waited {
			<-synced
		}
	}()
	del, err := ix.deleteDocRows(ctx, tx, docIDs, docs)
	if err != nil {
		return false, err
	}
	removed, deleted := del.blocks, del.docs
	rm, err := ix.fts.Remove(ctx, tx, removed)
	if err != nil {
		return false, err
	}
	if err := wait(); err != nil {
		return false, err
	}
	gone := blockIDs(removed)
	if err := ix.fts.CommitWith(ctx, tx, func() {
		ix.applyDense(nil, gone)
		ix.applyLanguages(del.langs)
		ix.texts.apply(-del.texts)
		ix.metaChanged(deleted)
		ix.wrote.Store(true)
		ix.pub.apply(nil, nil, gone)
		ix.docs.apply(nil, deleted)
		ix.hitDocs.apply(nil, deleted)
	}, rm); err != nil {
		return false, err
	}
	// The full-text merges only: a delete grows none of DuckDB's ART
	// indexes, so the automatic memory_limit fitted at open or by the last
	// write that grew them (state.maintain) still holds, and reading their
	// size (duckdb_memory(), about 1 ms) is not on a delete's path.
	return true, afterCommit(ix.merge(context.WithoutCancel(ctx)))
}

// errNoDocument is wrapped by a delete's error for names that match no
// document ("delete: no document NAME").
var errNoDocument = errors.New("no document")
