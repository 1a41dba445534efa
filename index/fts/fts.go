// Package fts is escurel's full-text index: BM25F over the two fields of a
// block (body and context), kept in plain DuckDB tables, updated in the same
// transaction as the blocks (so it is never stale), and scored in Go.
//
// Layout (sql/0005_fts.sql):
//
//	fts_terms      term_id, term                  the dictionary, append-only
//	fts_blocks     block_id, len_body, len_context, level
//	fts_segments   segment_id, blocks, min_block, max_block, bytes
//	fts_postings   term_id, segment_id, df, df_body, df_context, data
//	fts_removals   data: one removal, its blocks (deleted, still in posting
//	               lists) and its document-frequency changes (removal.go)
//	fts_tombstones block_id, and fts_df_deltas term_id, df, df_body,
//	               df_context: removals as files before schema 16 wrote them
//
// A write adds a segment: one fts_postings row per term of the batch, whose
// data BLOB is the term's posting list in that segment (codec.go), and whose
// df columns count the postings. A delete adds one fts_removals row, its
// tombstones and negative df deltas, so document frequencies, the block
// count and the average field lengths always describe the live blocks:
// scores do not change when a compaction drops the dead postings. Segments merge in tiers as they
// accumulate (merge.go).
//
// Statistics per sensitivity level: a query scores with the statistics of
// the blocks its caller may see (Query.MaxLevel), never of the others, so
// a score says nothing about blocks above the caller's clearance. The live
// block count and the field lengths are kept per level in memory; where
// blocks above the caller's level exist, a query term's document frequency
// is counted from its posting lists as they are read (no schema change:
// fts_blocks already holds every block's level).
//
// The dictionary, document frequencies, field lengths, tombstones and
// segment list are loaded into memory by Load; a query reads from DuckDB
// only its terms' posting lists (an index on term_id; the ids are written
// into the statement as constants, which keeps the index in use).
//
// Concurrency: an Index is safe for concurrent use. Searches run under a
// read lock (View); a writer's Commit takes the write lock for the commit
// and the in-memory update together, so a search sees a write whole or not
// at all. Writers must be serialized by the caller.
package fts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// Fields of a block.
const (
	Body      = 0
	Context   = 1
	NumFields = 2
)

// Block is one block to index or remove: its id, the sensitivity level of
// its document (0 lowest) and the analyzed terms of each field, repeats
// kept.
type Block struct {
	ID    int64
	Level uint8
	Terms [NumFields][]string
}

// Block states in memory.
const (
	absent = iota
	live
	dead // tombstoned: still in posting lists until a compaction
)

type blockInfo struct {
	len   [NumFields]uint32
	level uint8
	state uint8
}

type segment struct {
	id       int32
	blocks   int32
	min, max int64 // block id range
	bytes    int64 // posting bytes
}

// numLevels bounds Block.Level: every uint8 has its own statistics.
const numLevels = 256

// df holds document frequencies: blocks containing the term in any field,
// in the body, in the context.
type df [3]int32

// Index is the in-memory part of the full-text index.
type Index struct {
	mu sync.RWMutex

	ids    *dict       // term → id
	df     []df        // by term id; live blocks only
	blocks []blockInfo // by block id
	live   int         // live blocks
	// liveAt and sumAt are the live blocks and their total field lengths
	// per sensitivity level, so that a query scores with the statistics of
	// the blocks its caller may see (Query.MaxLevel) and nothing else.
	liveAt     [numLevels]int
	sumAt      [numLevels][NumFields]int64
	tombstones int
	segments   []segment // ascending id
	nextTerm   int32
	nextSeg    int32

	cache *cache
	// fromImage: Load read the image (image.go). uncertain: a commit
	// failed, and its transaction may have committed all the same, so the
	// tables may hold what memory does not; SaveImage then saves nothing.
	// Both under mu.
	fromImage, uncertain bool
	// imageCurrent: the image file LoadFrom read or SaveImage wrote
	// describes this index. Set with mu held (SaveImage's read lock, so
	// that searches go on), cleared by every commit under its write lock.
	imageCurrent atomic.Bool
	// invertHint is the distinct terms of the last batch Invert saw: the
	// size its next term map starts at.
	invertHint atomic.Int64
}

// Querier is what *sql.DB, *sql.Tx and *sql.Conn share for reading.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Load reads the dictionary, document frequencies, field lengths,
// tombstones and segments into memory from the tables, row by row.
func Load(ctx context.Context, q Querier) (*Index, error) {
	return LoadFrom(ctx, q, "")
}

// LoadFrom is Load, but reads the image in the file imagePath instead of
// the tables when it is current (image.go); "" reads the tables. An image
// that is stale is passed over; one that is current but cannot be read
// or decoded is logged (slog, Warn) and the tables read.
func LoadFrom(ctx context.Context, q Querier, imagePath string) (*Index, error) {
	if imagePath != "" {
		ix, err := loadImage(ctx, q, imagePath)
		switch {
		case err == nil && ix != nil:
			return ix, nil
		case err != nil && !errors.Is(err, errImage) && !errors.Is(err, errStale):
			return nil, fmt.Errorf("load fts image: %w", err)
		case errors.Is(err, errImage):
			slog.Warn("fts: the saved image of the full-text index is damaged; reading its tables instead (the next writer's Close saves it again)", "image", imagePath, "err", err)
		}
	}
	return loadTables(ctx, q)
}

