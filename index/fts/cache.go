package fts

import (
	"container/list"
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// DefaultCacheBytes bounds the posting-list cache: 64 MiB.
const DefaultCacheBytes = 64 << 20

// segList is a term's posting list in one segment.
type segList struct {
	seg  int32
	data []byte
	sk   *skips // the list's skip table (maxscore.go), built on first use
}

// cache keeps the posting lists of recently queried terms in memory, least
// recently used evicted first, so that a query on hot terms reads nothing
// from DuckDB. Entries are filled by searches (under the index's read
// lock, from the snapshot that lock describes) and updated by commits
// (under the write lock): a new segment appends its list to each cached
// term it holds; a merge or compaction empties the cache.
type cache struct {
	mu    sync.Mutex
	max   int64
	bytes int64
	lru   *list.List // of *entry, most recent at the front
	m     map[int32]*list.Element
}

type entry struct {
	term  int32
	lists []segList
	bytes int64
}

func newCache(max int64) *cache {
	return &cache{max: max, lru: list.New(), m: map[int32]*list.Element{}}
}

func (c *cache) get(term int32) ([]segList, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[term]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*entry).lists, true
}

func (c *cache) put(term int32, lists []segList) {
	e := &entry{term: term, lists: lists}
	for _, l := range lists {
		e.bytes += int64(len(l.data)) + 16
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.bytes > c.max/4 {
		return // one list must not flush the cache
	}
	if el, ok := c.m[term]; ok {
		c.bytes -= el.Value.(*entry).bytes
		c.lru.Remove(el)
	}
	c.m[term] = c.lru.PushFront(e)
	c.bytes += e.bytes
	for c.bytes > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		oe := old.Value.(*entry)
		delete(c.m, oe.term)
		c.bytes -= oe.bytes
	}
}

// appendSegment adds a new segment's lists to the cached terms it holds.
// Call under the index's write lock.
func (c *cache) appendSegment(seg int32, lists map[int32][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for term, data := range lists {
		el, ok := c.m[term]
		if !ok {
			continue
		}
		e := el.Value.(*entry)
		e.lists = append(e.lists[:len(e.lists):len(e.lists)], segList{seg, data, &skips{}})
		e.bytes += int64(len(data)) + 16
		c.bytes += int64(len(data)) + 16
	}
}

func (c *cache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.m)
	c.bytes = 0
}

// maxWarmTerms bounds the terms WarmFrom reads: the IN list of its one
// query costs about 10 µs a term (at 100,000 passages: 10,000 terms 0.15
// s, 50,000 0.47 s, 200,000 2.0 s; a scan of every list 1.0 s), and the
// switch waits for it with writes held back.
var maxWarmTerms = 20000 // a variable for tests

// WarmFrom fills ix's posting-list cache with the lists of the terms
// old's cache holds, the most recently used first, until they fill ix's
// cache or maxWarmTerms (20,000) are read: the warm-up of a generation about to replace old (Lucene's
// IndexReaderWarmer), so that its first searches read the hot lists from
// memory as they did on old instead of all reading fts_postings at once.
// Terms are matched by their text (a rebuild may number them
// differently); terms ix lacks are skipped. It reads db in one query,
// under ix's read lock; old is only read. Errors are the query's.
func (ix *Index) WarmFrom(ctx context.Context, db Querier, old *Index) error {
	terms := old.hotTerms(ix.cache.max)
	if len(terms) == 0 {
		return nil
	}
	return ix.View(func() error {
		var in strings.Builder
		order := make([]int32, 0, len(terms)) // most recent first
		for _, t := range terms {
			id, ok := ix.ids.get(t)
			if !ok {
				continue
			}
			if in.Len() > 0 {
				in.WriteByte(',')
			}
			in.WriteString(strconv.Itoa(int(id)))
			order = append(order, id)
		}
		if len(order) == 0 {
			return nil
		}
		lists := make(map[int32][]segList, len(order))
		err := scan(ctx, db, `SELECT term_id, segment_id, data FROM fts_postings WHERE term_id IN (`+in.String()+`)`, func(r *sql.Rows) error {
			var id, seg int32
			var data []byte
			if err := r.Scan(&id, &seg, &data); err != nil {
				return err
			}
			lists[id] = append(lists[id], segList{seg, data, &skips{}})
			return nil
		})
		if err != nil {
			return fmt.Errorf("fts: warm the posting cache: %w", err)
		}
		// The least recent first, so that the most recent ends at the front.
		for i := len(order) - 1; i >= 0; i-- {
			ls := lists[order[i]]
			sort.Slice(ls, func(a, b int) bool { return ls[a].seg < ls[b].seg })
			ix.cache.put(order[i], ls)
		}
		return nil
	})
}

// hotTerms returns the terms of ix's cached lists, the most recently used
// first, while their lists fit in budget bytes.
func (ix *Index) hotTerms(budget int64) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	c := ix.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	var terms []string
	var used int64
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		if used += e.bytes; used > budget || len(terms) == maxWarmTerms {
			break
		}
		terms = append(terms, ix.ids.term(e.term))
	}
	return terms
}

// CacheStats returns how many terms have their posting lists in the
// cache and the bytes those lists take (DefaultCacheBytes at most).
func (ix *Index) CacheStats() (terms int, bytes int64) {
	ix.cache.mu.Lock()
	defer ix.cache.mu.Unlock()
	return len(ix.cache.m), ix.cache.bytes
}
