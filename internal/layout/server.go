package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ServerName is the file in which the process that holds the lock and
// serves the index (escurel serve) records how to reach it: its address
// and its local tokens, so that commands run on this machine go through
// it instead of meeting the lock. It is written with mode 0600: whoever
// may read it may read the index's files anyway.
const ServerName = "SERVER"

// SetServer records data (the server's address and local tokens) in
// DIR/SERVER, readable by the owner only, durably as every pointer file.
func (d *Dir) SetServer(data []byte) error {
	if err := writeFileMode(d.path, ServerName, data, 0o600); err != nil {
		return fmt.Errorf("record the server of %s: %w", d.path, err)
	}
	return nil
}

// ClearServer removes DIR/SERVER; a missing one is not an error. The
// server calls it before it releases the lock; a server that crashed
// leaves the file behind, which the next holder of the lock removes.
func (d *Dir) ClearServer() error {
	if err := os.Remove(filepath.Join(d.path, ServerName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the server record of %s: %w", d.path, err)
	}
	return nil
}

// Server returns the content of DIR/SERVER without taking the lock; ok is
// false when there is none. The record may be stale (a server that
// crashed): a caller that cannot reach the server takes the lock, and
// finding it free, knows no server runs.
func Server(dir string) (data []byte, ok bool, err error) {
	data, err = os.ReadFile(filepath.Join(dir, ServerName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the server record of %s: %w", dir, err)
	}
	return data, true, nil
}

// LockHolder returns the process id that DIR/LOCK names: the process that
// holds the lock, or held it last. ok is false when there is none to read.
func LockHolder(dir string) (pid int, ok bool) {
	data, err := os.ReadFile(filepath.Join(dir, LockName))
	if err != nil {
		return 0, false
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
	return pid, err == nil && pid > 0
}
