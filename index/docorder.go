package index

// Reading every row of a table in (doc id, ord) order in one scan: an
// external distribution sort in Go.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/escurel/escurel/internal/layout"
)

// docOrderRead is one read of eachInDocOrder.
type docOrderRead struct {
	// table is the table whose rows the read follows, one per row
	// (trusted SQL); rowid the expression of its rowid in query, e.g.
	// "b.rowid".
	table, rowid string
	// size is a query of one row, one BIGINT: about the bytes query
	// returns for the whole table (trusted SQL), as idRanges takes it.
	size string
	// query selects the rows; each %[1]s is the condition on rowid that
	// bounds a chunk, and query has no ORDER BY. Args come before the
	// condition's (once for each condition).
	query string
	args  []any
	// docCol is the column of query holding the doc id (VARCHAR), ordCol
	// the one holding the position within the document (an integer), or
	// -1 where the doc id is a key. The rows come in their order.
	docCol, ordCol int
	// doc is the doc id's expression in query, e.g. "b.doc_id": the
	// column docOrderRanged's ranges bound.
	doc string
	// skip, when not nil, reports the doc ids whose rows are not spilled
	// (spillInDocOrder): ForEachBlock's blocks of documents above the
	// caller's clearance never reach the disk.
	skip func(doc string) bool
}

// docSpilled, when set (tests), is called by spillInDocOrder with the
// table and doc id of each row it spills.
var docSpilled func(table, doc string)

// maxDocOrderBuckets bounds the spill files of one read: each is an open
// file with its own write buffer (docOrderBuffer) until the read ends.
const (
	maxDocOrderBuckets = 1024
	docOrderBuffer     = 32 << 10
)

// docOrderRanged, when set (tests), makes eachInDocOrder read as it did
// before it sorted: over ranges of doc ids (idRanges, eachInRanges), each
// range's rows sorted by DuckDB; so tests compare the two orders.
var docOrderRanged bool

// docOrderSorted, when set (tests), is called by eachInDocOrder with the
// number of buckets of each read.
var docOrderSorted func(buckets int)

// eachInDocOrder calls fn with each row of r.query (all its columns) in
// the order of (doc id, position), the order of "ORDER BY doc_id, ord"
// over the whole table, reading the table once,
// in chunks of its rowids (which DuckDB's scan prunes: rows lie in the
// order they were written, not by doc id, so a range of doc ids, as
// eachInRanges reads, is a scan of the whole table each time). The rows go
// to buckets by doc id (idRanges' split, each about chunk bytes of what
// r.size counts), spilled to files in a private directory made in dir
// (0700, removed before it returns) when there is more than one bucket;
// then each bucket is read back, sorted and passed to fn. So the memory
// held is about a chunk (DuckDB's for one query, Go's for one bucket) and
// the time is linear in the table. A process killed meanwhile leaves the
// directory (layout.SpillPrefix) behind, until the next layout.Lock of
// the index directory removes it. Rows with the same doc id and position
// come in the order of their rowids. The values fn scans are what a scan
// of *any gave: string, int64 (any integer), float64, bool, []byte,
// time.Time or nil; scan fills *string, *int64, *int32, *int, **int64,
// *time.Time, *[]byte, *sql.RawBytes and *any from them, and returns an
// error for another destination or a value it cannot hold. Errors: a
// query's, a scan's, a spill file's, fn's (as fn returned it).
func eachInDocOrder(ctx context.Context, q querier, dir string, chunk int64, r docOrderRead, fn func(scan func(...any) error) error) error {
	if docOrderRanged {
		ranges, err := idRanges(ctx, q, r.size, chunk)
		if err != nil {
			return err
		}
		order := fmt.Sprintf(" ORDER BY %d", r.docCol+1)
		if r.ordCol >= 0 {
			order += fmt.Sprintf(", %d", r.ordCol+1)
		}
		return eachInRanges(ctx, q, ranges, r.query+order, r.doc, r.args, fn)
	}
	sp, err := spillInDocOrder(ctx, q, dir, chunk, r)
	if err != nil {
		return err
	}
	defer sp.remove()
	return sp.each(func(payload []byte) error {
		return fn(func(dest ...any) error { return scanRow(payload, dest) })
	})
}

