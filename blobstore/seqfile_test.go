//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package blobstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// packSeqs returns the sequence numbers of the packs under dir/packs, in
// name order.
func packSeqs(t *testing.T, dir string) []uint64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "packs"))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range ents {
		if seq, ok := parsePackName(e.Name()); ok {
			seqs = append(seqs, seq)
		}
	}
	return seqs
}

// A removal on file:// takes its pack's number from packs/SEQ, not from
// a listing of packs/ (at 1M passages, 2,024 packs, the listing was 1.7
// ms of a 4.9 ms delete): one listing sets the counter up, none after.
func TestNextSeqTakesTheCounter(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	for i := range 3 {
		if err := s.PutRecord(ctx, testRecord("/r"+strconv.Itoa(i), fakeBlob, "t")); err != nil {
			t.Fatal(err)
		}
	}
	before := s.px.seqListings.Load()
	for i := range 20 {
		if err := s.RemoveRecord(ctx, DocID("/r"+strconv.Itoa(i%3))); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncRemovals(); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.px.seqListings.Load() - before; n != 0 {
		t.Errorf("20 removals listed packs/ %d times, want 0", n)
	}
	if n := s.px.seqListings.Load(); n != 1 {
		t.Errorf("packs/ listed %d times in all, want 1 (the counter's set-up)", n)
	}
	seqs := packSeqs(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, seqFileKey))
	if err != nil {
		t.Fatal(err)
	}
	counter, ok := parseSeqFile(b)
	if top := seqs[len(seqs)-1]; !ok || counter != top {
		t.Errorf("packs/SEQ = %q, want the highest pack number %d", b, top)
	}
}

