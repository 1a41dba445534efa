package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Defaults of ExpandOptions.
const (
	DefaultNeighbours  = 2        // blocks each side
	DefaultExpandBytes = 16 << 10 // bytes of text in all
)

// ErrNotFound is returned, wrapped, by Expand for a block that does not
// exist or that the caller's clearance does not reach: the two answer
// alike ("no such block <id> (its document changed or was deleted)"), so
// a caller cannot learn that a restricted block exists.
var ErrNotFound = errors.New("not found")

// ExpandOptions configure Expand.
type ExpandOptions struct {
	// Before and After are how many neighbouring blocks of the same
	// document to add each side: 0 means DefaultNeighbours, a negative
	// number none.
	Before, After int
	// MaxBytes bounds the text returned in all (bodies and window); 0
	// means DefaultExpandBytes. The block's own body is always returned
	// whole (Truncated when it alone exceeds the bound); then its window,
	// cut around the body to fit (Truncated, ParentLocator then the range
	// kept); then neighbours, nearest first, alternating before and after,
	// while each fits whole.
	MaxBytes int
	// Clearance as in SearchOptions; "" is Public.
	Clearance string
}

// Expansion is a block with what surrounds it, for a reader or a
// generator that needs more than the hit.
type Expansion struct {
	Block     Hit   `json:"block"`  // PromptText holds the window, cut to the budget
	Before    []Hit `json:"before"` // in document order, nearest last
	After     []Hit `json:"after"`  // in document order, nearest first
	Bytes     int   `json:"bytes"`  // text returned: bodies and window
	Truncated bool  `json:"truncated"`
}

// Expand returns the block id (Hit.BlockID) with its neighbours and its
// window, within the byte budget. A block id is stable: it names the same
// body as long as its document is the same bytes (see Hit.BlockID).
//
// Errors: ErrBadBlockID (wrapped) for an id that is not BlockIDLen
// lowercase hex digits; ErrNotFound (wrapped), with the text "no such block
// <id> (its document changed or was deleted)", for an id that names no
// block (never issued, or of a document since changed or deleted) and,
// alike, for one above the clearance; invalid options; storage errors.
func (ix *Index) Expand(ctx context.Context, id string, opts *ExpandOptions) (*Expansion, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	return s.expand(ctx, id, opts)
}

