package fts

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/escurel/escurel/internal/duck"
)

// Change is a write's effect on the in-memory index, applied by Commit once
// the transaction that wrote it has committed, and dropped if it did not.
type Change struct {
	newTerms  []string // get ids firstTerm, firstTerm+1, …
	firstTerm int32
	df        map[int32]df // added to the document frequencies
	added     []addedBlock
	killed    []int64
	segment   *segment         // a new segment
	lists     map[int32][]byte // its posting lists, for the cache
	// Set by merges and compactions:
	dropSegments map[int32]bool
	compacted    bool    // dead blocks and their postings are gone
	dropTerms    []int32 // terms left without postings by a compaction
}

type addedBlock struct {
	id int64
	blockInfo
}

// Add writes blocks (ascending ids, all new) as one new segment within tx:
// their field lengths, their postings and any new dictionary terms. Call
// with the writer's exclusive right to write; pass the result to Commit.
// It is Invert, then Append.
func (ix *Index) Add(ctx context.Context, tx *duck.Tx, blocks []Block) (*Change, error) {
	inv, err := ix.Invert(blocks)
	if err != nil {
		return nil, err
	}
	return ix.Append(ctx, tx, inv)
}

// Inverted is a batch of blocks inverted into one segment's posting lists,
// encoded and with their term ids, ready to Append. It touches no
// database.
type Inverted struct {
	ch    *Change
	terms []int32  // term ids, ascending by term (the order rows are appended in)
	data  [][]byte // encoded posting list of terms[i]
}

// occurrence is one block's posting of a term while Invert lays them out:
// the term's local number and its counts.
type occurrence struct {
	term int32
	tf   [NumFields]uint32
}

// Invert does the part of Add that needs no transaction: it inverts blocks
// (ascending ids, all new) into posting lists, assigns ids to new terms and
// encodes the lists. Call it with the writer's exclusive right to write
// (no other write may change the dictionary before Append), then Append
// within the write's transaction; it may run while the writer appends
// other rows on tx.
func (ix *Index) Invert(blocks []Block) (*Inverted, error) {
	ix.mu.RLock()
	nextTerm, segID := ix.nextTerm, ix.nextSeg
	ix.mu.RUnlock()
	ch := &Change{firstTerm: nextTerm}
	if len(blocks) == 0 {
		return &Inverted{ch: ch}, nil
	}
	// Invert the batch: term → postings in block order. Each distinct term
	// gets a local number on first sight, so an occurrence costs one map
	// lookup (the map sized for the last batch's terms, so that it seldom
	// grows); a block's counts live in tf, indexed by local number, for
	// the terms it touched. Each block's postings (local number, counts)
	// go to occ, and are then laid out by term in one array (two passes:
	// no posting list grows by doubling).
	hint := int(ix.invertHint.Load())
	local := make(map[string]int32, hint)
	var (
		// By local number, sized as the map: they seldom grow either.
		names   = make([]string, 0, hint)
		counts  = make([]int32, 0, hint) // postings per local number
		tf      = make([][NumFields]uint32, 0, hint)
		last    = make([]int, 0, hint) // the block (index in blocks) that last touched a term
		touched []int32
		occ     []occurrence
		ends    = make([]int, len(blocks)) // blocks[i]'s postings end at occ[ends[i]]
	)
	n := 0
	for _, b := range blocks {
		for f := range b.Terms {
			n += len(b.Terms[f])
		}
	}
	occ = make([]occurrence, 0, n) // a bound: a block's repeats take one
	ch.added = make([]addedBlock, 0, len(blocks))
	prev := int64(-1)
	for bi, b := range blocks {
		if b.ID <= prev {
			return nil, fmt.Errorf("fts add: block ids not ascending (%d after %d)", b.ID, prev)
		}
		prev = b.ID
		touched = touched[:0]
		info := blockInfo{level: b.Level, state: live}
		for f := range b.Terms {
			info.len[f] = uint32(len(b.Terms[f]))
			for _, t := range b.Terms[f] {
				li, ok := local[t]
				if !ok {
					li = int32(len(names))
					local[t] = li
					names = append(names, t)
					counts = append(counts, 0)
					tf = append(tf, [NumFields]uint32{})
					last = append(last, -1)
				}
				if last[li] != bi {
					last[li] = bi
					tf[li] = [NumFields]uint32{}
					touched = append(touched, li)
				}
				tf[li][f]++
			}
		}
		for _, li := range touched {
			occ = append(occ, occurrence{li, tf[li]})
			counts[li]++
		}
		ends[bi] = len(occ)
		ch.added = append(ch.added, addedBlock{b.ID, info})
	}
	ix.invertHint.Store(int64(len(names)))
	// lists[li] is the postings of local term li, in block order: slices
	// of one array.
	all := make([]Posting, len(occ))
	lists := make([][]Posting, len(names))
	at := 0
	for li, n := range counts {
		lists[li] = all[at : at : at+int(n)]
		at += int(n)
	}
	start := 0
	for bi, end := range ends {
		for _, o := range occ[start:end] {
			lists[o.term] = append(lists[o.term], Posting{Block: blocks[bi].ID, TF: o.tf})
		}
		start = end
	}

	for _, t := range names {
		if t == "" || len(t) > maxTermLen {
			return nil, fmt.Errorf("fts add: a term of %d bytes (want 1 to %d)", len(t), maxTermLen)
		}
	}
	order := make([]int32, len(names))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	inv := &Inverted{ch: ch, terms: make([]int32, len(order)), data: make([][]byte, len(order))}
	ix.mu.RLock()
	for i, li := range order {
		id, ok := ix.ids.get(names[li])
		if !ok {
			id = nextTerm + int32(len(ch.newTerms))
			ch.newTerms = append(ch.newTerms, names[li])
		}
		inv.terms[i] = id
	}
	ix.mu.RUnlock()

	seg := &segment{id: segID, blocks: int32(len(blocks)), min: blocks[0].ID, max: prev}
	ch.df = make(map[int32]df, len(order))
	ch.lists = make(map[int32][]byte, len(order))
	for i, li := range order {
		ps := lists[li]
		data := encode(nil, ps) // its own array: the posting cache may keep it
		id := inv.terms[i]
		ch.df[id] = listDF(ps)
		ch.lists[id] = data
		inv.data[i] = data
		seg.bytes += int64(len(data))
	}
	ch.segment = seg
	return inv, nil
}

