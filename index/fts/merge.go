package fts

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/escurel/escurel/internal/duck"
)

// Merge policy. Segments are grouped in tiers by size: tier i holds
// segments of 10^i to 10^(i+1)−1 blocks. When a tier holds MergeFactor
// segments they merge into one (which usually lands in the next tier), so
// a posting is rewritten about log10(blocks) times in its life and a query
// reads at most about MergeFactor posting lists per tier and term. Segments
// of MaxMergeBlocks blocks or more merge only in a compaction.
const (
	MergeFactor    = 10
	MaxMergeBlocks = 200_000
)

// DefaultDeadRatio is the share of dead blocks (tombstones over all blocks
// in segments) past which Maintain compacts.
const DefaultDeadRatio = 0.2

// flushBytes and flushRows bound the merged posting lists a merge holds
// before appending them: their encoded bytes (in one buffer, reused) and
// their count (each row costs 24 bytes more; a segment of short lists
// holds millions). The slice is held twice: in the Go heap, and once
// appended, in the appender's chunks in DuckDB's C heap (outside its
// memory_limit) until the appender closes at the end of the slice. At 8
// MiB a build's merges of ten 1,000-block segments held their whole
// result both ways (about 5 MB), and the last merge of a 100k build
// (ten 10,000-block segments) 8 MiB both ways while DuckDB's pool was
// full. 1 MiB, together with the automatic memory_limit's 4 MiB step
// (index/memory.go), lowered bench-fts' peak build RSS at 100k passages
// by about 30 MB (ARCHITECTURE.md; the two were not measured apart
// beyond noise), with an appender per MiB merged (a few dozen for that
// merge) costing nothing measurable. Variables for tests.
var (
	flushBytes = 1 << 20
	flushRows  = 1 << 13
)

// mergeChunkBytes bounds the stored posting data one query of a merge
// reads: DuckDB sorts what it reads by term, and a sort of whole segments
// (hundreds of MB at 1M blocks) needs more than a small memory_limit
// allows ("Out of Memory Error: failed to pin block"). A merge of more
// reads its terms in ranges of about this much (one term's lists may
// exceed it alone). A variable for tests.
var mergeChunkBytes int64 = 16 << 20

// Maintain merges segments after a write, as the merge policy says, and
// compacts when dead blocks exceed deadRatio (0 means DefaultDeadRatio).
// Each merge is one transaction: a crash leaves either the old segments or
// the merged one. Call it with the writer's exclusive right to write.
func (ix *Index) Maintain(ctx context.Context, db *sql.DB, deadRatio float64) error {
	if deadRatio == 0 {
		deadRatio = DefaultDeadRatio
	}
	for {
		ix.mu.RLock()
		total := ix.live + ix.tombstones
		dead := total > 0 && float64(ix.tombstones)/float64(total) > deadRatio
		pick := ix.pickMerge()
		ix.mu.RUnlock()
		if dead {
			return ix.Compact(ctx, db)
		}
		if pick == nil {
			return nil
		}
		if err := ix.merge(ctx, db, pick, false); err != nil {
			return err
		}
	}
}

// pickMerge returns the MergeFactor oldest segments of the lowest tier that
// holds that many, or nil.
func (ix *Index) pickMerge() []segment {
	tiers := map[int][]segment{}
	for _, s := range ix.segments {
		if s.blocks >= MaxMergeBlocks {
			continue
		}
		t := int(math.Log10(float64(max(s.blocks, 1))))
		tiers[t] = append(tiers[t], s)
	}
	for t := 0; t < 10; t++ {
		if len(tiers[t]) >= MergeFactor {
			return tiers[t][:MergeFactor] // ix.segments is in id order: oldest first
		}
	}
	return nil
}

// Compact merges every segment into one, dropping the postings and field
// lengths of dead blocks, the tombstones, the document-frequency deltas and
// the terms no live block holds. Results do not change: scores already
// count live blocks only. It is one transaction.
func (ix *Index) Compact(ctx context.Context, db *sql.DB) error {
	ix.mu.RLock()
	segs := append([]segment(nil), ix.segments...)
	ix.mu.RUnlock()
	return ix.merge(ctx, db, segs, true)
}

// CompactAll is Compact even when the index is one segment without
// tombstones: it also drops the postings of blocks that have no
// fts_blocks row (neither live nor tombstoned), which a reindex then
// adds again (Compact skips a lone clean segment, and they would be
// posted twice).
func (ix *Index) CompactAll(ctx context.Context, db *sql.DB) error {
	ix.mu.RLock()
	segs := append([]segment(nil), ix.segments...)
	ix.mu.RUnlock()
	return ix.mergeSegs(ctx, db, segs, true, true)
}