// expand is Index.Expand on one generation.
func (ix *state) expand(ctx context.Context, id string, opts *ExpandOptions) (*Expansion, error) {
	if err := CheckBlockID(id); err != nil {
		return nil, fmt.Errorf("expand: %w", err)
	}
	if opts == nil {
		opts = &ExpandOptions{}
	}
	levels, err := allowed(opts.Clearance)
	if err != nil {
		return nil, fmt.Errorf("expand: %w", err)
	}
	budget := opts.MaxBytes
	if budget == 0 {
		budget = DefaultExpandBytes
	}
	if budget < 0 {
		return nil, fmt.Errorf("expand: max bytes %d, want ≥ 0", budget)
	}
	before, after := neighbours(opts.Before), neighbours(opts.After)
	if before < 0 || after < 0 {
		return nil, fmt.Errorf("expand: %d and %d neighbours, want ≥ 0", before, after)
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	args := []any{id}
	for _, l := range levels {
		args = append(args, l)
	}
	var doc string
	var ord int
	err = tx.QueryRowContext(ctx, `SELECT b.doc_id, b.ord FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
		WHERE b.public_id = ? AND d.sensitivity IN (`+placeholders(len(levels))+`)`, args...).Scan(&doc, &ord)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("expand: %w", noSuchBlock(id))
	}
	if err != nil {
		return nil, fmt.Errorf("expand: block %s: %w", id, err)
	}
	// A document has fewer blocks than any huge count asked for: bound the
	// range by what exists (and keep ord±n from overflowing).
	var last int
	if err := tx.QueryRowContext(ctx, `SELECT max(ord) FROM blocks WHERE doc_id = ?`, doc).Scan(&last); err != nil {
		return nil, fmt.Errorf("expand: block %s: %w", id, err)
	}
	before, after = min(before, ord), min(after, last-ord)
	rows, err := tx.QueryContext(ctx, `SELECT block_id, ord FROM blocks WHERE doc_id = ? AND ord BETWEEN ? AND ? ORDER BY ord`,
		doc, ord-before, ord+after)
	if err != nil {
		return nil, fmt.Errorf("expand: block %s: %w", id, err)
	}
	var ids []int64
	var ords []int
	for rows.Next() {
		var n int64
		var o int
		if err := rows.Scan(&n, &o); err != nil {
			rows.Close()
			return nil, err
		}
		ids, ords = append(ids, n), append(ords, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	hits, kept, err := fillHits(ctx, tx, ids, levels)
	if err != nil {
		return nil, fmt.Errorf("expand: block %s: %w", id, err)
	}
	self := -1
	for i, k := range kept {
		if ords[k] == ord {
			self = i
		}
	}
	if self < 0 {
		return nil, fmt.Errorf("expand: %w", noSuchBlock(id))
	}
	x := &Expansion{Block: hits[self], Before: []Hit{}, After: []Hit{}}
	x.Bytes = len(x.Block.Body)
	if x.Bytes > budget {
		x.Truncated = true // the body is returned whole all the same
	}
	if b := &x.Block; b.PromptText != "" {
		if room := budget - x.Bytes; len(b.PromptText) > room {
			x.Truncated = true
			cutWindow(b, room)
		}
		x.Bytes += len(b.PromptText)
	}
	// Neighbours, nearest first, alternating, while they fit whole.
	var b, a []Hit
	full := [2]bool{} // a side stops at its first neighbour that does not fit: no gaps
	for d := 1; d <= max(before, after); d++ {
		for side, i := range []int{self - d, self + d} {
			if full[side] || i < 0 || i >= len(hits) || (i < self && self-i > before) || (i > self && i-self > after) {
				continue
			}
			h := hits[i]
			h.PromptText, h.ParentLocator = "", nil // a neighbour's window is the block's, or another's: not repeated
			if x.Bytes+len(h.Body) > budget {
				x.Truncated, full[side] = true, true
				continue
			}
			x.Bytes += len(h.Body)
			if i < self {
				b = append([]Hit{h}, b...)
			} else {
				a = append(a, h)
			}
		}
	}
	x.Before, x.After = append(x.Before, b...), append(x.After, a...)
	return x, nil
}

func neighbours(n int) int {
	switch {
	case n == 0:
		return DefaultNeighbours
	case n < 0:
		return 0
	}
	return n
}

// cutWindow cuts h's window to at most room bytes around its body, on rune
// boundaries, and makes ParentLocator's byte range that of the text kept
// (its paragraph range still names the paragraphs the whole window spans).
// A room smaller than the body drops the window.
func cutWindow(h *Hit, room int) {
	w, l := h.PromptText, h.ParentLocator
	if l == nil {
		h.PromptText = ""
		return
	}
	bodyStart, bodyEnd := int(h.ByteStart-l.ByteStart), int(h.ByteEnd-l.ByteStart)
	if room < bodyEnd-bodyStart || bodyStart < 0 || bodyEnd > len(w) {
		h.PromptText, h.ParentLocator = "", nil
		return
	}
	extra := room - (bodyEnd - bodyStart)
	start := max(0, bodyStart-extra/2)
	end := min(len(w), start+room)
	start = max(0, end-room)
	for start < bodyStart && !utf8.RuneStart(w[start]) {
		start++
	}
	for end > bodyEnd && end < len(w) && !utf8.RuneStart(w[end]) {
		end--
	}
	cut := *l
	cut.ByteStart, cut.ByteEnd = l.ByteStart+int64(start), l.ByteStart+int64(end)
	h.PromptText, h.ParentLocator = w[start:end], &cut
}