// Append writes an inverted batch within tx: its posting lists, its new
// dictionary terms, its blocks' field lengths and its segment. Pass the
// result to Commit.
func (ix *Index) Append(ctx context.Context, tx *duck.Tx, inv *Inverted) (*Change, error) {
	ch := inv.ch
	if ch.segment == nil {
		return ch, nil
	}
	segID := ch.segment.id
	err := duck.Append(ctx, tx.Conn, "fts_postings", []string{"term_id", "segment_id", "df", "df_body", "df_context", "data"},
		func(add func(...driver.Value) error) error {
			for i, id := range inv.terms {
				d := ch.df[id]
				if err := add(id, segID, d[0], d[1], d[2], inv.data[i]); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if err := ix.appendTerms(ctx, tx, ch); err != nil {
		return nil, err
	}
	err = duck.Append(ctx, tx.Conn, "fts_blocks", []string{"block_id", "len_body", "len_context", "level"},
		func(add func(...driver.Value) error) error {
			for _, b := range ch.added {
				if err := add(b.id, int32(b.len[Body]), int32(b.len[Context]), int8(b.level)); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if err := insertSegment(ctx, tx, ch.segment); err != nil {
		return nil, err
	}
	return ch, nil
}

// listDF returns the document frequencies a posting list contributes: its
// postings, and those with the term in the body and in the context.
func listDF(ps []Posting) df {
	d := df{int32(len(ps))}
	for _, p := range ps {
		if p.TF[Body] > 0 {
			d[1]++
		}
		if p.TF[Context] > 0 {
			d[2]++
		}
	}
	return d
}

func (ix *Index) appendTerms(ctx context.Context, tx *duck.Tx, ch *Change) error {
	if len(ch.newTerms) == 0 {
		return nil
	}
	return duck.Append(ctx, tx.Conn, "fts_terms", []string{"term_id", "term"}, func(add func(...driver.Value) error) error {
		for i, t := range ch.newTerms {
			if err := add(ch.firstTerm+int32(i), t); err != nil {
				return err
			}
		}
		return nil
	})
}

func insertSegment(ctx context.Context, tx *duck.Tx, s *segment) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO fts_segments VALUES (?, ?, ?, ?, ?, ?)`,
		s.id, s.blocks, s.min, s.max, s.bytes, time.Now().UTC())
	if err != nil {
		return fmt.Errorf("insert fts segment: %w", err)
	}
	return nil
}

// Remove tombstones blocks within tx, as one fts_removals row. Each block must carry the terms it
// was indexed with (re-analyzing its stored text gives them), so that the
// document frequencies can drop; blocks the index does not hold are
// ignored. Pass the result to Commit.
func (ix *Index) Remove(ctx context.Context, tx *duck.Tx, blocks []Block) (*Change, error) {
	ch := &Change{df: map[int32]df{}}
	inBlock := map[int32]uint8{} // term id → bit per field
	ix.mu.RLock()
	for _, b := range blocks {
		if b.ID < 0 || b.ID >= int64(len(ix.blocks)) || ix.blocks[b.ID].state != live {
			continue
		}
		ch.killed = append(ch.killed, b.ID)
		clear(inBlock)
		for f := range b.Terms {
			for _, t := range b.Terms[f] {
				if id, ok := ix.ids.get(t); ok {
					inBlock[id] |= 1 << f
				}
			}
		}
		for id, fields := range inBlock {
			d := ch.df[id]
			d[0]--
			for f := 0; f < NumFields; f++ {
				if fields&(1<<f) != 0 {
					d[1+f]--
				}
			}
			ch.df[id] = d
		}
	}
	ix.mu.RUnlock()
	if len(ch.killed) == 0 {
		return ch, nil
	}
	if err := appendRemoval(ctx, tx, ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// appendRemoval writes a removal as one row of fts_removals within tx
// (removal.go): the blocks it kills and its document-frequency changes.
func appendRemoval(ctx context.Context, tx *duck.Tx, ch *Change) error {
	data := encodeRemoval(ch.killed, ch.df)
	return duck.Append(ctx, tx.Conn, "fts_removals", []string{"data"}, func(add func(...driver.Value) error) error {
		return add(data)
	})
}

// Commit commits tx and applies changes to the in-memory index, under the
// write lock, so that no search sees one without the other. After a failed
// commit the in-memory index is unchanged.
func (ix *Index) Commit(ctx context.Context, tx *duck.Tx, changes ...*Change) error {
	return ix.CommitWith(ctx, tx, nil, changes...)
}

// CommitWith is Commit that also runs then, when not nil, after a
// successful commit and under the same lock: another in-memory structure
// that must change with the transaction (the dense vectors) changes there,
// so no search inside View sees the one without the other.
func (ix *Index) CommitWith(ctx context.Context, tx *duck.Tx, then func(), changes ...*Change) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	// Whatever it changes, the image no longer describes the index: a
	// commit may write rows Load reads, and one that failed may have
	// committed all the same.
	ix.imageCurrent.Store(false)
	if err := tx.Commit(ctx); err != nil {
		ix.uncertain = true
		return err
	}
	for _, ch := range changes {
		ix.apply(ch)
	}
	if then != nil {
		then()
	}
	return nil
}

func (ix *Index) apply(ch *Change) {
	if ch == nil {
		return
	}
	for i, t := range ch.newTerms {
		ix.ids.put(t, ch.firstTerm+int32(i)) // copies t's bytes
	}
	ix.nextTerm = max(ix.nextTerm, ch.firstTerm+int32(len(ch.newTerms)))
	for len(ix.df) < int(ix.nextTerm) {
		ix.df = append(ix.df, df{})
	}
	for id, d := range ch.df {
		for i := range d {
			ix.df[id][i] += d[i]
		}
	}
	for _, b := range ch.added {
		if b.id >= int64(len(ix.blocks)) {
			if b.id < int64(cap(ix.blocks)) {
				// Room a load left (withRoom), taken whole, so that
				// len(ix.blocks) does not change at every add (a
				// search sizes its accumulator by it: getAcc).
				old := len(ix.blocks)
				ix.blocks = ix.blocks[:cap(ix.blocks)]
				clear(ix.blocks[old:])
			} else {
				grown := make([]blockInfo, max(b.id+1, int64(len(ix.blocks))*5/4+1024))
				copy(grown, ix.blocks)
				ix.blocks = grown
			}
		}
		ix.blocks[b.id] = b.blockInfo
		ix.count(b.blockInfo, 1)
	}
	for _, id := range ch.killed {
		ix.kill(id)
	}
	if len(ch.dropSegments) > 0 || ch.compacted {
		ix.cache.clear()
	} else if ch.segment != nil {
		ix.cache.appendSegment(ch.segment.id, ch.lists)
	}
	if len(ch.dropSegments) > 0 {
		kept := ix.segments[:0]
		for _, s := range ix.segments {
			if !ch.dropSegments[s.id] {
				kept = append(kept, s)
			}
		}
		ix.segments = kept
	}
	if ch.segment != nil {
		ix.segments = append(ix.segments, *ch.segment)
		sort.Slice(ix.segments, func(i, j int) bool { return ix.segments[i].id < ix.segments[j].id })
		ix.nextSeg = max(ix.nextSeg, ch.segment.id+1)
	}
	if ch.compacted {
		for id := range ix.blocks {
			if ix.blocks[id].state == dead {
				ix.blocks[id] = blockInfo{}
			}
		}
		ix.tombstones = 0
	}
	if len(ch.dropTerms) > 0 {
		ix.ids.drop(ch.dropTerms)
	}
}
