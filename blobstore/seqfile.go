package blobstore

// The counter of pack sequence numbers on file:// (packs/SEQ), which
// nextSeq takes its numbers from under an exclusive flock.

import (
	"context"
	"fmt"
)

// seqFileKey is the counter of pack sequence numbers on file:// (nextSeq):
// the highest number a Store took, as 16 lowercase hex digits and a
// newline. Not a pack (listings pass over the name). It is not fsynced:
// after a crash it may be below packs published before, and a Store
// starting then lists packs/ on first use (loadPacks), which it takes
// the number above; a missing or damaged counter is read from a listing
// again.
const seqFileKey = "packs/SEQ"

// claimSeq is nextSeq on file://: under an exclusive flock of packs/SEQ,
// the number above both the counter and the highest this Store knows,
// written back to the counter before the lock is released. ok is false
// when the file system cannot lock (nextSeq lists instead, from then
// on); any other failure to lock is an error.
func (s *Store) claimSeq(ctx context.Context) (seq uint64, ok bool, err error) {
	x := s.px
	f, unlock, ok, err := lockSeq(ctx, s.localPath(seqFileKey))
	if err != nil {
		return 0, false, fmt.Errorf("take a pack number (%s): %w", seqFileKey, err)
	}
	if !ok {
		x.noSeqFile.Store(true)
		return 0, false, nil
	}
	defer unlock()
	var buf [seqFileLen + 1]byte
	n, _ := f.ReadAt(buf[:], 0)
	counter, known := parseSeqFile(buf[:n])
	if !known {
		// New, written by a version without it, or damaged: the names
		// say the highest number, and the counter is set from them.
		if counter, err = s.listedMaxSeq(ctx); err != nil {
			return 0, false, err
		}
	}
	x.mu.Lock()
	x.maxSeq = max(x.maxSeq, counter) + 1
	seq = x.maxSeq
	x.mu.Unlock()
	if _, err := f.WriteAt(formatSeqFile(seq), 0); err != nil {
		return 0, false, fmt.Errorf("take a pack number (%s): %w", seqFileKey, err)
	}
	return seq, true, nil
}

// lockSeq is lockSeqFile; tests replace it to refuse the lock.
var lockSeq = lockSeqFile

// seqFileLen is the length of the counter's content.
const seqFileLen = 17

// formatSeqFile is the counter's content for seq.
func formatSeqFile(seq uint64) []byte {
	return fmt.Appendf(nil, "%016x\n", seq)
}

// parseSeqFile reads the counter's content; known is false unless it is
// exactly what formatSeqFile writes.
func parseSeqFile(b []byte) (seq uint64, known bool) {
	if len(b) != seqFileLen || b[seqFileLen-1] != '\n' {
		return 0, false
	}
	for _, c := range b[:seqFileLen-1] {
		switch {
		case '0' <= c && c <= '9':
			seq = seq<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			seq = seq<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return seq, true
}
