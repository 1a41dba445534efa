package blobstore

// Pack sequence numbers: nextSeq, from the counter packs/SEQ under an
// exclusive flock on file://, else from a listing of packs/.

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
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

// nextSeq returns a sequence number above every pack's published before
// it was called, by this Store or another, so that this write wins over
// them (a removal over an older record).
//
// On file:// it takes the number from the counter packs/SEQ under an
// exclusive flock of that file (claimSeq): every Store writing the
// directory raises the counter before it publishes a pack under the
// number it took, so the counter is at or above every number taken, and
// two such Stores never take one number. Elsewhere (object stores;
// file:// where the file system cannot lock, or a platform without
// flock) it lists packs/ (names only) and takes the highest number there:
// a pack another Store wrote before this write began is below it, but
// two Stores writing at the same moment may take one number. A writer
// that lists does not raise the counter, so one that lists beside one
// that locks (another mount of the directory, an escurel before the
// counter) may take a number the other takes too: two writers are
// outside the contract either way (one writing index per blob store:
// ARCHITECTURE.md, storage contract). The listing was most of a delete's
// blob store CPU at 1M passages (2,024 packs). The packs it finds are
// loaded by the next refresh, not here.
func (s *Store) nextSeq(ctx context.Context) (uint64, error) {
	if err := s.loadPacks(ctx, false); err != nil {
		return 0, err
	}
	if s.localDir != "" && !s.px.noSeqFile.Load() {
		if seq, ok, err := s.claimSeq(ctx); err != nil || ok {
			return seq, err
		}
	}
	listed, err := s.listedMaxSeq(ctx)
	if err != nil {
		return 0, err
	}
	x := s.px
	x.mu.Lock()
	defer x.mu.Unlock()
	x.maxSeq = max(x.maxSeq, listed) + 1
	return x.maxSeq, nil
}

// listedMaxSeq returns the highest sequence number among the pack names
// under packs/ (0: none).
func (s *Store) listedMaxSeq(ctx context.Context) (uint64, error) {
	// The highest name: pack names have one length and begin with their
	// sequence number in 16 hex digits.
	s.px.seqListings.Add(1)
	var top string
	see := func(name string) {
		if name > top {
			top = name
		}
	}
	if s.localDir != "" {
		// Unsorted names, no stat: this runs at every batch's Sync.
		d, err := os.Open(s.localPath("packs"))
		if err != nil {
			return 0, fmt.Errorf("list packs: %w", err)
		}
		defer d.Close()
		for {
			names, err := d.Readdirnames(1024)
			for _, n := range names {
				if _, ok := parsePackName(n); ok {
					see(n)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("list packs: %w", err)
			}
		}
	} else {
		err := s.list(ctx, "packs/", false, func(name string, _ int64, _ time.Time) {
			if _, ok := parsePackName(name); ok {
				see(name)
			}
		})
		if err != nil {
			return 0, fmt.Errorf("list packs: %w", err)
		}
	}
	if top == "" {
		return 0, nil
	}
	seq, _ := parsePackName(top)
	return seq, nil
}