// Two Stores writing one directory at once (two index directories on one
// blob store: the contract excludes it, nothing refuses it) never take
// one number: with the listing, a tie between a tombstone and a record
// was broken by the names' random suffixes.
func TestTwoWritersNeverTakeOneNumber(t *testing.T) {
	ctx := context.Background()
	a, dir := packedFileStore(t)
	b := reopen(t, a)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w, s := range []*Store{a, b} {
		wg.Go(func() {
			for i := range 40 {
				src := "/w" + strconv.Itoa(w) + "/" + strconv.Itoa(i)
				if err := s.PutRecord(ctx, testRecord(src, fakeBlob, "t")); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seqs := packSeqs(t, dir)
	seen := map[uint64]bool{}
	for _, seq := range seqs {
		if seen[seq] {
			t.Errorf("two packs numbered %d", seq)
		}
		seen[seq] = true
	}
	if len(seqs) != 80 {
		t.Errorf("%d packs, want 80", len(seqs))
	}
}

// A counter that is missing, damaged or behind the packs (written by a
// version without it, or not yet on disk at a crash) gives no number at
// or below a pack's: a damaged or missing one is read from a listing
// again, one behind is passed by what the Store listed when it opened.
func TestSeqCounterDamagedOrBehind(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	put := func(s *Store, src string) {
		t.Helper()
		if err := s.PutRecord(ctx, testRecord(src, fakeBlob, "t")); err != nil {
			t.Fatal(err)
		}
	}
	top := func() uint64 {
		seqs := packSeqs(t, dir)
		return seqs[len(seqs)-1]
	}
	for i := range 4 {
		put(s, "/a"+strconv.Itoa(i))
	}
	path := filepath.Join(dir, seqFileKey)
	for _, tc := range []struct {
		name    string
		content []byte // nil: the file removed
		// again: damaged again before the Store open before writes
		// (a counter behind cannot happen under a running Store while
		// every writer locks it: each raises it before it publishes).
		again bool
	}{
		{"damaged", []byte("not a number\n"), true},
		{"missing", nil, true},
		{"behind", formatSeqFile(1), false},
		{"empty", []byte{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := top() + 1
			if tc.content == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			// A fresh Store (what opens after a crash or another version)
			// and this one both number above every pack.
			fresh := reopen(t, s)
			put(fresh, "/fresh-"+tc.name)
			if got := top(); got != want {
				t.Errorf("fresh Store: pack %d, want %d", got, want)
			}
			switch {
			case tc.again && tc.content == nil:
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			case tc.again:
				if err := os.WriteFile(path, tc.content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// s has not seen the fresh Store's pack: the counter (or the
			// listing) puts it above.
			put(s, "/old-"+tc.name)
			if got := top(); got != want+1 {
				t.Errorf("Store open before: pack %d, want %d", got, want+1)
			}
			b, _ := os.ReadFile(path)
			if counter, ok := parseSeqFile(b); !ok || counter != want+1 {
				t.Errorf("packs/SEQ = %q after the writes, want %d", b, want+1)
			}
		})
	}
}

// fakeBlob is a well-formed blob id for records whose blob is not read.
var fakeBlob = "sha256:" + strings.Repeat("ab", 32)

// Numbers taken at once by many goroutines of two Stores are each taken
// once (review 15: without the flock this fails every run, while
// TestTwoWritersNeverTakeOneNumber failed one run in ten).
func TestClaimsAreExclusive(t *testing.T) {
	ctx := context.Background()
	a, _ := packedFileStore(t)
	b := reopen(t, a)
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b, a, b, a, b, a, b} {
		wg.Go(func() {
			for range 300 {
				seq, err := s.nextSeq(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[seq]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for seq, n := range seen {
		if n > 1 {
			t.Errorf("number %d taken %d times", seq, n)
		}
	}
	if a.px.noSeqFile.Load() || b.px.noSeqFile.Load() {
		t.Fatal("flock refused: the test proves nothing here")
	}
}

// Where the file system cannot lock, a Store lists packs/ for each
// number, from then on, and still numbers above every pack; any other
// refusal of the lock fails the write, nothing published, and the next
// write takes its number.
func TestSeqLockRefused(t *testing.T) {
	ctx := context.Background()
	s, dir := packedFileStore(t)
	put := func(src string) error {
		return s.PutRecord(ctx, testRecord(src, fakeBlob, "t"))
	}
	if err := put("/a"); err != nil {
		t.Fatal(err)
	}
	refuse := func(err error, ok bool) {
		lockSeq = func(context.Context, string) (*os.File, func(), bool, error) { return nil, nil, ok, err }
	}
	t.Cleanup(func() { lockSeq = lockSeqFile })

	refuse(syscall.ENOLCK, false)
	before := packSeqs(t, dir)
	if err := put("/b"); !errors.Is(err, syscall.ENOLCK) {
		t.Fatalf("a write whose lock failed: %v, want ENOLCK", err)
	}
	if got := packSeqs(t, dir); len(got) != len(before) {
		t.Errorf("packs %v after the failed write, want %v", got, before)
	}
	if s.px.noSeqFile.Load() {
		t.Error("an error locking made the Store list from then on")
	}

	refuse(nil, false) // cannot lock here
	listings := s.px.seqListings.Load()
	for _, src := range []string{"/c", "/d"} {
		if err := put(src); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.px.seqListings.Load() - listings; n != 2 {
		t.Errorf("two writes without the lock listed packs/ %d times, want 2", n)
	}
	seqs := packSeqs(t, dir)
	if want := before[len(before)-1] + 2; seqs[len(seqs)-1] != want || len(seqs) != len(before)+2 {
		t.Errorf("packs %v, want two more up to %d", seqs, want)
	}
}

// A Store waiting for the counter's lock gives up when its context ends.
func TestSeqLockWaitHonoursContext(t *testing.T) {
	s, dir := packedFileStore(t)
	if err := s.PutRecord(context.Background(), testRecord("/a", fakeBlob, "t")); err != nil {
		t.Fatal(err)
	}
	_, unlock, ok, err := lockSeqFile(context.Background(), filepath.Join(dir, seqFileKey))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if _, err := s.nextSeq(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("nextSeq with the lock held elsewhere: %v, want the context's deadline", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("nextSeq returned after %v", d)
	}
}
