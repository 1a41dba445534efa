package fts

import (
	"container/list"
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
