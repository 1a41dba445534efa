package layout

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFile replaces dir/name with data durably, private to the owner
// (0600): written to name.tmp,
// fsynced, renamed over name, and the directory fsynced. After a crash at
// any step dir/name holds the old content or the new; a leftover name.tmp
// is removed by Clean.
func writeFile(dir, name string, data []byte) error {
	return writeFileMode(dir, name, data, 0o600)
}

// writeFileMode is writeFile creating the file with mode perm (before the
// umask).
func writeFileMode(dir, name string, data []byte, perm os.FileMode) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	if err := hook("create " + name); err != nil {
		return err
	}
	// A leftover of a crash keeps its mode through O_TRUNC: start afresh.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if err := hook("write " + name); err != nil {
		f.Close()
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		if err = hook("sync " + name); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := hook("rename " + name); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	if err := hook("syncdir " + name); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// failpoint, when set, is called before each step of writeFile ("create
// CURRENT", "write CURRENT", "sync CURRENT", "rename CURRENT", "syncdir
// CURRENT"); an error stops the write there, as a crash would.
var failpoint func(step string) error

func hook(step string) error {
	if failpoint == nil {
		return nil
	}
	return failpoint(step)
}

// CopyFile copies the file src to dst (created or truncated) and fsyncs
// dst, private to the owner (0600): how a generation's file is copied
// into a new generation (a re-embed starts from a copy of the live one).
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
