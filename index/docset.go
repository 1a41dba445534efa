package index

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// docSet holds which documents a generation holds, in memory, so that an
// ingest asks the database only about the documents that may exist: a
// batch of new documents reads no row (the semi-join of a batch's ids
// against documents scans every doc_id, a cost that grows with the index).
// It counts the first 8 bytes of each doc id (a doc id is 32 hex digits),
// so it may say "maybe" for a document the index does not hold (the
// database then answers), never "no" for one it holds.
//
// Loading it reads every doc id (at 1M documents about 0.3 s of query and
// 0.1 s of map), which a process writing one batch never earns back. So a
// generation rents before it buys (the ski-rental rule): its first
// docSetLoadAfter lookups of more than docSetMinBatch ids ask DuckDB
// which of the ids it holds (a semi-join on doc_id alone: 35-100 ms at
// 1M, 8-25 ms at 100k), and the next one loads the set, under fts.View
// (no commit meanwhile, so the rows read are those the in-memory indexes
// describe). Smaller lookups look their ids up by key. Once loaded, it is
// kept in step by every write's commit, under the full-text write lock,
// as publicIDs is.
type docSet struct {
	mu      sync.Mutex
	loaded  bool
	queried int              // lookups answered by DuckDB while not loaded
	n       map[uint64]int32 // doc id prefix → documents with it
}

// docKey is the set's key of a doc id, and false for a string that is not
// a doc id (always a "maybe").
func docKey(id string) (uint64, bool) {
	if len(id) != 32 {
		return 0, false
	}
	n, err := strconv.ParseUint(id[:16], 16, 64)
	return n, err == nil
}

// apply counts the documents a committed write added and removed. A set
// not loaded yet is left so. Call it under the full-text write lock, with
// the commit.
func (s *docSet) apply(added, removed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		return
	}
	for _, id := range removed {
		if k, ok := docKey(id); ok {
			if s.n[k]--; s.n[k] <= 0 {
				delete(s.n, k)
			}
		}
	}
	for _, id := range added {
		if k, ok := docKey(id); ok {
			s.n[k]++
		}
	}
}

// docSetMinBatch is the fewest ids for which candidates loads the set: a
// few ids are cheaper to look up by key than every doc id to read (a CLI
// ingest of one file would otherwise read them all).
var docSetMinBatch = 64

// docSetLoadAfter is how many lookups of more than docSetMinBatch ids a
// generation answers by a semi-join before it loads the set (docSet).
// A batch makes one (prepareBatch), and a second under the writer lock
// only when another writer held it meanwhile (unchangedSince), so 8 is
// about 8 batches: at 1M documents about 0.3-0.8 s of semi-joins against
// a load of about 0.4 s; a one-batch write pays one. A variable for
// tests.
var docSetLoadAfter = 8

// candidates returns those of ids that the generation may hold, in order;
// the others it does not hold.
func (ix *state) candidates(ctx context.Context, ids []string) ([]string, error) {
	if ix.fts == nil {
		return ids, nil // a bare state over a file (rowRecords): no doc set, read them all
	}
	if held, ok := ix.hitDocs.held(ids); ok {
		// A process that has searched holds every document's row in
		// memory (hitDocs): no semi-join (35-100 ms at 1M, before a
		// batch's derivation), no key lookups, no set to load.
		return held, nil
	}
	s := &ix.docs
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded && len(ids) <= docSetMinBatch {
		return ids, nil
	}
	if !loaded {
		s.mu.Lock()
		rent := !s.loaded && s.queried < docSetLoadAfter
		if rent {
			s.queried++
		}
		s.mu.Unlock()
		if rent {
			return ix.heldDocs(ctx, ids)
		}
		err := ix.fts.View(func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.loaded {
				return nil
			}
			return s.load(ctx, ix)
		})
		if err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if k, ok := docKey(id); !ok || s.n[k] > 0 {
			out = append(out, id)
		}
	}
	return out, nil
}

// heldDocs returns those of ids that the generation holds, in order,
// asking DuckDB (one semi-join that reads the doc_id column alone).
func (ix *state) heldDocs(ctx context.Context, ids []string) ([]string, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT doc_id FROM documents WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up doc ids: %w", err)
	}
	defer rows.Close()
	held := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("look up doc ids: %w", err)
		}
		held[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up doc ids: %w", err)
	}
	out := make([]string, 0, len(held))
	for _, id := range ids {
		if held[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// docSetChunkShift: load reads the keys of 2^docSetChunkShift rows (by
// rowid) in one string. A variable for tests.
var docSetChunkShift = 16

// load reads every doc id's key; call it with mu held, inside fts.View.
// The keys cross from DuckDB as a few long strings (the first 16 hex
// digits of each doc id of 32 ASCII bytes, concatenated, about 1 MB per
// 65,536 rows), not as a row per document: a row costs a cgo call and a
// string, about 1 µs, so 100,000 documents took 100 ms, a cost the first
// write of a process paid. A doc id of another shape has no key (docKey):
// the set says "maybe" for it whether or not it is read.
func (s *docSet) load(ctx context.Context, ix *state) error {
	rows, err := ix.db.QueryContext(ctx, `SELECT string_agg(left(doc_id, 16), '') FROM documents
		WHERE strlen(doc_id) = 32 AND length(doc_id) = 32 GROUP BY rowid >> `+strconv.Itoa(docSetChunkShift))
	if err != nil {
		return fmt.Errorf("load doc ids: %w", err)
	}
	defer rows.Close()
	// The chunks are read whole before the map is made at its size:
	// growing it key by key rehashed it about 20 times on the way to 1M
	// (0.4 s of the load).
	var chunks []string
	total := 0
	for rows.Next() {
		var keys string
		if err := rows.Scan(&keys); err != nil {
			return fmt.Errorf("load doc ids: %w", err)
		}
		if len(keys)%16 != 0 {
			return fmt.Errorf("load doc ids: %d bytes of keys, not a multiple of 16", len(keys))
		}
		chunks = append(chunks, keys)
		total += len(keys) / 16
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load doc ids: %w", err)
	}
	n := make(map[uint64]int32, total)
	for _, keys := range chunks {
		for i := 0; i < len(keys); i += 16 {
			if k, err := strconv.ParseUint(keys[i:i+16], 16, 64); err == nil {
				n[k]++
			}
		}
	}
	s.n, s.loaded = n, true
	return nil
}
