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
// It is read by the first batch of more than docSetMinBatch documents
// (smaller ones look their ids up by key), under fts.View (no commit meanwhile, so the rows
// read are those the in-memory indexes describe) and kept in step by every
// write's commit, under the full-text write lock, as publicIDs is.
type docSet struct {
	mu     sync.Mutex
	loaded bool
	n      map[uint64]int32 // doc id prefix → documents with it
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

// candidates returns those of ids that the generation may hold, in order;
// the others it does not hold.
func (ix *state) candidates(ctx context.Context, ids []string) ([]string, error) {
	if ix.fts == nil {
		return ids, nil // a bare state over a file (rowRecords): no doc set, read them all
	}
	s := &ix.docs
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded && len(ids) <= docSetMinBatch {
		return ids, nil
	}
	if !loaded {
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

// load reads every doc id; call it with mu held, inside fts.View.
func (s *docSet) load(ctx context.Context, ix *state) error {
	n := map[uint64]int32{}
	rows, err := ix.db.QueryContext(ctx, `SELECT doc_id FROM documents`)
	if err != nil {
		return fmt.Errorf("load doc ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("load doc ids: %w", err)
		}
		if k, ok := docKey(id); ok {
			n[k]++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load doc ids: %w", err)
	}
	s.n, s.loaded = n, true
	return nil
}
