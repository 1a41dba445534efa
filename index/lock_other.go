//go:build !unix

package index

import (
	"errors"
	"os"
)

// ErrLocked is returned, possibly wrapped, when another process holds an
// index directory. Match it with errors.Is.
var ErrLocked = errors.New("index: directory in use")

// LockName is the lock file inside an index directory.
const LockName = "LOCK"

// DirLock is a no-op on platforms without flock: DuckDB's own file lock is
// the only guard there.
type DirLock struct{}

// LockDir creates dir and returns a lock that guards nothing.
func LockDir(dir string) (*DirLock, error) { return &DirLock{}, os.MkdirAll(dir, 0o755) }

// Unlock does nothing.
func (l *DirLock) Unlock() error { return nil }