// merge rewrites segs as one new segment in one transaction; with compact,
// as a compaction.
func (ix *Index) merge(ctx context.Context, db *sql.DB, segs []segment, compact bool) error {
	return ix.mergeSegs(ctx, db, segs, compact, false)
}

// mergeSegs is merge; with force, a compaction rewrites a lone segment
// without tombstones too.
func (ix *Index) mergeSegs(ctx context.Context, db *sql.DB, segs []segment, compact, force bool) error {
	ix.mu.RLock()
	nothing := len(segs) == 0 || (len(segs) == 1 && (!compact || (ix.tombstones == 0 && !force)))
	newID, terms := ix.nextSeg, ix.nextTerm
	ix.mu.RUnlock()
	if nothing {
		return nil
	}
	tx, err := duck.Begin(ctx, db)
	if err != nil {
		return fmt.Errorf("fts merge: %w", err)
	}
	defer tx.Rollback()

	ids := make([]string, len(segs))
	ch := &Change{dropSegments: map[int32]bool{}, compacted: compact}
	seg := &segment{id: newID, min: math.MaxInt64, max: -1}
	var stored int64
	lo, hi := int64(math.MaxInt64), int64(-1) // the merged segments' block range
	for i, s := range segs {
		ids[i] = strconv.Itoa(int(s.id))
		ch.dropSegments[s.id] = true
		stored += s.bytes
		lo, hi = min(lo, s.min), max(hi, s.max)
	}
	inSegs := strings.Join(ids, ",")
	if hi >= lo && (lo < 0 || hi-lo >= maxMergeSpan) {
		// The bitset below takes (hi-lo)/8 bytes: a damaged segment row
		// must fail the merge, not exhaust the memory.
		return fmt.Errorf("fts merge: segments %s span block ids %d to %d (at most %d ids): %w", inSegs, lo, hi, int64(maxMergeSpan), errCorrupt)
	}
	ranges := [][2]int32{{0, math.MaxInt32}}
	if stored > mergeChunkBytes {
		if ranges, err = termRanges(ctx, db, inSegs, terms, mergeChunkBytes); err != nil {
			return fmt.Errorf("fts merge: %w", err)
		}
	}

	// Stream the old lists in term order over a second connection (the
	// writer lock keeps them unchanged; the new rows appended on tx stay
	// invisible to it), merge each term's lists, and append the merged rows
	// in slices of about flushBytes (or flushRows), so memory holds one
	// term's postings and one slice. A slice's lists are encoded one after
	// another into buf, each row keeping where its list ends.
	type row struct {
		term int32
		d    df
		end  int // its list is buf[previous row's end:end]
	}
	var out []row
	var buf []byte
	appendOut := func() error {
		if len(out) == 0 {
			return nil
		}
		err := duck.Append(ctx, tx.Conn, "fts_postings", []string{"term_id", "segment_id", "df", "df_body", "df_context", "data"},
			func(add func(...driver.Value) error) error {
				start := 0
				for _, r := range out {
					if err := add(r.term, newID, r.d[0], r.d[1], r.d[2], buf[start:r.end]); err != nil {
						return err
					}
					start = r.end
				}
				return nil
			})
		out, buf = out[:0], buf[:0]
		return err
	}
	var ps []Posting
	// The merged segment's blocks, a bit each from lo: its block count
	// (1M blocks: 125 KB).
	var blocks []uint64
	if hi >= lo {
		blocks = make([]uint64, (hi-lo)/64+1)
	}
	var cur int32 = -1
	flush := func() error {
		if cur < 0 || len(ps) == 0 {
			return nil
		}
		// In order unless a merged segment's blocks precede an older
		// segment's (rows come in segment id order).
		byBlock := func(a, b Posting) int { return cmp.Compare(a.Block, b.Block) }
		if !slices.IsSortedFunc(ps, byBlock) {
			slices.SortFunc(ps, byBlock)
		}
		r := row{term: cur, d: listDF(ps)}
		for _, p := range ps {
			if p.Block < lo || p.Block > hi {
				return fmt.Errorf("term %d: block %d outside its segments' range %d-%d", cur, p.Block, lo, hi)
			}
			blocks[(p.Block-lo)/64] |= 1 << ((p.Block - lo) % 64)
			seg.min, seg.max = min(seg.min, p.Block), max(seg.max, p.Block)
		}
		start := len(buf)
		buf = encode(buf, ps)
		r.end = len(buf)
		seg.bytes += int64(r.end - start)
		out = append(out, r)
		if len(buf) >= flushBytes || len(out) >= flushRows {
			return appendOut()
		}
		return nil
	}
	// Scanned into once allocated, not once a row (Scan's pointers
	// escape).
	var (
		id   int32
		data sql.RawBytes // decoded below, before the next row
	)
	read := func(r *sql.Rows) error {
		if err := r.Scan(&id, &data); err != nil {
			return err
		}
		if id != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, ps = id, ps[:0]
		}
		n := len(ps)
		var err error
		if ps, err = decodeAll(ps, data); err != nil {
			return fmt.Errorf("term %d: %w", id, err)
		}
		if compact {
			ix.mu.RLock()
			kept := ps[:n]
			for _, p := range ps[n:] {
				if p.Block < int64(len(ix.blocks)) && ix.blocks[p.Block].state == live {
					kept = append(kept, p)
				}
			}
			ix.mu.RUnlock()
			ps = kept
		}
		return nil
	}
	for _, tr := range ranges {
		err = scan(ctx, db, fmt.Sprintf(`SELECT term_id, data FROM fts_postings
			WHERE segment_id IN (%s) AND term_id BETWEEN %d AND %d ORDER BY term_id, segment_id`, inSegs, tr[0], tr[1]), read)
		if err != nil {
			break
		}
	}
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = appendOut()
	}
	if err != nil {
		return fmt.Errorf("fts merge: %w", err)
	}
	n := 0
	for _, w := range blocks {
		n += bits.OnesCount64(w)
	}
	seg.blocks = int32(n)
	stmts := []string{
		`DELETE FROM fts_postings WHERE segment_id IN (` + inSegs + `)`,
		`DELETE FROM fts_segments WHERE segment_id IN (` + inSegs + `)`,
	}
	var deadIDs []int64 // the tombstoned blocks: fts_removals holds them encoded
	if compact {
		stmts = append(stmts,
			`DELETE FROM fts_blocks WHERE block_id IN (SELECT unnest(?::BIGINT[]))`,
			`DELETE FROM fts_tombstones`,
			`DELETE FROM fts_df_deltas`,
			`DELETE FROM fts_removals`,
			`DELETE FROM fts_terms WHERE term_id NOT IN (SELECT DISTINCT term_id FROM fts_postings)`)
		ix.mu.RLock()
		for id := range ix.df {
			if ix.df[id][0] <= 0 {
				ch.dropTerms = append(ch.dropTerms, int32(id))
			}
		}
		for id, b := range ix.blocks {
			if b.state == dead {
				deadIDs = append(deadIDs, int64(id))
			}
		}
		ix.mu.RUnlock()
	}
	for _, q := range stmts {
		var args []any
		if strings.Contains(q, "?") {
			args = append(args, deadIDs)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("fts merge: %w", err)
		}
	}
	if n > 0 {
		if err := insertSegment(ctx, tx, seg); err != nil {
			return err
		}
		ch.segment = seg
	}
	return ix.Commit(ctx, tx, ch)
}