// docSpill is the buckets of eachInDocOrder. With one bucket the rows stay
// in memory (mem); with more, bucket i is the file files[i] in the private
// directory dir, written through bufs[i]. Every bucket's entries are
// uvarint(len doc), doc, varint(ord), uvarint(len payload), payload. The
// buckets split the doc ids as idRanges does for as many ranges: bucket i
// holds the doc ids d with lo(i) ≤ d < lo(i+1), so the buckets in order,
// each sorted, are the whole sorted.
type docSpill struct {
	n     int
	los   []string // los[i-1] is bucket i's lower bound, for i ≥ 1
	mem   []byte
	dir   string
	files []*os.File
	bufs  []*bufio.Writer
	entry []byte
}

func newDocSpill(dir string, n int) (*docSpill, error) {
	sp := &docSpill{n: n}
	for i := 1; i < n; i++ {
		sp.los = append(sp.los, fmt.Sprintf("%08x", uint64(i)<<32/uint64(n)))
	}
	if n == 1 {
		return sp, nil
	}
	var err error
	if sp.dir, err = os.MkdirTemp(dir, layout.SpillPrefix); err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	for i := range n {
		f, err := os.OpenFile(filepath.Join(sp.dir, fmt.Sprintf("%04d", i)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			sp.remove()
			return nil, fmt.Errorf("spill: %w", err)
		}
		sp.files = append(sp.files, f)
		sp.bufs = append(sp.bufs, bufio.NewWriterSize(f, docOrderBuffer))
	}
	return sp, nil
}

// remove closes and removes the spill files; it may run more than once.
func (sp *docSpill) remove() {
	for _, f := range sp.files {
		f.Close()
	}
	sp.files, sp.bufs = nil, nil
	if sp.dir != "" {
		os.RemoveAll(sp.dir)
		sp.dir = ""
	}
}

func (sp *docSpill) add(doc string, ord int64, payload []byte) error {
	e := binary.AppendUvarint(sp.entry[:0], uint64(len(doc)))
	e = append(e, doc...)
	e = binary.AppendVarint(e, ord)
	e = binary.AppendUvarint(e, uint64(len(payload)))
	e = append(e, payload...)
	sp.entry = e
	if sp.n == 1 {
		sp.mem = append(sp.mem, e...)
		return nil
	}
	// The bucket: how many lower bounds doc reaches.
	i, _ := slices.BinarySearch(sp.los, doc)
	if i < len(sp.los) && sp.los[i] == doc {
		i++
	}
	if _, err := sp.bufs[i].Write(e); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return nil
}

// spillEntry is one row of a bucket read back: slices of its bytes.
type spillEntry struct {
	doc     []byte
	ord     int64
	payload []byte
}

// each calls fn with each payload, bucket after bucket, each bucket's rows
// sorted by (doc, ord), stable.
func (sp *docSpill) each(fn func(payload []byte) error) error {
	var entries []spillEntry
	for i := range sp.n {
		b := sp.mem
		if sp.n > 1 {
			if err := sp.bufs[i].Flush(); err != nil {
				return fmt.Errorf("spill: %w", err)
			}
			f := sp.files[i]
			st, err := f.Stat()
			if err != nil {
				return fmt.Errorf("spill: %w", err)
			}
			b = make([]byte, st.Size())
			if _, err := f.ReadAt(b, 0); err != nil {
				return fmt.Errorf("spill: %w", err)
			}
			// Each bucket's file is read once: give its disk space back.
			f.Close()
			os.Remove(f.Name())
		}
		entries = entries[:0]
		for len(b) > 0 {
			var e spillEntry
			var ok bool
			if e.doc, b, ok = spillBytes(b); !ok {
				return errSpillDamaged
			}
			v, k := binary.Varint(b)
			if k <= 0 {
				return errSpillDamaged
			}
			e.ord, b = v, b[k:]
			if e.payload, b, ok = spillBytes(b); !ok {
				return errSpillDamaged
			}
			entries = append(entries, e)
		}
		slices.SortStableFunc(entries, func(x, y spillEntry) int {
			if c := bytes.Compare(x.doc, y.doc); c != 0 {
				return c
			}
			switch {
			case x.ord < y.ord:
				return -1
			case x.ord > y.ord:
				return 1
			}
			return 0
		})
		for _, e := range entries {
			if err := fn(e.payload); err != nil {
				return err
			}
		}
		sp.mem = nil
	}
	return nil
}

// all is each as an iterator of the payloads (for iter.Pull: merging two
// spills); *errp is each's error when the sequence ended on one (a spill
// file that does not read back), not when the caller stopped it.
func (sp *docSpill) all(errp *error) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		stop := errors.New("stop")
		if err := sp.each(func(p []byte) error {
			if !yield(p) {
				return stop
			}
			return nil
		}); err != nil && err != stop {
			*errp = err
		}
	}
}

