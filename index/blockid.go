package index

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// Block ids. A block has two numbers: blocks.block_id, the internal dense
// number the full-text index and the vectors key on (from a sequence, in
// processing order: a rebuild renumbers), which never leaves the package;
// and blocks.public_id, the id every caller sees (Hit.BlockID, Expand),
// which depends on nothing but the block's document and bytes.

// BlockIDLen is the length of a block id: 16 lowercase hex digits.
const BlockIDLen = 16

// ErrBadBlockID is returned, wrapped, for a block id that is not
// BlockIDLen lowercase hex digits.
var ErrBadBlockID = errors.New("not a block id (16 lowercase hex digits, as search prints)")

// blockID returns a block's public id: the first 8 bytes, in lowercase hex,
// of
//
//	SHA-256(doc_id ‖ " " ‖ blob_id ‖ " " ‖ byte_start ‖ " " ‖ byte_end ‖ " " ‖ body)
//
// with the byte offsets in decimal. No field before the body holds a space
// (doc_id and blob_id are hex names), so no two blocks hash the same input.
// The same bytes of the same document give the same id in any index built
// from them (ingest, rebuild in any order or from the blob store alone,
// reembed, compaction, rollback); a changed document has another blob_id,
// so its blocks get new ids and an old id never names other text.
// sql/0010_block_ids.sql computes the same for rows of older files.
func blockID(docID, blobID string, start, end int64, body string) string {
	// One buffer holds the whole input, so that the body is not copied
	// once more for the hash (h.Write takes bytes, not a string); the
	// buffers are pooled, but not one that a very long body grew.
	bp := idInputs.Get().(*[]byte)
	buf := append((*bp)[:0], docID...)
	buf = append(buf, ' ')
	buf = append(buf, blobID...)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, start, 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, end, 10)
	buf = append(buf, ' ')
	buf = append(buf, body...)
	sum := sha256.Sum256(buf)
	if cap(buf) <= maxPooledIDInput {
		*bp = buf[:0]
		idInputs.Put(bp)
	}
	return hex.EncodeToString(sum[:BlockIDLen/2])
}

// idInputs pools blockID's input buffers.
var idInputs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledIDInput is the largest buffer idInputs keeps.
const maxPooledIDInput = 64 << 10

// blockIDOf is blockID; tests replace it to make collisions.
var blockIDOf = blockID

// CheckBlockID returns nil for a well-formed block id (BlockIDLen
// lowercase hex digits), else an error wrapping ErrBadBlockID that quotes
// it. A well-formed id may still name no block.
func CheckBlockID(id string) error {
	if len(id) != BlockIDLen {
		return fmt.Errorf("block id %q: %w", id, ErrBadBlockID)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("block id %q: %w", id, ErrBadBlockID)
		}
	}
	return nil
}

// noSuchBlock is Expand's answer for an id that names no block the caller
// may see: one never issued, one of a document since changed or deleted,
// and one above the caller's clearance answer alike.
type noSuchBlock string

func (e noSuchBlock) Error() string {
	return "no such block " + string(e) + " (its document changed or was deleted)"
}

func (e noSuchBlock) Unwrap() error { return ErrNotFound }

// CollisionError reports two different blocks with the same block id: a
// document whose blocks repeat a span and body (a chunker's fault), or,
// about once in 2^64 pairs of blocks, two blocks whose hashes agree. The
// document is not ingested: within one document it fails alone (a
// *DocumentError wrapping this); against another document it fails its
// batch, whose records are taken back.
type CollisionError struct {
	ID     string // the block id
	Source string // the document being ingested
	Other  string // the source of the document that holds the id already; Source itself for a repeat within one document
}

// Error names the id, the document refused and the one holding the id.
func (e *CollisionError) Error() string {
	if e.Other == e.Source {
		return fmt.Sprintf("block id collision: two blocks of %s have id %s; not ingested", e.Source, e.ID)
	}
	return fmt.Sprintf("block id collision: a block of %s has id %s, as a block of %s does; %s not ingested", e.Source, e.ID, e.Other, e.Source)
}
