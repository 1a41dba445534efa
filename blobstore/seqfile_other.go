//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package blobstore

import (
	"context"
	"os"
)

// seqFileLocks: no flock here; nextSeq lists packs/ at every pack, as on
// object stores, and no packs/SEQ is made.
const seqFileLocks = false

// lockSeqFile has no flock here: ok false.
func lockSeqFile(ctx context.Context, path string) (f *os.File, unlock func(), ok bool, err error) {
	return nil, nil, false, nil
}