var errSpillDamaged = errors.New("spill: a file does not read back as written")

// spillBytes splits a length-prefixed field off b.
func spillBytes(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// The tags of appendRow's values.
const (
	tagNil byte = iota
	tagString
	tagInt
	tagBytes
	tagTime
	tagFloat
	tagBool
)

// appendRow appends the values a scan of *any gave to b, each tagged with
// its kind. Errors: a value of another kind.
func appendRow(b []byte, vals []any) ([]byte, error) {
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			b = append(b, tagNil)
		case string:
			b = append(b, tagString)
			b = binary.AppendUvarint(b, uint64(len(x)))
			b = append(b, x...)
		case []byte:
			b = append(b, tagBytes)
			b = binary.AppendUvarint(b, uint64(len(x)))
			b = append(b, x...)
		case time.Time:
			t, err := x.MarshalBinary()
			if err != nil {
				return nil, err
			}
			b = append(b, tagTime)
			b = binary.AppendUvarint(b, uint64(len(t)))
			b = append(b, t...)
		case float64:
			b = append(b, tagFloat)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		case float32:
			b = append(b, tagFloat)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(x)))
		case bool:
			b = append(b, tagBool)
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		default:
			i, err := toInt64(v)
			if err != nil {
				return nil, err
			}
			b = append(b, tagInt)
			b = binary.AppendVarint(b, i)
		}
	}
	return b, nil
}

// toInt64 is v, an integer of any size, as an int64. Errors: another kind,
// or an unsigned value past int64.
func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d does not fit an int64", x)
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("a value of type %T, not an integer", v)
}

// scanRow decodes appendRow's values from b into dest, one each.
func scanRow(b []byte, dest []any) error {
	for i, d := range dest {
		if len(b) == 0 {
			return fmt.Errorf("scan: %d destinations, %d values", len(dest), i)
		}
		tag := b[0]
		b = b[1:]
		var v any
		switch tag {
		case tagNil:
		case tagString, tagBytes, tagTime:
			f, rest, ok := spillBytes(b)
			if !ok {
				return errSpillDamaged
			}
			b = rest
			switch tag {
			case tagString:
				v = string(f)
			case tagBytes:
				v = f
			default:
				var t time.Time
				if err := t.UnmarshalBinary(f); err != nil {
					return err
				}
				v = t
			}
		case tagInt:
			x, k := binary.Varint(b)
			if k <= 0 {
				return errSpillDamaged
			}
			v, b = x, b[k:]
		case tagFloat:
			if len(b) < 8 {
				return errSpillDamaged
			}
			v, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		case tagBool:
			if len(b) < 1 {
				return errSpillDamaged
			}
			v, b = b[0] == 1, b[1:]
		default:
			return errSpillDamaged
		}
		if err := assignValue(d, v); err != nil {
			return fmt.Errorf("scan column %d: %w", i, err)
		}
	}
	return nil
}

