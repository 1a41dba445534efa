package index

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// publicIDs maps a generation's internal block numbers to their public ids
// in memory, so that Rank answers without reading the blocks table. It is
// read by a state's hitDocsLoadAfter-th lookup (the ones before read
// their ids from the rows), or by Prewarm, from the snapshot of a search
// (inside fts.View, so no write commits meanwhile), and kept in step by
// every write's commit (fts CommitWith's then, under the same full-text
// write lock): a search sees the ids of exactly the blocks its ranking can
// name. A switch opens a new state and so a new map; a compaction
// renumbers nothing.
//
// An id is held as the uint64 its 16 hex digits spell; 0 means none (an id
// that is not 16 lowercase hex digits, or a block the map does not hold),
// and the caller then reads the row.
type publicIDs struct {
	mu     sync.RWMutex
	loaded bool
	ids    []uint64 // by internal block number
	// joined counts the lookups that read their ids from the rows while
	// the map was not loaded (hitDocsLoadAfter).
	joined uses
}

// parsePublicID returns the number a well-formed public id spells, and
// false for anything else (which the map does not hold).
func parsePublicID(s string) (uint64, bool) {
	if CheckBlockID(s) != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 64)
	return n, err == nil && n != 0
}

// formatPublicID is the inverse of parsePublicID.
func formatPublicID(n uint64) string {
	const digits = "0123456789abcdef"
	var b [BlockIDLen]byte
	for i := BlockIDLen - 1; i >= 0; i-- {
		b[i] = digits[n&0xf]
		n >>= 4
	}
	return string(b[:])
}

// set records the public id of internal block id; call with mu held for
// writing.
func (p *publicIDs) set(id int64, public string) {
	if id < 0 {
		return
	}
	n, ok := parsePublicID(public)
	if !ok {
		n = 0 // read from the row when asked
	}
	if id >= int64(len(p.ids)) {
		if n == 0 {
			return
		}
		grown := make([]uint64, max(id+1, int64(len(p.ids))*5/4+1024))
		copy(grown, p.ids)
		p.ids = grown
	}
	p.ids[id] = n
}

// apply adds the blocks of a committed write and forgets the removed ones.
// A map not loaded yet is left so: its first load reads the committed rows.
// Call it under the full-text write lock, with the commit.
func (p *publicIDs) apply(added []int64, public []string, removed []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded {
		return
	}
	for _, id := range removed {
		if id >= 0 && id < int64(len(p.ids)) {
			p.ids[id] = 0
		}
	}
	for i, id := range added {
		p.set(id, public[i])
	}
}

// lookup returns the public ids of the internal block numbers ids, in
// order, reading the blocks table from q (the search's snapshot) only for
// those the map does not hold. The map is loaded by a state's
// hitDocsLoadAfter-th lookup, as the hits' documents are: loading every id
// takes 0.5 s at 1M passages, where a one-shot Rank of 5 hits reads their
// rows in milliseconds. Call it inside fts.View. A number with no block
// row is an error.
func (p *publicIDs) lookup(ctx context.Context, q querier, ids []int64) ([]string, error) {
	if p.isLoaded() || p.joined.due() {
		if err := p.load(ctx, q); err != nil {
			return nil, err
		}
	}
	out := make([]string, len(ids))
	var missing []int64
	p.mu.RLock()
	for i, id := range ids {
		if id >= 0 && id < int64(len(p.ids)) && p.ids[id] != 0 {
			out[i] = formatPublicID(p.ids[id])
		} else {
			missing = append(missing, id)
		}
	}
	p.mu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT b.block_id, b.public_id FROM blocks b
		JOIN (SELECT unnest(?::BIGINT[]) AS id) r ON r.id = b.block_id`, missing)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	read := make(map[int64]string, len(missing))
	for rows.Next() {
		var id int64
		var pub string
		if err := rows.Scan(&id, &pub); err != nil {
			return nil, err
		}
		read[id] = pub
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, id := range ids {
		if out[i] != "" {
			continue
		}
		pub, ok := read[id]
		if !ok {
			return nil, fmt.Errorf("a ranked block has no block row")
		}
		out[i] = pub
	}
	return out, nil
}

// isLoaded reports whether the map has been read.
func (p *publicIDs) isLoaded() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.loaded
}

// load reads every block's public id from q once: inside fts.View, or
// before the state is live (a switch warming it).
func (p *publicIDs) load(ctx context.Context, q querier) error {
	if p.isLoaded() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loaded {
		return nil
	}
	var maxID int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(block_id), 0) FROM blocks`).Scan(&maxID); err != nil {
		return fmt.Errorf("load block ids: %w", err)
	}
	// Built aside, kept only whole: a load that fails leaves no part of
	// a map behind.
	built := &publicIDs{ids: make([]uint64, maxID+1)}
	rows, err := q.QueryContext(ctx, `SELECT block_id, public_id FROM blocks`)
	if err != nil {
		return fmt.Errorf("load block ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var pub string
		if err := rows.Scan(&id, &pub); err != nil {
			return fmt.Errorf("load block ids: %w", err)
		}
		built.set(id, pub)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load block ids: %w", err)
	}
	p.ids, p.loaded = built.ids, true
	return nil
}
