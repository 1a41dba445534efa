//go:build unix

package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is returned, possibly wrapped, when another process (or another
// Open in this process) holds an index directory. Match it with errors.Is.
var ErrLocked = errors.New("index: directory in use")

// LockName is the lock file inside an index directory.
const LockName = "LOCK"

// DirLock is an exclusive advisory lock (flock) on an index directory. Open
// takes one and Close releases it; rebuild holds one across its whole run so
// that no writer slips in between reading the live index and swapping in the
// new one. The lock file holds the holder's process id, for the message.
type DirLock struct {
	f *os.File
}

// LockDir takes the lock of dir, creating dir and its lock file when
// missing. It does not wait: a held lock fails at once with ErrLocked.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w: %s is held by process %s (an escurel command or program using the index); wait for it or stop it", ErrLocked, dir, pid)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock. The lock file stays.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}
