//go:build !unix

package blobstore

import (
	"testing"
	"time"
)

// withUmask skips the test: it checks unix file modes, which this
// platform does not have.
func withUmask(t *testing.T, mask int) {
	t.Skip("unix file modes: not on this platform")
}

// cpuTime is not read on this platform.
func cpuTime() (time.Duration, bool) { return 0, false }
