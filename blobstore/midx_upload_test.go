package blobstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// On an object store, writeMidx must not hold the pack index's read lock
// while the multi-pack index's upload waits on the network: a batch's
// addPack (x.mu.Lock) would wait for the upload, and every lookup (Get,
// GetRecord) queue behind that waiting writer (sync.RWMutex). The S3
// server here holds every request for the multi-pack index until
// released, as a slow link would; a pack is added and another removed
// meanwhile, and what was written is the index as the write began (review
// 12, M1).
func TestMidxUploadDoesNotBlockLookups(t *testing.T) {
	ctx := context.Background()
	backend := s3mem.New()
	if err := backend.CreateBucket("gate"); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend).Server()
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "multi-pack-index") {
			once.Do(func() { close(arrived) })
			<-release
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "escurel-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "escurel-test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	q := url.Values{}
	q.Set("endpoint", ts.URL)
	q.Set("region", "us-east-1")
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	s, err := OpenWith(ctx, "s3://gate?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a blob read during the upload")
	id, err := s.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, id); err != nil { // loads the index
		t.Fatal(err)
	}
	// 1,000,000 blob entries: a multi-pack index of about 42 MB, over the
	// 16 MiB multipart threshold: fill blocks on the pipe while it waits.
	x := s.px
	x.mu.Lock()
	x.loaded = true
	for i, seq := 0, uint64(100); i < 1_000_000; i, seq = i+1000, seq+1 {
		es := make([]packEntry, 0, 1000)
		for j := i; j < i+1000; j++ {
			e := packEntry{kind: kindBlob, off: 8, n: 100}
			e.key = sha256.Sum256([]byte(fmt.Sprint(j)))
			es = append(es, e)
		}
		x.addLocked(&packInfo{name: packName(seq, "0123456789abcdef"), seq: seq, size: 1 << 20}, es)
	}
	x.mu.Unlock()

	errc := make(chan error, 1)
	go func() { errc <- s.writeMidx(ctx, 1) }()
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the multi-pack index's upload never reached the server")
	}
	// While the request waits, a batch's pack comes (addPack), then a read.
	added := make(chan struct{})
	go func() {
		// A batch's pack (merges in every shard) and a repack's removal
		// (compacts every shard, marks a pack gone) while it uploads.
		es := make([]packEntry, 0, 5000)
		for j := range 5000 {
			e := packEntry{kind: kindBlob, off: 8, n: 100}
			e.key = sha256.Sum256([]byte(fmt.Sprint("new", j)))
			es = append(es, e)
		}
		x.mu.Lock()
		x.addLocked(&packInfo{name: packName(5000, "0123456789abcdef"), seq: 5000, size: 1 << 20}, es)
		x.removeLocked([]string{packName(100, "0123456789abcdef")})
		x.mu.Unlock()
		close(added)
	}()
	time.Sleep(100 * time.Millisecond)
	got := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, id)
		got <- err
	}()
	var stalled bool
	select {
	case err := <-got:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(2 * time.Second):
		stalled = true
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	<-added
	// What was written is the index as it was when the write began.
	data, err = s.read(ctx, midxKey)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMidx(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.blobs) != 1_000_001 || len(m.packs) != 1001 {
		t.Errorf("multi-pack index of %d blobs in %d packs, want 1,000,001 in 1,001", len(m.blobs), len(m.packs))
	}
	if stalled {
		<-got
		t.Error("a Get waited over 2 s for the multi-pack index's upload: writeMidx holds x.mu (read) across network I/O, and the waiting addPack blocks every lookup")
	}
}
