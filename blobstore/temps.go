package blobstore

import (
	"encoding/hex"
	"os"
	"strings"
	"sync"
)

// liveTemps holds the temporary files of file:// stores that writes in
// this process have under way (a Batch's staged or flushed files, its
// pack before the rename, a write's fileblob file): TempFiles leaves
// them out, so GC and Purge (which remove every temporary file it lists)
// never remove one a write is about to rename. Process-wide: two Stores
// of one directory in a process see each other's.
var liveTemps = struct {
	sync.Mutex
	m map[string]struct{}
	// writes counts the writes under way to each final path (Store.write:
	// fileblob names its temporary file <final>.<hex>.tmp).
	writes map[string]int
}{m: map[string]struct{}{}, writes: map[string]int{}}

// writeStarted records a write to the final path under way.
func writeStarted(final string) {
	liveTemps.Lock()
	liveTemps.writes[final]++
	liveTemps.Unlock()
}

// writeDone records that a write to final ended.
func writeDone(final string) {
	liveTemps.Lock()
	if liveTemps.writes[final]--; liveTemps.writes[final] <= 0 {
		delete(liveTemps.writes, final)
	}
	liveTemps.Unlock()
}

// tempStarted records path as a temporary file a write has under way.
func tempStarted(path string) {
	liveTemps.Lock()
	liveTemps.m[path] = struct{}{}
	liveTemps.Unlock()
}

// tempDone records that path is no longer under way (renamed, removed,
// or left for good by a failed write).
func tempDone(path string) {
	liveTemps.Lock()
	delete(liveTemps.m, path)
	liveTemps.Unlock()
}

// tempLive reports whether a write has path under way: recorded itself,
// or <final>.<hex>.tmp of a write to final.
func tempLive(path string) bool {
	liveTemps.Lock()
	defer liveTemps.Unlock()
	if _, ok := liveTemps.m[path]; ok {
		return true
	}
	stem, ok := strings.CutSuffix(path, ".tmp")
	if i := strings.LastIndexByte(stem, '.'); ok && i >= 0 {
		if _, err := hex.DecodeString(padEven(stem[i+1:])); err == nil && liveTemps.writes[stem[:i]] > 0 {
			return true
		}
	}
	return false
}

// padEven makes an odd-length hex string decodable.
func padEven(h string) string {
	if len(h)%2 == 1 {
		return "0" + h
	}
	return h
}

// removeTemp removes a temporary file of this process's and forgets it.
func removeTemp(path string) {
	os.Remove(path)
	tempDone(path)
}

// writeNewFile creates path, which must not exist (O_EXCL; mode 0600),
// writes data to it and fsyncs it: a temporary file made durable before
// it is renamed or linked into place. A file it created and could not
// make durable it removes; one it did not create (the name taken) it
// leaves alone.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
