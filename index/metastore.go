package index

// The in-memory table of the documents' metadata that filters are
// evaluated against: built from the database on the first filtered search
// after a write (a version counter that every commit bumps says when it
// is stale), columnar (one column per key, values by document), with the
// blocks of each document, so that a filter becomes a bitmap of allowed
// blocks (by internal block number) in one pass over its keys' columns.

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// metaCache holds a state's metadata table, its version, and the
// documents each write since the table was built changed, so that the
// next filtered search re-reads those documents only.
type metaCache struct {
	ver   atomic.Uint64 // bumped after every commit that may change documents
	cur   atomic.Pointer[metaStore]
	build sync.Mutex // one build at a time

	logMu sync.Mutex
	log   []metaChange // by version, ascending; those after cur's version matter
	logN  int          // doc ids in log
	full  uint64       // a change at this version or below named no documents: rebuild whole
}

// metaChange is one committed write's documents (ids, any order) and the
// version it bumped the cache to.
type metaChange struct {
	ver uint64
	ids []string
}

// maxMetaLog bounds the doc ids the log keeps: past it, the next build
// reads every document again (as it would anyway for that many).
const maxMetaLog = 1 << 16

// metaChanged marks the metadata table stale for the documents (doc ids,
// any order, in one or more lists) that a committed write wrote, replaced
// or removed; none changes nothing. Writers call it after their commit.
func (ix *state) metaChanged(lists ...[]string) {
	if ids := slices.Concat(lists...); len(ids) > 0 {
		ix.meta.bump(ids)
	}
}

// metaStale marks the whole metadata table stale: the next filtered
// search reads every document again.
func (ix *state) metaStale() { ix.meta.bump(nil) }

// bump records a change to the documents ids (kept: the caller gives
// them up), or to all when ids is nil, under a new version.
func (c *metaCache) bump(ids []string) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	v := c.ver.Add(1)
	if ids == nil || c.logN+len(ids) > maxMetaLog {
		c.full, c.log, c.logN = v, nil, 0
		return
	}
	c.log = append(c.log, metaChange{ver: v, ids: ids})
	c.logN += len(ids)
}

// changedSince returns the documents the writes of versions in (from, to]
// changed, sorted and unique; whole is true when one of them named none
// (or the log overflowed), and forgets the changes at or below from.
func (c *metaCache) changedSince(from, to uint64) (ids []string, whole bool) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	if c.full > from {
		whole = true
	}
	keep := c.log[:0]
	n := 0
	for _, ch := range c.log {
		if ch.ver <= from {
			continue
		}
		keep = append(keep, ch)
		n += len(ch.ids)
		if ch.ver <= to && !whole {
			ids = append(ids, ch.ids...)
		}
	}
	clear(c.log[len(keep):])
	c.log, c.logN = keep, n
	if whole {
		return nil, true
	}
	slices.Sort(ids)
	return slices.Compact(ids), false
}

// metaStore is the metadata of a state's documents (status ok) at one
// version: immutable once built, but for the cache of evaluated filters.
type metaStore struct {
	ver     uint64
	whole   bool        // read from every document, not patched
	n       int         // documents
	ids     []string    // doc ids by document
	levels  []uint8     // by document
	boff    []int32     // document i's blocks are blocks[boff[i]:boff[i+1]]
	blocks  []int64     // internal block numbers
	words   int         // length of a block bitmap
	visible [3][]uint64 // documents at a level ≤ l, by l
	cols    map[string]*metaColumn

	mu    sync.Mutex
	cache map[string]*allowedSet // by level and filter text
}

// metaColumn is one key's values: document i's are vals[off[i]:off[i+1]]
// (more than one for a list).
type metaColumn struct {
	off  []int32
	vals []fval
}

// allowedSet is a filter's outcome for one clearance: a bitmap of the
// allowed blocks by internal number, and how many there are.
type allowedSet struct {
	bits []uint64
	n    int
}

