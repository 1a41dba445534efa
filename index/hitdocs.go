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
// It also holds what a delete reads of a document's row (its language
// and block range; docRanges), so that a delete, once the table is
// loaded, deletes the documents row by its key without reading it back
// (a RETURNING cost 0.4-0.5 ms at 1M). Its entries are packed (hitEntry:
// 48 bytes, the strings in one allocation) in a slice that a map from
// the doc id's 16 bytes indexes: at 1M documents with 64 bytes of source
// and title each, 157 MB, against 332 MB as the map of hitDoc values it
// was (2 slots of 112 bytes a document, a string each;
// TestHitDocMemory).
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
	// at is the entry of each document held; entries the entries, those
	// of documents removed since listed in free for reuse.
	at      map[[16]byte]uint32
	entries []hitEntry
	free    []uint32
	// overflow: a document's strings did not fit an entry (4 GiB each),
	// so the table lacks it; lookups and docRanges then read the rows,
	// until the state's table is loaded again (a switch, an open). No row
	// DuckDB holds comes near it.
	overflow bool
	// langs are the languages the entries name (hitDoc.lang indexes it),
	// langIx their indexes; both only grow, under mu.
	langs  []string
	langIx map[string]uint16
	// stmt is hitBlocksSQL prepared on the state's database (blocksStmt),
	// closed with it.
	stmt atomic.Pointer[sql.Stmt]
	// joined counts the searches that read their hits' documents through
	// the join while the table was not loaded (hitDocsLoadAfter).
	joined uses
}

// hitDocsLoadAfter is the search of a state that loads the table (2 s at
// 1M passages, paid once; later searches read memory): the ones before
// it read their hits' documents through the join (fillHits). A one-shot
// process (escurel search) never pays the load; a server pays it on its
// third search instead of its first.
const hitDocsLoadAfter = 3

// uses counts the uses of something a state loads lazily (the hits'
// documents, the public ids) made without it.
type uses struct{ n atomic.Int32 }

// due counts one more use and reports whether hitDocsLoadAfter uses have
// been made, this one included: the one that loads. It stops counting
// there, so it never wraps.
func (u *uses) due() bool {
	return u.n.Load() >= hitDocsLoadAfter || u.n.Add(1) >= hitDocsLoadAfter
}

