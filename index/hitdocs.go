package index

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
)

// hitDocs holds, per document of a generation, what a hit carries of its
// document (source, title, sensitivity, the two metadata columns), so that
// a search reads only the hits' block rows: joining them with documents
// scanned every doc id (the read took twice as long at 100k documents).
// It costs about 100 bytes a document besides its source, title and
// metadata.
//
// It is read on first use from the snapshot of a search (inside fts.View,
// so no write commits meanwhile) and kept in step by every write's commit
// (fts CommitWith's then, under the same full-text write lock), as
// publicIDs is; a metadata-only update (updateMeta) changes it under that
// lock too. So inside View it describes exactly the documents of the
// search's snapshot: an entry never holds a sensitivity other than its
// row's, and the output gate reads the entry as it read the row. A hit
// whose doc id it cannot hold (not 32 lowercase hex digits) sends the
// whole read back to the join (fillHitsCached). A switch opens a new
// state and so a new table, warmed when the old one was loaded.
type hitDocs struct {
	mu     sync.RWMutex
	loaded bool
	docs   map[[16]byte]hitDoc
	// stmt is hitBlocksSQL prepared on the state's database (blocksStmt),
	// closed with it.
	stmt atomic.Pointer[sql.Stmt]
}

// blocksStmt returns hitBlocksSQL prepared on db, preparing it on first
// use.
func (h *hitDocs) blocksStmt(ctx context.Context, db *sql.DB) (*sql.Stmt, error) {
	if st := h.stmt.Load(); st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, hitBlocksSQL)
	if err != nil {
		return nil, fmt.Errorf("prepare the hits' read: %w", err)
	}
	if !h.stmt.CompareAndSwap(nil, st) {
		st.Close()
		return h.stmt.Load(), nil
	}
	return st, nil
}

// hitDoc is a document's fields that hits carry, as stored.
type hitDoc struct {
	source, title string
	sensitivity   string // as stored; interned for the known levels
	meta, given   string // documents.meta and meta_given; "" for "{}"
}

// hitDocKey is the table's key of a doc id, and false for a string that
// is not 32 lowercase hex digits (never held: read from the row).
func hitDocKey(id string) ([16]byte, bool) {
	var k [16]byte
	if len(id) != 32 {
		return k, false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return k, false
		}
	}
	_, err := hex.Decode(k[:], []byte(id))
	return k, err == nil
}

// newHitDoc builds an entry from the stored columns.
func newHitDoc(source, title, sensitivity, meta, given string) hitDoc {
	switch sensitivity { // share the constants' bytes
	case Public:
		sensitivity = Public
	case Internal:
		sensitivity = Internal
	case Restricted:
		sensitivity = Restricted
	}
	if meta == "{}" {
		meta = ""
	}
	if given == "{}" {
		given = ""
	}
	return hitDoc{source: source, title: title, sensitivity: sensitivity, meta: meta, given: given}
}

// metaColumns returns the stored metadata columns.
func (d *hitDoc) metaColumns() (meta, given string) {
	meta, given = d.meta, d.given
	if meta == "" {
		meta = "{}"
	}
	if given == "" {
		given = "{}"
	}
	return meta, given
}

// hitDocUpdate is a committed write's document: its id and entry.
type hitDocUpdate struct {
	id  string
	doc hitDoc
}

// apply forgets the documents a committed write removed, then adds those
// it wrote (a replaced document is in both). A table not loaded yet is
// left so: its first load reads the committed rows. Call it under the
// full-text write lock, with the commit.
func (h *hitDocs) apply(added []hitDocUpdate, removed []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		return
	}
	for _, id := range removed {
		if k, ok := hitDocKey(id); ok {
			delete(h.docs, k)
		}
	}
	for _, u := range added {
		if k, ok := hitDocKey(u.id); ok {
			h.docs[k] = u.doc
		}
	}
}

// setGiven records a metadata-only update: documents ids now have
// meta_given given[i]. Call it under the full-text write lock, with the
// update's commit.
func (h *hitDocs) setGiven(ids, given []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		return
	}
	for i, id := range ids {
		k, ok := hitDocKey(id)
		if !ok {
			continue
		}
		d, ok := h.docs[k]
		if !ok {
			continue
		}
		d.given = newHitDoc("", "", "", "", given[i]).given
		h.docs[k] = d
	}
}

// isLoaded reports whether the table has been read.
func (h *hitDocs) isLoaded() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.loaded
}

// load reads every document's hit fields from q once: inside fts.View,
// or before the state is live (a switch warming it).
func (h *hitDocs) load(ctx context.Context, q querier) error {
	if h.isLoaded() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.loaded {
		return nil
	}
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM documents`).Scan(&n); err != nil {
		return fmt.Errorf("load documents for hits: %w", err)
	}
	docs := make(map[[16]byte]hitDoc, n)
	rows, err := q.QueryContext(ctx, `SELECT doc_id, source, title, sensitivity, meta, meta_given FROM documents`)
	if err != nil {
		return fmt.Errorf("load documents for hits: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, source, title, sens, meta, given string
		if err := rows.Scan(&id, &source, &title, &sens, &meta, &given); err != nil {
			return fmt.Errorf("load documents for hits: %w", err)
		}
		if k, ok := hitDocKey(id); ok {
			docs[k] = newHitDoc(source, title, sens, meta, given)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load documents for hits: %w", err)
	}
	h.docs, h.loaded = docs, true
	return nil
}

// lookup returns the entries of the documents ids that the table holds
// (load it first, inside fts.View), and false when it lacks one whose
// doc id it would hold: read that from the rows. A well-formed doc id
// that the table lacks has no row (the table holds every document of
// the snapshot), so it is left out of the map, as a join leaves it out.
func (h *hitDocs) lookup(ids []string) (map[string]hitDoc, bool) {
	out := make(map[string]hitDoc, len(ids))
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.loaded {
		return nil, false
	}
	for _, id := range ids {
		k, ok := hitDocKey(id)
		if !ok {
			return nil, false
		}
		if d, ok := h.docs[k]; ok {
			out[id] = d
		}
	}
	return out, true
}

// hitDocUpdates are the entries of the documents a write stores, built
// from the values it appends to their rows.
func hitDocUpdates(docs []pending) []hitDocUpdate {
	out := make([]hitDocUpdate, len(docs))
	for i, d := range docs {
		r := d.rec
		out[i] = hitDocUpdate{id: r.DocID, doc: newHitDoc(r.Source, r.Title, r.Sensitivity, metaJSON(d.meta), givenJSON(r.Meta))}
	}
	return out
}