// maxMergeSpan bounds the block ids a merge's segments span (2^33, a
// bitset of 1 GiB): block ids come from one sequence, so a wider span is a
// damaged fts_segments row.
const maxMergeSpan = 1 << 33

// termRanges splits the term ids (below terms) of the posting lists of
// segments inSegs (a list of ids for IN) into ranges, inclusive, of about
// chunk bytes of stored lists each, in ascending order: it reads each
// list's term id and size, not its data, and holds 4 bytes per term.
func termRanges(ctx context.Context, q Querier, inSegs string, terms int32, chunk int64) ([][2]int32, error) {
	sizes := make([]uint32, terms) // by term id, saturating
	err := scan(ctx, q, `SELECT term_id, octet_length(data) FROM fts_postings WHERE segment_id IN (`+inSegs+`)`,
		func(r *sql.Rows) error {
			var id int32
			var n int64
			if err := r.Scan(&id, &n); err != nil {
				return err
			}
			if id < 0 || id >= terms {
				return fmt.Errorf("posting list of term id %d, not in the dictionary (%d terms)", id, terms)
			}
			sizes[id] = uint32(min(int64(sizes[id])+n, math.MaxUint32))
			return nil
		})
	if err != nil {
		return nil, err
	}
	var out [][2]int32
	start, acc := 0, int64(0)
	for id, size := range sizes {
		n := int64(size)
		if acc > 0 && acc+n > chunk {
			out = append(out, [2]int32{int32(start), int32(id - 1)})
			start, acc = id, 0
		}
		acc += n
	}
	return append(out, [2]int32{int32(start), math.MaxInt32}), nil
}
