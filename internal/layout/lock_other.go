//go:build !unix

package layout

import (
	"errors"
	"os"
)

// ErrLocked is returned, wrapped, when another process holds an index
// directory. Match it with errors.Is.
var ErrLocked = errors.New("index: directory in use")

// dirLock guards nothing on platforms without flock: DuckDB's own file
// lock is the only guard there.
type dirLock struct{}

// locksProcesses: this lock does not exclude other processes.
const locksProcesses = false

func lockDir(dir string) (*dirLock, error) { return &dirLock{}, os.MkdirAll(dir, 0o700) }

func (l *dirLock) unlock() error { return nil }
