//go:build !unix

package replica

import "sync"

var fileMu sync.Mutex

// flock, without flock(2), serializes the publishers of this process
// only: on file:// two processes publishing at once may both create the
// same pointer (use an object store's conditional write across machines).
func flock(string) (func(), error) {
	fileMu.Lock()
	return fileMu.Unlock, nil
}