// maxCachedFilters bounds a store's cache of evaluated filters.
const maxCachedFilters = 64

// metaStore returns the metadata table as of the caller's snapshot q,
// bringing it up to date when a write made it stale: the documents the
// writes since the table was built changed are read again and merged into
// a copy of it (patchMetaStore); the whole table is read when none was
// built, a write did not say which documents it changed, or more than an
// eighth of them changed. Read the version before q's transaction
// begins: a store built from a newer snapshot under an older version is
// only brought up to date again (re-reading a document is idempotent).
func (ix *state) metaStore(ctx context.Context, q querier) (*metaStore, error) {
	ver := ix.meta.ver.Load()
	if st := ix.meta.cur.Load(); st != nil && st.ver == ver {
		return st, nil
	}
	ix.meta.build.Lock()
	defer ix.meta.build.Unlock()
	cur := ix.meta.cur.Load()
	if cur != nil && cur.ver == ver {
		return cur, nil
	}
	var st *metaStore
	var err error
	if cur == nil {
		ix.meta.changedSince(ver, ver) // forget what the first build reads anyway
		st, err = buildMetaStore(ctx, q, ver, nil)
	} else if ids, whole := ix.meta.changedSince(cur.ver, ver); whole || len(ids) > cur.n/8+64 {
		st, err = buildMetaStore(ctx, q, ver, nil)
	} else {
		st, err = patchMetaStore(ctx, q, cur, ids, ver)
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	ix.meta.cur.Store(st)
	return st, nil
}

// patchMetaStore returns old at version ver with the documents ids (sorted)
// read again from q: those still there (status ok) with their current
// values, level and blocks, those gone dropped. Unchanged documents keep
// their values from old; ordinals need not follow doc ids.
func patchMetaStore(ctx context.Context, q querier, old *metaStore, ids []string, ver uint64) (*metaStore, error) {
	fresh, err := buildMetaStore(ctx, q, ver, ids)
	if err != nil {
		return nil, err
	}
	st := &metaStore{ver: ver, cols: map[string]*metaColumn{}, cache: map[string]*allowedSet{}}
	for k := range old.cols {
		st.cols[k] = &metaColumn{}
	}
	for k := range fresh.cols {
		st.cols[k] = &metaColumn{}
	}
	var maxBlock int64 = -1
	copyDoc := func(from *metaStore, i int) {
		for k, c := range st.cols {
			c.off = append(c.off, int32(len(c.vals)))
			if fc := from.cols[k]; fc != nil {
				c.vals = append(c.vals, fc.vals[fc.off[i]:fc.off[i+1]]...)
			}
		}
		st.ids = append(st.ids, from.ids[i])
		st.levels = append(st.levels, from.levels[i])
		st.boff = append(st.boff, int32(len(st.blocks)))
		for _, b := range from.blocks[from.boff[i]:from.boff[i+1]] {
			st.blocks = append(st.blocks, b)
			maxBlock = max(maxBlock, b)
		}
		st.n++
	}
	for i := 0; i < old.n; i++ {
		if _, changed := slices.BinarySearch(ids, old.ids[i]); !changed {
			copyDoc(old, i)
		}
	}
	for i := 0; i < fresh.n; i++ {
		copyDoc(fresh, i)
	}
	st.finish(maxBlock)
	return st, nil
}

// finish closes the offsets of a store of st.n documents whose largest
// block number is maxBlock, and builds the per-level visibility bitmaps.
func (st *metaStore) finish(maxBlock int64) {
	for _, c := range st.cols {
		for len(c.off) <= st.n {
			c.off = append(c.off, int32(len(c.vals)))
		}
	}
	for len(st.boff) <= st.n {
		st.boff = append(st.boff, int32(len(st.blocks)))
	}
	words := (st.n + 63) / 64
	for l := range st.visible {
		st.visible[l] = make([]uint64, words)
	}
	for i, lv := range st.levels {
		for l := int(lv); l < len(st.visible); l++ {
			st.visible[l][i/64] |= 1 << (i % 64)
		}
	}
	st.words = int(maxBlock/64) + 1
}

// buildMetaStore reads the documents' metadata and blocks: every
// document's when only is nil, else those of the documents only (doc ids)
// that q holds.
func buildMetaStore(ctx context.Context, q querier, ver uint64, only []string) (*metaStore, error) {
	st := &metaStore{ver: ver, whole: only == nil, cols: map[string]*metaColumn{}, cache: map[string]*allowedSet{}}
	which, args := "", []any(nil)
	if only != nil {
		which, args = ` AND doc_id IN (SELECT unnest(?::VARCHAR[]))`, []any{only}
	}
	rows, err := q.QueryContext(ctx, `SELECT doc_id, source, media_type, language, title, ingested_at, sensitivity, meta, meta_given
		FROM documents WHERE status = 'ok'`+which+` ORDER BY doc_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// add appends a value of document doc (documents come in order; a
	// document's values of one key are contiguous): off[doc] is set, to
	// where its values start, when its first value comes.
	add := func(doc int, key string, v fval) {
		c := st.cols[key]
		if c == nil {
			c = &metaColumn{}
			st.cols[key] = c
		}
		for len(c.off) <= doc {
			c.off = append(c.off, int32(len(c.vals)))
		}
		c.vals = append(c.vals, v)
	}
	for rows.Next() {
		var id, src, mt, lang, title, sens, meta, given string
		var at time.Time
		if err := rows.Scan(&id, &src, &mt, &lang, &title, &at, &sens, &meta, &given); err != nil {
			return nil, err
		}
		doc := st.n
		st.n++
		st.ids = append(st.ids, id)
		st.levels = append(st.levels, level(sens))
		add(doc, MetaSource, fval{kind: kString, s: src})
		add(doc, MetaMediaType, fval{kind: kString, s: mt})
		add(doc, MetaLanguage, fval{kind: kString, s: lang})
		add(doc, MetaTitle, fval{kind: kString, s: title})
		add(doc, MetaFolder, fval{kind: kString, s: folderOf(src)})
		at = at.UTC()
		add(doc, MetaIngestedAt, fval{kind: kDate, t: at.UnixNano(), s: at.Format(time.RFC3339Nano)})
		fm, err := parseMetaJSON(meta)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		gv, err := parseMetaJSON(given)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		m := mergeMeta(fm, gv)
		for _, k := range metaKeys(m) {
			if builtinMeta[k] {
				continue
			}
			switch x := m[k].(type) {
			case []any:
				for _, e := range x {
					if v, ok := metaValue(e); ok {
						add(doc, k, v)
					}
				}
			default:
				if v, ok := metaValue(x); ok {
					add(doc, k, v)
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	// Blocks by document, in the order above (the ordinal is the rank of
	// doc_id among the documents read).
	brows, err := q.QueryContext(ctx, `SELECT d.ord, b.block_id FROM blocks b
		JOIN (SELECT doc_id, (row_number() OVER (ORDER BY doc_id) - 1)::INTEGER AS ord FROM documents WHERE status = 'ok'`+which+`) d ON d.doc_id = b.doc_id
		ORDER BY d.ord, b.block_id`, args...)
	if err != nil {
		return nil, err
	}
	defer brows.Close()
	st.boff = make([]int32, st.n+1)
	var maxBlock int64 = -1
	next := 0
	for brows.Next() {
		var ord int32
		var id int64
		if err := brows.Scan(&ord, &id); err != nil {
			return nil, err
		}
		if int(ord) >= st.n || int(ord) < next-1 {
			return nil, fmt.Errorf("block %d: document ordinal %d out of order", id, ord)
		}
		for next <= int(ord) {
			st.boff[next] = int32(len(st.blocks))
			next++
		}
		st.blocks = append(st.blocks, id)
		maxBlock = max(maxBlock, id)
	}
	if err := brows.Err(); err != nil {
		return nil, err
	}
	for ; next <= st.n; next++ {
		st.boff[next] = int32(len(st.blocks))
	}
	st.finish(maxBlock)
	return st, nil
}

// allowed evaluates f for a caller of clearance level maxLevel: the
// blocks of the documents at that level or below that satisfy it.
// Documents above the level take no part, so what a filter selects says
// nothing about them.
func (st *metaStore) allowed(f *Filter, maxLevel uint8) *allowedSet {
	key := string(rune('0'+maxLevel)) + f.src
	st.mu.Lock()
	if a, ok := st.cache[key]; ok {
		st.mu.Unlock()
		return a
	}
	st.mu.Unlock()
	docs := st.eval(&f.root)
	vis := st.visible[min(int(maxLevel), len(st.visible)-1)]
	a := &allowedSet{bits: make([]uint64, st.words)}
	for w, word := range docs {
		word &= vis[w]
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			for _, b := range st.blocks[st.boff[i]:st.boff[i+1]] {
				a.bits[b/64] |= 1 << (b % 64)
				a.n++
			}
		}
	}
	st.mu.Lock()
	if len(st.cache) >= maxCachedFilters {
		clear(st.cache)
	}
	st.cache[key] = a
	st.mu.Unlock()
	return a
}

// eval returns the documents satisfying n, as a bitmap by ordinal (not
// yet restricted to a clearance).
func (st *metaStore) eval(n *fnode) []uint64 {
	words := (st.n + 63) / 64
	out := make([]uint64, words)
	switch n.op {
	case "and", "or":
		l, r := st.eval(&n.kids[0]), st.eval(&n.kids[1])
		for i := range out {
			if n.op == "and" {
				out[i] = l[i] & r[i]
			} else {
				out[i] = l[i] | r[i]
			}
		}
		return out
	case "not":
		k := st.eval(&n.kids[0])
		for i := range out {
			out[i] = ^k[i]
		}
		if st.n%64 != 0 {
			out[words-1] &= 1<<(st.n%64) - 1
		}
		return out
	case "!=":
		return st.eval(&fnode{op: "not", kids: []fnode{{op: "=", key: n.key, vals: n.vals}}})
	}
	c := st.cols[n.key]
	if c == nil {
		return out // a key no document has matches nothing
	}
	for i := 0; i < st.n; i++ {
		vs := c.vals[c.off[i]:c.off[i+1]]
		if len(vs) == 0 {
			continue
		}
		hit := n.op == "exists"
	values:
		for _, v := range vs {
			if hit {
				break
			}
			for _, l := range n.vals {
				if matches(n.op, v, l) {
					hit = true
					break values
				}
			}
		}
		if hit {
			out[i/64] |= 1 << (i % 64)
		}
	}
	return out
}

// keyCounts counts the documents at level maxLevel or below that have
// each key, built-in fields included.
func (st *metaStore) keyCounts(maxLevel uint8) map[string]int {
	vis := st.visible[min(int(maxLevel), len(st.visible)-1)]
	out := map[string]int{}
	for k, c := range st.cols {
		n := 0
		for i := 0; i < st.n; i++ {
			if c.off[i] < c.off[i+1] && vis[i/64]&(1<<(i%64)) != 0 {
				n++
			}
		}
		if n > 0 {
			out[k] = n
		}
	}
	return out
}

// MetaKeys counts, for each metadata key, the documents (status ok)
// that have it, among those a caller of the given clearance may see (a key
// only documents above it have is not listed); built-in fields included.
func (ix *Index) MetaKeys(ctx context.Context, clearance string) (map[string]int, error) {
	levels, err := allowed(clearance)
	if err != nil {
		return nil, err
	}
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	var out map[string]int
	err = s.fts.View(func() error {
		tx := &lazyTx{db: s.db}
		defer tx.rollback()
		st, err := s.metaStore(ctx, tx)
		if err != nil {
			return err
		}
		out = st.keyCounts(uint8(len(levels) - 1))
		return nil
	})
	return out, err
}
