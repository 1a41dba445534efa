//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package blobstore

import (
	"errors"
	"os"
	"syscall"
)

// lockSeqFile opens path (created 0600) and takes an exclusive flock on
// it, waiting for it. ok is false where the file system refuses flock
// (some network and FUSE mounts): the caller lists packs instead.
func lockSeqFile(path string) (f *os.File, unlock func(), ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, false, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOLCK) {
			return nil, nil, false, nil
		}
		return nil, nil, false, err
	}
	return f, func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}
