package fts

import (
	"container/heap"
	"container/list"
	"context"
	"fmt"
	"slices"
	"sort"
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

// putIfRoom caches lists for term if they fit beside what is cached,
// evicting nothing; false when the cache is full. A list over a quarter
// of the cache, which put refuses too, is skipped (true).
func (c *cache) putIfRoom(term int32, lists []segList) bool {
	n := listBytes(lists)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[term]; ok {
		return true // a search cached it meanwhile
	}
	if n > c.max/4 {
		return true // put would refuse it too: skip it, not the terms after it
	}
	if c.bytes+n > c.max {
		return false
	}
	c.m[term] = c.lru.PushBack(&entry{term: term, lists: lists, bytes: n})
	c.bytes += n
	return true
}

// listBytes is what lists count against the cache: their data and 16
// bytes each.
func listBytes(lists []segList) int64 {
	var n int64
	for _, l := range lists {
		n += int64(len(l.data)) + 16
	}
	return n
}

func (c *cache) put(term int32, lists []segList) {
	e := &entry{term: term, lists: lists, bytes: listBytes(lists)}
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

// maxWarmTerms bounds the terms a warm-up reads: an IN list of term ids
// costs about 10 µs a term (at 100,000 passages, in one query: 10,000
// terms 0.15 s, 50,000 0.47 s, 200,000 2.0 s; a scan of every list 1.0
// s), and a switch waits for WarmFrom with writes held back.
var maxWarmTerms = 20000 // a variable for tests

// WarmFrom fills ix's posting-list cache with the lists of the terms
// old's cache holds, the most recently used first, while they fit and
// up to maxWarmTerms (20,000): the warm-up of a generation about to
// replace old (Lucene's IndexReaderWarmer), so that its first searches
// read the hot lists from memory as they did on old instead of all
// reading fts_postings at once.
// Terms are matched by their text (a rebuild may number them
// differently); terms ix lacks are skipped. It reads db by chunks of term
// ids (fill), each under ix's read lock; old is only read. Errors are the
// query's.
func (ix *Index) WarmFrom(ctx context.Context, db Querier, old *Index) error {
	terms := old.hotTerms(ix.cache.max)
	if len(terms) == 0 {
		return nil
	}
	order := make([]int32, 0, len(terms)) // most recent first
	ix.View(func() error {
		for _, t := range terms {
			if id, ok := ix.ids.get(t); ok {
				order = append(order, id)
			}
		}
		return nil
	})
	return ix.fill(ctx, db, order)
}

// WarmFrequent fills ix's posting-list cache with the lists of its most
// frequent terms (by document frequency; the longest lists, the costliest
// to read cold), as many as fit in the cache by an estimate of their
// size from the segments' bytes per posting, and maxWarmTerms at most:
// the warm-up of an index opened to serve many searches (escurel serve).
// It reads db by chunks of term ids (fill), each under ix's read lock.
// It returns how many of those terms are cached when it ends (the
// estimate may overshoot: the least frequent are then left out, and
// nothing cached is evicted), with an error as well: the query's (ctx's
// when it is cancelled, which stops the warm-up between or within chunks).
func (ix *Index) WarmFrequent(ctx context.Context, db Querier) (int, error) {
	var order []int32
	ix.View(func() error {
		var bytes, postings int64
		for _, s := range ix.segments {
			bytes += s.bytes
		}
		h := &dfHeap{ix: ix}
		for id := range ix.df {
			d := ix.df[id][0]
			if d <= 0 {
				continue
			}
			postings += int64(d)
			if h.Len() < maxWarmTerms {
				heap.Push(h, int32(id))
			} else if d > ix.df[h.ids[0]][0] {
				h.ids[0] = int32(id)
				heap.Fix(h, 0)
			}
		}
		if postings == 0 {
			return nil
		}
		ids := h.ids
		sort.Slice(ids, func(a, b int) bool {
			da, db := ix.df[ids[a]][0], ix.df[ids[b]][0]
			return da > db || da == db && ids[a] < ids[b]
		})
		var est int64
		for _, id := range ids {
			size := int64(ix.df[id][0])*bytes/postings + 16
			if size > ix.cache.max/4 { // put would refuse it
				continue
			}
			if est += size; est > ix.cache.max {
				break
			}
			order = append(order, id)
		}
		return nil
	})
	err := ix.fill(ctx, db, order)
	ix.cache.mu.Lock()
	defer ix.cache.mu.Unlock()
	n := 0
	for _, id := range order {
		if _, ok := ix.cache.m[id]; ok {
			n++
		}
	}
	return n, err
}

// dfHeap is a min-heap of term ids by document frequency.
type dfHeap struct {
	ix  *Index
	ids []int32
}

func (h *dfHeap) Len() int           { return len(h.ids) }
func (h *dfHeap) Less(i, j int) bool { return h.ix.df[h.ids[i]][0] < h.ix.df[h.ids[j]][0] }
func (h *dfHeap) Swap(i, j int)      { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *dfHeap) Push(x any)         { h.ids = append(h.ids, x.(int32)) }
func (h *dfHeap) Pop() any {
	x := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	return x
}

// warmChunk is how many terms fill reads in one query, under one hold
// of the index's read lock: commits wait for at most one chunk (and
// searches behind a waiting commit).
var warmChunk = 2500 // a variable for tests

// fill reads the posting lists of the terms in order (the most wanted
// first) and caches them while the cache has room, evicting nothing: by
// chunks of warmChunk terms, each read in one query (readLists) and
// cached under the read lock it was read under, so that no commit or
// merge falls between. The caller must not hold ix's lock.
func (ix *Index) fill(ctx context.Context, db Querier, order []int32) error {
	full := false
	rank := make(map[int32]int, len(order))
	for i, id := range order {
		rank[id] = i
	}
	for len(order) > 0 {
		chunk := slices.Clone(order[:min(warmChunk, len(order))])
		order = order[len(chunk):]
		err := ix.View(func() error {
			lists, err := readLists(ctx, db, chunk)
			if err != nil {
				return err
			}
			slices.SortFunc(chunk, func(a, b int32) int { return rank[a] - rank[b] }) // most wanted first
			for _, id := range chunk {
				if ls := lists[id]; len(ls) > 0 { // none: the term left the index meanwhile
					if !ix.cache.putIfRoom(id, ls) {
						full = true
						return nil
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fts: warm the posting cache: %w", err)
		}
		if full {
			return nil
		}
	}
	return nil
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