// loadNow reports whether a search should load the table now: it is
// loaded already, or hitDocsLoadAfter searches went without it.
func (h *hitDocs) loadNow() bool {
	return h.isLoaded() || h.joined.due()
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

// hitDoc is a document's fields that hits carry, and those a delete
// reads (docRange), as stored.
type hitDoc struct {
	source, title string
	sensitivity   string // as stored; interned for the known levels
	meta, given   string // documents.meta and meta_given; "" for "{}"
	first         int64  // documents.first_block
	count         int32  // documents.block_count
	lang          uint16 // documents.language: hitDocs.langs[lang]; noLang: not held
}

// noLang is hitDoc.lang of an entry whose language the table could not
// number (more than 65,535 languages): a delete of it reads its row.
const noLang = 1<<16 - 1

// hitEntry is a hitDoc as the table stores it: the strings back to back
// in text (source, title, a sensitivity other than the three levels,
// meta, given), cut by their lengths, and a known sensitivity as a code.
type hitEntry struct {
	text                         string
	source, title, sensLen, meta uint32 // lengths in text; given is the rest
	first                        int64
	count                        int32
	lang                         uint16
	sens                         uint8 // sensCodes' index; 0: in text
}

// sensCodes are the sensitivities a hitEntry holds as a code (its
// index); any other is kept in its text, as stored.
var sensCodes = [...]string{"", Public, Internal, Restricted}

// pack returns d as an entry, or false when its strings do not fit the
// lengths (4 GiB each: never for a row DuckDB holds).
func pack(d hitDoc) (hitEntry, bool) {
	e := hitEntry{first: d.first, count: d.count, lang: d.lang}
	sens := d.sensitivity
	for i, c := range sensCodes[1:] {
		if sens == c {
			e.sens, sens = uint8(i+1), ""
		}
	}
	const most = 1<<32 - 1
	if uint64(len(d.source)) > most || uint64(len(d.title)) > most || uint64(len(sens)) > most || uint64(len(d.meta)) > most {
		return hitEntry{}, false
	}
	e.source, e.title, e.sensLen, e.meta = uint32(len(d.source)), uint32(len(d.title)), uint32(len(sens)), uint32(len(d.meta))
	e.text = d.source + d.title + sens + d.meta + d.given
	return e, true
}

// doc returns the entry as a hitDoc, its strings slices of text.
func (e *hitEntry) doc() hitDoc {
	t := e.text
	cut := func(n uint32) string {
		s := t[:n]
		t = t[n:]
		return s
	}
	d := hitDoc{source: cut(e.source), title: cut(e.title), first: e.first, count: e.count, lang: e.lang}
	d.sensitivity = cut(e.sensLen)
	if e.sens != 0 {
		d.sensitivity = sensCodes[e.sens]
	}
	d.meta, d.given = cut(e.meta), t
	return d
}

// get returns the entry of k as a hitDoc; h.mu is held.
func (h *hitDocs) get(k [16]byte) (hitDoc, bool) {
	i, ok := h.at[k]
	if !ok {
		return hitDoc{}, false
	}
	return h.entries[i].doc(), true
}

// put stores d as the entry of k, in its entry or a free one; a document
// whose strings do not fit an entry is left out (read from its row: a
// lookup of it fails over to the join). h.mu is held for writing.
func (h *hitDocs) put(k [16]byte, d hitDoc) {
	e, ok := pack(d)
	if !ok {
		h.remove(k)
		h.overflow = true
		return
	}
	if i, ok := h.at[k]; ok {
		h.entries[i] = e
		return
	}
	if n := len(h.free); n > 0 {
		i := h.free[n-1]
		h.free = h.free[:n-1]
		h.entries[i] = e
		h.at[k] = i
		return
	}
	h.at[k] = uint32(len(h.entries))
	h.entries = append(h.entries, e)
}

// remove forgets the entry of k; h.mu is held for writing.
func (h *hitDocs) remove(k [16]byte) {
	if i, ok := h.at[k]; ok {
		delete(h.at, k)
		h.entries[i] = hitEntry{}
		h.free = append(h.free, i)
	}
}

// langOf returns the number of the language lang, numbering it if new,
// or noLang when the numbers are spent. Call it with mu held for writing.
func (h *hitDocs) langOf(lang string) uint16 {
	if n, ok := h.langIx[lang]; ok {
		return n
	}
	if len(h.langs) >= noLang {
		return noLang
	}
	if h.langIx == nil {
		h.langIx = map[string]uint16{}
	}
	n := uint16(len(h.langs))
	h.langs = append(h.langs, lang)
	h.langIx[lang] = n
	return n
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

// hitDocUpdate is a committed write's document: its id, entry and
// language (numbered as the entry is stored).
type hitDocUpdate struct {
	id   string
	doc  hitDoc
	lang string
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
			h.remove(k)
		}
	}
	for _, u := range added {
		if k, ok := hitDocKey(u.id); ok {
			d := u.doc
			d.lang = h.langOf(u.lang)
			h.put(k, d)
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
		d, ok := h.get(k)
		if !ok {
			continue
		}
		d.given = newHitDoc("", "", "", "", given[i]).given
		h.put(k, d)
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
	// Room for an eighth more: the first write after the load appends
	// without copying every entry (48 MB at 1M documents) under the lock.
	h.at, h.entries, h.free, h.overflow = make(map[[16]byte]uint32, n), make([]hitEntry, 0, n+n/8), nil, false
	defer func() {
		if !h.loaded { // a failed load keeps nothing of what it read
			h.at, h.entries, h.free = nil, nil, nil
		}
	}()
	rows, err := q.QueryContext(ctx, `SELECT doc_id, source, title, sensitivity, meta, meta_given, language, first_block, block_count FROM documents`)
	if err != nil {
		return fmt.Errorf("load documents for hits: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, source, title, sens, meta, given, lang string
		var first int64
		var count int32
		if err := rows.Scan(&id, &source, &title, &sens, &meta, &given, &lang, &first, &count); err != nil {
			return fmt.Errorf("load documents for hits: %w", err)
		}
		if k, ok := hitDocKey(id); ok {
			d := newHitDoc(source, title, sens, meta, given)
			d.first, d.count, d.lang = first, count, h.langOf(lang)
			h.put(k, d)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load documents for hits: %w", err)
	}
	h.loaded = true
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
	if !h.loaded || h.overflow {
		return nil, false
	}
	for _, id := range ids {
		k, ok := hitDocKey(id)
		if !ok {
			return nil, false
		}
		if d, ok := h.get(k); ok {
			out[id] = d
		}
	}
	return out, true
}

// held returns those of ids that the generation may hold, in order, as
// docSet's candidates do: every one the table holds, and any it cannot
// hold (not 32 lowercase hex digits); false when the table cannot tell
// (not loaded, or a document left out: overflow). The table holds every
// document of the committed state, kept in step by each commit.
func (h *hitDocs) held(ids []string) ([]string, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.loaded || h.overflow {
		return nil, false
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		k, ok := hitDocKey(id)
		if !ok {
			out = append(out, id)
			continue
		}
		if _, in := h.at[k]; in {
			out = append(out, id)
		}
	}
	return out, true
}

// hitDocUpdates are the entries of the documents a write stores, built
// from the values it appends to their rows; ids are the block ids of
// their blocks, in order (docBlockRange).
func hitDocUpdates(docs []pending, ids []int64) []hitDocUpdate {
	out := make([]hitDocUpdate, len(docs))
	i := 0
	for j, d := range docs {
		r := d.rec
		doc := newHitDoc(r.Source, r.Title, r.Sensitivity, metaJSON(d.meta), givenJSON(r.Meta))
		doc.first, doc.count = docBlockRange(ids, i, len(d.blocks))
		out[j] = hitDocUpdate{id: r.DocID, doc: doc, lang: r.Language}
		i += len(d.blocks)
	}
	return out
}

// docRanges returns what a delete reads of the rows of the documents ids
// (doc ids) that the generation holds (those it does not hold are left
// out), from the table, and false when the table cannot tell: not loaded,
// or an id or language it does not hold. The caller holds writeMu, so the
// table describes the committed rows (every commit applies to it).
func (h *hitDocs) docRanges(ids []any) (map[string]*docRange, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.loaded || h.overflow {
		return nil, false
	}
	out := make(map[string]*docRange, len(ids))
	for _, v := range ids {
		id, _ := v.(string)
		k, ok := hitDocKey(id)
		if !ok {
			return nil, false
		}
		d, ok := h.get(k)
		if !ok {
			continue
		}
		if d.lang == noLang {
			return nil, false
		}
		out[id] = &docRange{source: d.source, lang: h.langs[d.lang], sens: d.sensitivity, first: d.first, count: d.count}
	}
	return out, true
}
