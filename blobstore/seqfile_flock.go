//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package blobstore

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// seqFileLocks: this platform has flock, so file:// stores number their
// packs from packs/SEQ (nextSeq).
const seqFileLocks = true

// lockSeqFile opens path (created 0600) and takes an exclusive flock on
// it, waiting for it until ctx is done (the holder's critical section is
// a read and a write of 17 bytes: a wait means a holder stopped or a
// slow network file system). ok is false where the file system cannot
// lock (ENOTSUP, EOPNOTSUPP, ENOSYS: some FUSE and SMB mounts): the
// caller lists packs instead. Any other refusal (ENOLCK from an NFS lock
// daemon, say) is an error: the write fails rather than number its pack
// without the lock.
func lockSeqFile(ctx context.Context, path string) (f *os.File, unlock func(), ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, false, err
	}
	wait := 50 * time.Microsecond
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			break
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, nil, false, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
			return nil, nil, false, nil
		}
		return nil, nil, false, err
	}
	return f, func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}
