//go:build unix

package blobstore

import (
	"syscall"
	"testing"
	"time"
)

// withUmask sets the process's umask to mask for the test and restores it
// after: file modes are checked against the common default (0022, which
// lets others read), not whatever the runner has.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// cpuTime is the process's CPU time so far, user and system, all
// threads; false where it is not read.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
