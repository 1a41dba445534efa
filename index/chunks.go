package index

// Reading every row of a table in doc-id order in bounded memory.

import (
	"context"
	"fmt"
	"strings"
)

// readChunkBytes, when above 0, fixes the chunk of a ranged read (tests);
// 0 (the default) sizes it from the pool (state.readChunk).
var readChunkBytes int64

// Export's reads in doc-id order run as several queries, each over a
// range of doc ids holding about a chunk of what it reads (idRanges);
// verify and ForEachBlock read each table once instead (eachInDocOrder,
// spillInDocOrder: docorder.go). duckdb-go materializes a query's whole result
// before its first row is read, and DuckDB's sort of a large payload does
// not spill far enough: sorting the blocks of 100k passages by (doc_id,
// ord), 122 MiB of text, failed at a memory_limit of 128 and 144 MiB
// ("failed to pin block"), with the ART indexes not even loaded. A chunk
// is a quarter of the pool the ART indexes leave (under an automatic
// limit a quarter of its headroom, less the indexes' estimate rounding:
// about 22 MiB from 300k passages, 16 at 100k, where the headroom is
// smaller: memoryHeadroom), at least minReadChunk; under a fixed limit of DuckDB's own
// notation, the same share of it. Each query scans the whole table (doc
// ids are hashes, so no zone map prunes a range: about 0.6 s for the
// blocks at 100k passages), so the number of scans grows with the data
// and each scan too: at 1M passages verify's blocks pass made 57 of them
// (216 s), before eachInDocOrder.
const (
	readChunkShare = 4
	minReadChunk   = 256 << 10
)

// readChunk is the chunk of a ranged read on s now: readChunkBytes if
// set, else a readChunkShare-th of the memory_limit less the ART indexes
// as stored (artBytes), at least minReadChunk.
func (s *state) readChunk(ctx context.Context) int64 {
	if readChunkBytes > 0 {
		return readChunkBytes
	}
	limit := s.memLimit.Load()
	art, err := s.artBytes(ctx, true)
	if err != nil {
		art = 0 // the chunk is a bound on memory, not a correctness matter; the read's own errors say more
	}
	return max(minReadChunk, (limit-art)/readChunkShare)
}

// maxIDRanges bounds the ranges of one read: 65,536 (each query a scan).
const maxIDRanges = 1 << 16

// idRange is a range of doc ids, lo ≤ doc_id < hi; lo "" has no lower
// bound and hi "" no upper one. idRanges' ranges partition every string
// in order, so rows read range after range, each range sorted, come in
// the order of the whole table sorted.
type idRange struct{ lo, hi string }

// where is the condition that col (a doc id column, trusted SQL) lies in
// r, and its arguments: "TRUE" for the whole key space.
func (r idRange) where(col string) (string, []any) {
	switch {
	case r.lo == "" && r.hi == "":
		return "TRUE", nil
	case r.lo == "":
		return col + " < ?", []any{r.hi}
	case r.hi == "":
		return col + " >= ?", []any{r.lo}
	}
	return col + " >= ? AND " + col + " < ?", []any{r.lo, r.hi}
}

// idRanges splits the doc-id key space into ranges that each hold about
// chunk bytes of what sizeQuery (one row, one BIGINT: the bytes the
// read returns; trusted SQL) counts in the whole table. Doc ids are 32
// hex digits of a hash (blobstore.DocID), evenly spread, so the ranges
// are equal slices of the first 8 digits' space; any other id still falls
// in exactly one range. Errors: sizeQuery's.
func idRanges(ctx context.Context, q querier, sizeQuery string, chunk int64) ([]idRange, error) {
	var size int64
	if err := q.QueryRowContext(ctx, sizeQuery).Scan(&size); err != nil {
		return nil, fmt.Errorf("size: %w", err)
	}
	n := int64(1)
	if chunk > 0 && size > chunk {
		n = min((size+chunk-1)/chunk, maxIDRanges)
	}
	rs := make([]idRange, n)
	for i := range rs {
		if i > 0 {
			rs[i].lo = fmt.Sprintf("%08x", uint64(i)<<32/uint64(n))
			rs[i-1].hi = rs[i].lo
		}
	}
	return rs, nil
}

// eachInRanges runs query, in which each %[1]s is where's condition (on
// col) for a range, over each of ranges in turn, and calls fn with each
// row; args come before the range's (once for each condition). Errors: a
// query's, a scan's, fn's.
func eachInRanges(ctx context.Context, q querier, ranges []idRange, query, col string, args []any, fn func(scan func(...any) error) error) error {
	for _, r := range ranges {
		cond, rargs := r.where(col)
		all := args[:len(args):len(args)]
		for range strings.Count(query, "%[1]s") {
			all = append(all, rargs...)
		}
		rows, err := q.QueryContext(ctx, withCondition(query, cond), all...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := fn(rows.Scan); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// withCondition is query with each %[1]s replaced by cond. Not
// fmt.Sprintf: the query may hold other percent signs, as an embedding
// set's name does ("query%3A+", review 7 M1), which Sprintf would read as
// verbs.
func withCondition(query, cond string) string {
	return strings.ReplaceAll(query, "%[1]s", cond)
}