// loadTables is Load from the tables, row by row.
func loadTables(ctx context.Context, q Querier) (*Index, error) {
	ix := &Index{ids: newDict(), cache: newCache(DefaultCacheBytes)}
	var terms, termBytes int64
	var maxTerm int32
	if err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(max(term_id), -1), coalesce(sum(strlen(term)), 0)::BIGINT FROM fts_terms`).Scan(&terms, &maxTerm, &termBytes); err != nil {
		return nil, fmt.Errorf("load fts dictionary: %w", err)
	}
	ix.ids.reserve(int(terms), int(termBytes), maxTerm)
	err := scan(ctx, q, `SELECT term_id, term FROM fts_terms`, func(r *sql.Rows) error {
		var id int32
		var t string
		if err := r.Scan(&id, &t); err != nil {
			return err
		}
		if id < 0 || t == "" || len(t) > maxTermLen {
			return fmt.Errorf("term id %d: %d bytes (want 1 to %d) or a negative id", id, len(t), maxTermLen)
		}
		if ix.ids.has(id) {
			return fmt.Errorf("term id %d: it names two terms", id)
		}
		if ix.ids.putNew(t, id) {
			return fmt.Errorf("term id %d: its term is in the dictionary twice", id)
		}
		ix.nextTerm = max(ix.nextTerm, id+1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load fts dictionary: %w", err)
	}
	ix.df = make([]df, ix.nextTerm, withRoom(int(ix.nextTerm)))
	for _, table := range []string{"fts_postings", "fts_df_deltas"} {
		err := scan(ctx, q, `SELECT term_id, sum(df)::INTEGER, sum(df_body)::INTEGER, sum(df_context)::INTEGER
			FROM `+table+` GROUP BY term_id`, func(r *sql.Rows) error {
			var id int32
			var d df
			if err := r.Scan(&id, &d[0], &d[1], &d[2]); err != nil {
				return err
			}
			if id < 0 || id >= ix.nextTerm {
				return fmt.Errorf("%s: term id %d not in the dictionary", table, id)
			}
			for i := range d {
				ix.df[id][i] += d[i]
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("load fts document frequencies: %w", err)
		}
	}
	var maxID int64
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(block_id), 0) FROM fts_blocks`).Scan(&maxID); err != nil {
		return nil, fmt.Errorf("load fts blocks: %w", err)
	}
	ix.blocks = make([]blockInfo, maxID+1, withRoom(int(maxID)+1))
	err = scan(ctx, q, `SELECT block_id, len_body, len_context, level FROM fts_blocks`, func(r *sql.Rows) error {
		var id int64
		var b blockInfo
		if err := r.Scan(&id, &b.len[Body], &b.len[Context], &b.level); err != nil {
			return err
		}
		if id < 0 || id > maxID {
			return fmt.Errorf("block id %d out of 0 to %d", id, maxID)
		}
		b.state = live
		ix.blocks[id] = b
		ix.count(b, 1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load fts blocks: %w", err)
	}
	// Tombstones: rows of fts_tombstones (written before schema 16) and
	// the blocks of each removal, whose frequency changes count too.
	err = scan(ctx, q, `SELECT block_id FROM fts_tombstones`, func(r *sql.Rows) error {
		var id int64
		if err := r.Scan(&id); err != nil {
			return err
		}
		ix.kill(id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load fts tombstones: %w", err)
	}
	removals := 0
	err = scan(ctx, q, `SELECT data FROM fts_removals`, func(r *sql.Rows) error {
		var data []byte
		if err := r.Scan(&data); err != nil {
			return err
		}
		removals++
		return decodeRemoval(data, func(id int64) error {
			ix.kill(id)
			return nil
		}, func(id int32, d df) error {
			if id >= ix.nextTerm {
				return fmt.Errorf("%w: term id %d not in the dictionary", errRemoval, id)
			}
			for i := range d {
				ix.df[id][i] += d[i]
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load fts removals (row %d): %w", removals, err)
	}
	err = scan(ctx, q, `SELECT segment_id, blocks, min_block, max_block, bytes FROM fts_segments ORDER BY segment_id`, func(r *sql.Rows) error {
		var s segment
		if err := r.Scan(&s.id, &s.blocks, &s.min, &s.max, &s.bytes); err != nil {
			return err
		}
		ix.segments = append(ix.segments, s)
		ix.nextSeg = s.id + 1
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load fts segments: %w", err)
	}
	return ix, nil
}

// kill marks a live block dead.
func (ix *Index) kill(id int64) {
	if id < 0 || id >= int64(len(ix.blocks)) || ix.blocks[id].state != live {
		return
	}
	b := &ix.blocks[id]
	b.state = dead
	ix.count(*b, -1)
	ix.tombstones++
}

// count adds a block to the live statistics (sign 1) or takes it out (−1).
func (ix *Index) count(b blockInfo, sign int) {
	ix.live += sign
	ix.liveAt[b.level] += sign
	for f := range NumFields {
		ix.sumAt[b.level][f] += int64(sign) * int64(b.len[f])
	}
}

// visible returns the live blocks of level maxLevel or lower and their
// average field lengths: the collection statistics a caller of that
// clearance scores with, equal to those of an index without the blocks
// above it.
func (ix *Index) visible(maxLevel uint8) (n int, avg [NumFields]float64) {
	var sum [NumFields]int64
	for l := 0; l <= int(maxLevel); l++ {
		n += ix.liveAt[l]
		for f := range NumFields {
			sum[f] += ix.sumAt[l][f]
		}
	}
	if n > 0 {
		for f := range avg {
			avg[f] = float64(sum[f]) / float64(n)
		}
	}
	return n, avg
}

func scan(ctx context.Context, q Querier, query string, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// View runs fn under the read lock: the in-memory index does not change
// while fn runs, and no write commits. Run a search and the reads that
// belong to it inside one View and one database transaction.
func (ix *Index) View(fn func() error) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return fn()
}

// Stats describes the full-text index.
type Stats struct {
	Terms      int   `json:"terms"`      // in the dictionary
	Blocks     int   `json:"blocks"`     // live
	Tombstones int   `json:"tombstones"` // dead blocks still in posting lists
	Segments   int   `json:"segments"`
	Bytes      int64 `json:"bytes"` // of posting lists
}

// Stats returns counts of the in-memory index.
func (ix *Index) Stats() Stats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	st := Stats{Terms: ix.ids.n, Blocks: ix.live, Tombstones: ix.tombstones, Segments: len(ix.segments)}
	for _, s := range ix.segments {
		st.Bytes += s.bytes
	}
	return st
}

// LiveSums returns the live blocks' count, the sum of their ids, and the
// sum of the squares of their ids modulo 32749 (a prime): what a caller
// compares with the same sums over the block ids it stores, to learn
// without a join whether the two sets are alike. The squares are what a
// linear term (or a multiplicative hash, nearly linear: review 16b L1)
// is not: swapping ids a, b for c, d with a+b = c+d changes them by
// 2(a−c)(a−d) before the modulo. Each square is below 2^30, so the sum
// cannot overflow below 2^33 blocks. Ids are non-negative.
func (ix *Index) LiveSums() (n, sum, mix int64) {
	const liveSumsPrime = 32749
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for id, b := range ix.blocks {
		if b.state == live {
			n++
			sum += int64(id)
			m := int64(id % liveSumsPrime)
			mix += m * m
		}
	}
	return n, sum, mix
}

// sortedTerms returns the keys of m, sorted.
func sortedTerms[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// ForEachPosting calls fn with every posting of a live block, term by term
// in the dictionary's order of term ids, reading the posting lists from q.
// Call it inside View. It is for verification (escurel verify), not for
// search: it reads every list. It reads them in ranges of term ids of
// about mergeChunkBytes of stored lists each (termRanges), as a merge
// does: DuckDB materializes and sorts a query's whole result, and one
// sorted read of every list (about 78 MB stored at 100k passages) is what
// a bounded memory_limit cannot hold (review 7 M2).
func (ix *Index) ForEachPosting(ctx context.Context, q Querier, fn func(term string, p Posting) error) error {
	names := make([]string, len(ix.df))
	ix.ids.each(func(t string, id int32) {
		if int(id) < len(names) {
			names[id] = t
		}
	})
	var stored int64
	for _, s := range ix.segments {
		stored += s.bytes
	}
	ranges := [][2]int32{{0, math.MaxInt32}}
	if stored > mergeChunkBytes {
		var err error
		if ranges, err = termRanges(ctx, q, `SELECT segment_id FROM fts_segments`, int32(len(names)), mergeChunkBytes); err != nil {
			return fmt.Errorf("fts: read postings: %w", err)
		}
	}
	ranges[0][0] = math.MinInt32 // a damaged negative id is read, and refused
	var ps []Posting
	for _, rg := range ranges {
		err := scan(ctx, q, fmt.Sprintf(`SELECT term_id, data FROM fts_postings WHERE term_id BETWEEN %d AND %d ORDER BY term_id, segment_id`, rg[0], rg[1]), func(r *sql.Rows) error {
			var id int32
			var data []byte
			if err := r.Scan(&id, &data); err != nil {
				return err
			}
			if id < 0 || int(id) >= len(names) {
				return fmt.Errorf("fts: posting list of unknown term id %d", id)
			}
			var err error
			if ps, err = decodeAll(ps[:0], data); err != nil {
				return fmt.Errorf("fts: term %q: %w", names[id], err)
			}
			for _, p := range ps {
				if p.Block < int64(len(ix.blocks)) && ix.blocks[p.Block].state == live {
					if err := fn(names[id], p); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
