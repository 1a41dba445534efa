//go:build linux

package blobstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// seqWatch keeps, for a file:// store on a local file system, the highest
// sequence number among the packs under packs/ without reading the
// directory at every write: an inotify watch on packs/ (IN_CREATE,
// IN_MOVED_TO) set up before one listing, then every pack name the kernel
// reports since. nextSeq's guarantee is unchanged: a pack whose rename
// (or link) into packs/ returned before nextSeq drains the queue is in
// the queue (inotify queues the event within that rename), as it was in
// the listing that nextSeq made before; a pack whose rename began before
// the watch was added and ended after it is in the listing that follows
// the watch or in the queue. The queue is drained at each nextSeq.
//
// Reading packs/ was a third of a delete's blob store CPU at 1M passages
// (2,004 packs: getdents of an ext4 hash-tree directory, every name
// parsed; issue 16). A queue that overflowed (IN_Q_OVERFLOW), or a watch
// that ended (packs/ removed, moved or unmounted), is dropped: the next
// nextSeq sets up a new one and lists again. inotify sees only this
// machine's changes, so it is used only on the local file systems named
// in localFS (never NFS, SMB or FUSE, where another machine may write);
// elsewhere, or when inotify cannot be set up (the per-user limit on
// instances), every nextSeq lists, as before. Only writers set one up
// (at their first nextSeq); Store.Close closes it.
type seqWatch struct {
	mu  sync.Mutex
	fd  int    // the inotify instance; -1: none
	off bool   // no watch here (not a local file system, inotify unavailable): list
	max uint64 // the highest sequence number listed or reported since fd was set up
	buf []byte
}

func newSeqWatch() *seqWatch { return &seqWatch{fd: -1} }

// localFS reports whether a file system type (statfs(2) f_type) is a local
// one, whose every change on this machine reaches inotify.
func localFS(typ uint32) bool {
	switch typ {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.F2FS_SUPER_MAGIC:
		return true
	}
	return false
}

// maxSeq returns the highest sequence number of the packs in dir (the
// store's packs/): from the watch, or from list (a directory read) when
// there is none yet (set up first, then listed), when it failed, or when
// dir is not on a local file system.
func (w *seqWatch) maxSeq(dir string, list func() (uint64, error)) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 && !w.drain() {
		w.stop()
	}
	if w.fd >= 0 {
		return w.max, nil
	}
	if !w.off {
		w.start(dir)
	}
	m, err := list()
	if err != nil {
		w.stop()
		return 0, err
	}
	w.max = max(w.max, m)
	return m, nil
}

// start sets up the watch on dir, or sets off when it cannot be.
func (w *seqWatch) start(dir string) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || !localFS(uint32(st.Type)) {
		w.off = true
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		w.off = true
		return
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		w.off = true
		return
	}
	w.fd = fd
	if w.buf == nil {
		w.buf = make([]byte, 64<<10)
	}
}

// drain reads the queued events, raising max to each pack name's sequence
// number; false when the watch can no longer be trusted (overflow, the
// watch removed, a read error).
func (w *seqWatch) drain() bool {
	for {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EAGAIN) {
			return true
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return false
		}
		for b := w.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			mask := binary.NativeEndian.Uint32(b[4:8])
			size := int(binary.NativeEndian.Uint32(b[12:16]))
			if unix.SizeofInotifyEvent+size > len(b) {
				return false
			}
			if mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
				return false
			}
			name := b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+size]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if seq, ok := parsePackName(string(name)); ok {
				w.max = max(w.max, seq)
			}
			b = b[unix.SizeofInotifyEvent+size:]
		}
	}
}

// stop closes the watch; the next maxSeq sets up a new one.
func (w *seqWatch) stop() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// close closes the watch for good (Store.Close).
func (w *seqWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop()
	w.off = true
}
