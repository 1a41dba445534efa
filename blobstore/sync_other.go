//go:build !linux

package blobstore

// syncFiles makes the temporary files durable, an fsync each.
func syncFiles(dir string, pending []pendingFile) error { return fsyncEach(pending) }