// assignValue stores v in the destination d, as database/sql's Scan would
// for the kinds eachInDocOrder passes on. A []byte is copied, so d owns
// it.
func assignValue(d, v any) error {
	switch p := d.(type) {
	case *any:
		if b, ok := v.([]byte); ok {
			v = slices.Clone(b)
		}
		*p = v
		return nil
	case *string:
		switch x := v.(type) {
		case string:
			*p = x
			return nil
		case []byte:
			*p = string(x)
			return nil
		}
	case *int64:
		if x, ok := v.(int64); ok {
			*p = x
			return nil
		}
	case *int32:
		if x, ok := v.(int64); ok && x >= math.MinInt32 && x <= math.MaxInt32 {
			*p = int32(x)
			return nil
		}
	case *int:
		if x, ok := v.(int64); ok && x >= math.MinInt && x <= math.MaxInt {
			*p = int(x)
			return nil
		}
	case **int64:
		switch x := v.(type) {
		case nil:
			*p = nil
			return nil
		case int64:
			*p = &x
			return nil
		}
	case *time.Time:
		if x, ok := v.(time.Time); ok {
			*p = x
			return nil
		}
	case *sql.RawBytes:
		if setBytes((*[]byte)(p), v) {
			return nil
		}
	case *[]byte:
		if setBytes(p, v) {
			return nil
		}
	default:
		return fmt.Errorf("destination %T not supported", d)
	}
	return fmt.Errorf("cannot store %T in %T", v, d)
}

// setBytes stores v (nil, []byte copied, or string) in *p and reports
// whether it could.
func setBytes(p *[]byte, v any) bool {
	switch x := v.(type) {
	case nil:
		*p = nil
	case []byte:
		*p = slices.Clone(x)
	case string:
		*p = []byte(x)
	default:
		return false
	}
	return true
}

// spillInDocOrder is eachInDocOrder's scan: the rows of r bucketed by doc
// id, ready for each (which sorts them). The caller removes the spill.
func spillInDocOrder(ctx context.Context, q querier, dir string, chunk int64, r docOrderRead) (*docSpill, error) {
	var size, count, end int64
	if err := q.QueryRowContext(ctx, r.size).Scan(&size); err != nil {
		return nil, fmt.Errorf("size: %w", err)
	}
	if err := q.QueryRowContext(ctx, `SELECT count(*)::BIGINT, coalesce(max(rowid) + 1, 0)::BIGINT FROM `+r.table).Scan(&count, &end); err != nil {
		return nil, fmt.Errorf("size: %w", err)
	}
	n := int64(1)
	if chunk > 0 && size > chunk {
		n = min((size+chunk-1)/chunk, maxDocOrderBuckets)
	}
	// Rows per query: about a chunk of what size counts.
	step := end
	if chunk > 0 && size > chunk && count > 0 {
		step = max(1, int64(float64(count)*float64(chunk)/float64(size)))
	}
	if docOrderSorted != nil {
		docOrderSorted(int(n))
	}
	sp, err := newDocSpill(dir, int(n))
	if err != nil {
		return nil, err
	}
	kept := false
	defer func() {
		if !kept {
			sp.remove()
		}
	}()
	var buf []byte
	for lo := int64(0); lo < end; lo += step {
		cond := r.rowid + " >= ? AND " + r.rowid + " < ?"
		all := r.args[:len(r.args):len(r.args)]
		for range strings.Count(r.query, "%[1]s") {
			all = append(all, lo, lo+step)
		}
		rows, err := q.QueryContext(ctx, withCondition(r.query, cond), all...)
		if err != nil {
			return nil, err
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			doc, ok := vals[r.docCol].(string)
			if !ok {
				rows.Close()
				return nil, fmt.Errorf("doc id: %T, not a string", vals[r.docCol])
			}
			if r.skip != nil && r.skip(doc) {
				continue
			}
			if docSpilled != nil {
				docSpilled(r.table, doc)
			}
			var ord int64
			if r.ordCol >= 0 {
				if ord, err = toInt64(vals[r.ordCol]); err != nil {
					rows.Close()
					return nil, fmt.Errorf("position: %w", err)
				}
			}
			if buf, err = appendRow(buf[:0], vals); err != nil {
				rows.Close()
				return nil, err
			}
			if err := sp.add(doc, ord, buf); err != nil {
				rows.Close()
				return nil, err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	kept = true
	return sp, nil
}
