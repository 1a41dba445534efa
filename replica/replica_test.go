package replica_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/s3test"
	"github.com/escurel/escurel/replica"
	"github.com/escurel/escurel/serve"
)

// targets are the publish URLs the tests run against: gofakes3 on
// 127.0.0.1 through s3blob, and a file:// directory.
func targets(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"s3": func(t *testing.T) string {
			srv := s3test.Start(t)
			return srv.Bucket(t, "published", "escurel/")
		},
		"file": func(t *testing.T) string { return "file://" + t.TempDir() },
	}
}

func openWriter(t *testing.T) *index.Index {
	t.Helper()
	ix, err := index.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func ingest(t *testing.T, ix *index.Index, source, text string) {
	t.Helper()
	if _, err := ix.Ingest(context.Background(), index.Input{Source: source, Data: []byte(text)}); err != nil {
		t.Fatal(err)
	}
}

func digest(t *testing.T, ix *index.Index) string {
	t.Helper()
	v, err := ix.Verify(context.Background(), &index.VerifyOptions{SkipOrphans: true})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Fatalf("writer does not verify: %+v", v)
	}
	return v.Digest
}

// serveReplica serves the replica's index over HTTP on 127.0.0.1 as
// escurel serve does and returns its base URL.
func serveReplica(t *testing.T, ix *index.Index) string {
	t.Helper()
	srv, err := serve.New(ix, &serve.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

// search asks the server for query and returns the sources of the hits.
func search(client *http.Client, base, query string) ([]string, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "k": 5, "mode": "bm25"})
	resp, err := client.Post(base+"/v1/search", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	var out serve.SearchOutput
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	var srcs []string
	for _, h := range out.Hits {
		srcs = append(srcs, h.Source)
	}
	return srcs, nil
}

// TestReplicaFollowsWriter: a replica serves the published generation with
// the writer's digest, switches to the next one while a client searches it
// without pause (no failed search), and goes on serving once the writer is
// gone.
func TestReplicaFollowsWriter(t *testing.T) {
	for name, target := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			to := target(t)
			w := openWriter(t)
			for i := range 20 {
				ingest(t, w, fmt.Sprintf("notes/%02d.md", i), fmt.Sprintf("# Note %d\n\nThe heron fishes in pond %d.\n", i, i))
			}
			pub, err := replica.Publish(ctx, w, to, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := digest(t, w); pub.Digest != want || pub.Seq != 1 || !pub.Uploaded {
				t.Fatalf("publication %+v, want digest %s, seq 1, uploaded", pub, want)
			}

			r, err := replica.Open(ctx, to, t.TempDir(), &replica.Options{Poll: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			info, ok := r.Index().Replica()
			if !ok || info.Digest != pub.Digest || info.Generation != w.Generation() || info.Seq != 1 {
				t.Fatalf("replica serves %+v, want the writer's %s %s", info, w.Generation(), pub.Digest)
			}
			base := serveReplica(t, r.Index())

			// A client searches without pause through everything below.
			var searches, failures atomic.Int64
			var firstFailure atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			client := &http.Client{Timeout: 10 * time.Second}
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						srcs, err := search(client, base, "heron pond")
						searches.Add(1)
						if err == nil && len(srcs) == 0 {
							err = errors.New("no hits")
						}
						if err != nil {
							failures.Add(1)
							firstFailure.CompareAndSwap(nil, err.Error())
						}
					}
				}()
			}

			// The writer changes and publishes again; the replica follows.
			ingest(t, w, "notes/kingfisher.md", "# Kingfisher\n\nThe kingfisher dives past the heron.\n")
			pub2, err := replica.Publish(ctx, w, to, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pub2.Seq != 2 || pub2.Digest == pub.Digest {
				t.Fatalf("second publication %+v", pub2)
			}
			runCtx, cancel := context.WithCancel(ctx)
			runDone := make(chan struct{})
			go func() { r.Run(runCtx); close(runDone) }()
			defer func() { cancel(); <-runDone }()
			deadline := time.Now().Add(20 * time.Second)
			for {
				if info, _ := r.Index().Replica(); info.Digest == pub2.Digest {
					break
				}
				if time.Now().After(deadline) {
					info, _ := r.Index().Replica()
					t.Fatalf("replica did not switch to %s in 20 s: %+v", pub2.Digest, info)
				}
				time.Sleep(10 * time.Millisecond)
			}
			srcs, err := search(client, base, "kingfisher")
			if err != nil || len(srcs) != 1 || srcs[0] != "notes/kingfisher.md" {
				t.Fatalf("after the switch: %v, %v", srcs, err)
			}

			// The writer dies: the replica serves on, and its age grows.
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if srcs, err := search(client, base, "kingfisher"); err != nil || len(srcs) != 1 {
				t.Fatalf("after the writer closed: %v, %v", srcs, err)
			}
			close(stop)
			wg.Wait()
			if searches.Load() < 10 || failures.Load() != 0 {
				t.Fatalf("%d searches, %d failed (first: %v)", searches.Load(), failures.Load(), firstFailure.Load())
			}
			info, _ = r.Index().Replica()
			if info.Age(time.Now()) <= 0 || info.CheckedAt.IsZero() || info.CheckError != "" {
				t.Fatalf("replica info %+v", info)
			}
			t.Logf("%d searches, 0 failed, across the switch", searches.Load())

			// Writes are refused, by the library and by the HTTP API.
			if _, err := r.Index().Ingest(ctx, index.Input{Source: "x.md", Data: []byte("x")}); !errors.Is(err, index.ErrReadOnly) {
				t.Fatalf("ingest into a replica: %v, want ErrReadOnly", err)
			}
			if _, err := r.Index().Delete(ctx, "notes/01.md"); !errors.Is(err, index.ErrReadOnly) {
				t.Fatalf("delete from a replica: %v, want ErrReadOnly", err)
			}
		})
	}
}

// TestPublishUnchangedIsNoop: publishing a digest CURRENT names writes
// nothing.
func TestPublishUnchangedIsNoop(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Unchanged || p2.Seq != p1.Seq || p2.Digest != p1.Digest {
		t.Fatalf("republish: %+v after %+v", p2, p1)
	}
}

// TestPublishRefusesUnverified: a generation that does not verify against
// the blob store (a record lost) is not published, and nothing is written.
func TestPublishRefusesUnverified(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := index.Open(ctx, filepath.Join(dir, "ix"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	// Lose b's record from the blob store: the rows are no longer backed.
	if err := w.Blobs().DeleteRecord(ctx, docID(t, w, "b.md")); err != nil {
		t.Fatal(err)
	}
	to := "file://" + filepath.Join(dir, "published")
	_, err = replica.Publish(ctx, w, to, nil)
	var unv *index.UnverifiedError
	if !errors.As(err, &unv) || !errors.Is(err, index.ErrUnverified) {
		t.Fatalf("publish of an unverified generation: %v, want *UnverifiedError", err)
	}
	b := openBucket(t, to)
	if _, ok, err := replica.Latest(ctx, b); ok || err != nil {
		t.Fatalf("CURRENT after a refused publish: %v, %v", ok, err)
	}
	it := b.List(nil)
	if o, err := it.Next(ctx); err != io.EOF && !strings.HasPrefix(o.Key, ".publish") {
		t.Fatalf("an object after a refused publish: %v, %v", o.Key, err)
	}
	// No temporary copy is left in the writer's directory.
	if m, _ := filepath.Glob(filepath.Join(dir, "ix", "publish-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
}

func docID(t *testing.T, ix *index.Index, source string) string {
	t.Helper()
	docs, err := ix.Documents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for id, src := range docs {
		if src == source {
			return id
		}
	}
	t.Fatalf("no document %s", source)
	return ""
}

// TestReplicaRefusesDamagedDownload: a published file whose bytes changed
// in the bucket is refused by a new replica, and a running replica keeps
// serving what it has.
func TestReplicaRefusesDamagedDownload(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	p2, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := openBucket(t, to)
	key := p2.Object + "index.duckdb"
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := b.WriteAll(ctx, key, data, nil); err != nil {
		t.Fatal(err)
	}
	if switched, err := r.Poll(ctx); switched || err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("poll of a damaged publication: switched %v, %v", switched, err)
	}
	info, _ := r.Index().Replica()
	if info.Digest != p1.Digest || info.CheckError == "" {
		t.Fatalf("after a damaged download the replica serves %+v, want %s with the error", info, p1.Digest)
	}
	if hits, err := r.Index().Search(ctx, "alpha", &index.SearchOptions{K: 3}); err != nil || len(hits) != 1 {
		t.Fatalf("search after a refused switch: %v, %v", hits, err)
	}
	if _, err := replica.Open(ctx, to, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a new replica of a damaged publication: %v", err)
	}
}

// TestPointerRace: any number of publishers that read the same CURRENT
// race to create the next pointer; exactly one wins each round, on every
// target.
func TestPointerRace(t *testing.T) {
	for name, target := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			to := target(t)
			const publishers, rounds = 8, 10
			for round := range rounds {
				var won atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for p := range publishers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						b, err := replica.OpenBucket(ctx, to)
						if err != nil {
							t.Error(err)
							return
						}
						defer b.Close()
						<-start
						err = replica.CreatePointerForTest(ctx, b, to, int64(round+1), []byte(fmt.Sprintf(`{"publisher":%d}`, p)))
						switch {
						case err == nil:
							won.Add(1)
						case errors.Is(err, replica.ErrConflict):
						default:
							t.Error(err)
						}
					}()
				}
				close(start)
				wg.Wait()
				if won.Load() != 1 {
					t.Fatalf("round %d: %d publishers created the pointer, want exactly 1", round, won.Load())
				}
			}
		})
	}
}

// TestRepublishSameDigest: a digest published before (a delete undoing
// an ingest) is published again from a new copy, whose bytes differ from
// the first one's; a fresh replica must start from it, so each distinct
// file has an object of its own.
func TestRepublishSameDigest(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	if _, err := replica.Publish(ctx, w, to, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Delete(ctx, "b.md"); err != nil {
		t.Fatal(err)
	}
	p3, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Seq != 3 || p3.Digest != p1.Digest {
		t.Fatalf("third publication %+v, want seq 3 with the first's digest %s", p3, p1.Digest)
	}
	if p3.SHA256 != p1.SHA256 && p3.Object == p1.Object {
		t.Fatalf("two files (%s, %s) under one object %s", p1.SHA256[:16], p3.SHA256[:16], p3.Object)
	}
	if !strings.Contains(p3.Object, p3.SHA256[:16]) {
		t.Fatalf("object %s does not name the file's SHA-256 %s", p3.Object, p3.SHA256)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("a new replica of a republished digest: %v", err)
	}
	defer r.Close()
	if info, _ := r.Index().Replica(); info.Seq != 3 || info.Digest != p1.Digest {
		t.Fatalf("replica serves %+v", info)
	}
}

// TestReplicaRemembersRefusal: a replica that refused a damaged file does
// not download it again at every poll; it reports the refusal meanwhile.
func TestReplicaRemembersRefusal(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	if _, err := replica.Publish(ctx, w, to, nil); err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	p2, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := openBucket(t, to)
	key := p2.Object + "index.duckdb"
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := b.WriteAll(ctx, key, data, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Poll(ctx); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("first poll of a damaged file: %v", err)
	}
	// Gone from the bucket: a poll that downloads again fails otherwise.
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Poll(ctx); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("second poll of a refused file: %v, want the remembered refusal", err)
	}
	if info, _ := r.Index().Replica(); !strings.Contains(info.CheckError, "damaged") {
		t.Fatalf("replica info %+v, want the refusal reported", info)
	}
}

// TestReplicaWithBlobStoreRestarts: a replica given a blob store (for the
// text of documents) opens again on its directory after a restart.
func TestReplicaWithBlobStoreRestarts(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	if _, err := replica.Publish(ctx, w, to, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := &replica.Options{Index: &index.Options{BlobURL: "file://" + t.TempDir()}}
	for i := range 2 {
		r, err := replica.Open(ctx, to, dir, opts)
		if err != nil {
			t.Fatalf("open %d of a replica with a blob store: %v", i+1, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedHighestPointer: a damaged or foreign pointer above CURRENT
// (garbage, one over 64 KiB) blocks neither publishing nor replicas: they
// fall back to the highest valid pointer, report the damaged one, and a
// publish takes the next free number.
func TestDamagedHighestPointer(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := openBucket(t, to)
	if err := b.WriteAll(ctx, "current/00000000000000000002", []byte("not json"), nil); err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("a replica with a damaged pointer above CURRENT: %v", err)
	}
	defer r.Close()
	if info, _ := r.Index().Replica(); info.Seq != 1 || info.Digest != p1.Digest || !strings.Contains(info.CheckError, "00000000000000000002") {
		t.Fatalf("replica serves %+v, want publish 1 and the damaged pointer reported", info)
	}
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	p3, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatalf("publish above a damaged pointer: %v", err)
	}
	if p3.Seq != 3 {
		t.Fatalf("publish above a damaged pointer 2: seq %d, want 3", p3.Seq)
	}
	// A valid pointer padded past 64 KiB is not read whole: damaged too.
	big, _ := json.Marshal(p3.Pointer)
	big = bytes.Replace(big, []byte(`"seq":3`), []byte(`"seq":4`), 1)
	big = append(big, bytes.Repeat([]byte(" "), 70<<10)...)
	if err := b.WriteAll(ctx, "current/00000000000000000004", big, nil); err != nil {
		t.Fatal(err)
	}
	if switched, err := r.Poll(ctx); !switched || err == nil || !strings.Contains(err.Error(), "00000000000000000004") {
		t.Fatalf("poll: switched %v, %v; want a switch to publish 3 and pointer 4 reported", switched, err)
	}
	if info, _ := r.Index().Replica(); info.Seq != 3 || info.Digest != p3.Digest {
		t.Fatalf("replica serves %+v, want publish 3", info)
	}
	// A pointer whose fields are wrong says which, not "(<nil>)".
	bad, _ := json.Marshal(map[string]any{"seq": 5, "digest": "", "object": "elsewhere/"})
	if err := b.WriteAll(ctx, "current/00000000000000000005", bad, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Poll(ctx); err == nil || strings.Contains(err.Error(), "<nil>") || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("poll of a pointer without a digest: %v", err)
	}
}

// TestRepublishedDigestAge: CURRENT moving to the digest the replica
// already serves (a later publish of the same rows) updates its publish
// number and age without a download; a pointer below the served one (a
// wiped bucket) is reported, not ignored.
func TestRepublishedDigestAge(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *replica.PublishOptions {
		return &replica.PublishOptions{Now: func() time.Time { return t0.Add(d) }}
	}
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	if _, err := replica.Publish(ctx, w, to, at(0)); err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	if _, err := replica.Publish(ctx, w, to, at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Delete(ctx, "b.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Publish(ctx, w, to, at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if info, _ := r.Index().Replica(); info.Seq != 3 || !info.PublishedAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("after a republish of the served digest the replica says %+v, want publish 3 at %v", info, t0.Add(2*time.Hour))
	}
	// The bucket is wiped and published into anew: publish 1 < 3.
	b := openBucket(t, to)
	for seq := 1; seq <= 3; seq++ {
		if err := b.Delete(ctx, fmt.Sprintf("current/%020d", seq)); err != nil {
			t.Fatal(err)
		}
	}
	ingest(t, w, "c.md", "# C\n\ngamma\n")
	if p, err := replica.Publish(ctx, w, to, at(3*time.Hour)); err != nil || p.Seq != 1 {
		t.Fatalf("publish into a wiped bucket: %+v, %v", p, err)
	}
	if switched, err := r.Poll(ctx); switched || err == nil || !strings.Contains(err.Error(), "lower") {
		t.Fatalf("poll of a pointer below the served one: switched %v, %v", switched, err)
	}
	if info, _ := r.Index().Replica(); info.Seq != 3 || info.CheckError == "" {
		t.Fatalf("replica says %+v, want publish 3 with the error", info)
	}
}

// TestPollDoesNotList: a poll reads the next pointer by name and lists
// the pointers only when the served one is gone; Open lists once.
func TestPollDoesNotList(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	direct := srv.Bucket(t, "published", "escurel/")
	target, _ := url.Parse(srv.Endpoint)
	var lists atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.URL.Query().Has("list-type") || req.URL.Query().Has("delimiter") {
			lists.Add(1)
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(rw, req)
	}))
	defer proxy.Close()
	to := strings.Replace(direct, url.QueryEscape(srv.Endpoint), url.QueryEscape(proxy.URL), 1)
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	if _, err := replica.Publish(ctx, w, direct, nil); err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(ctx, to, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opened := lists.Load()
	for range 5 {
		if _, err := r.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ingest(t, w, "b.md", "# B\n\nbeta\n")
	p2, err := replica.Publish(ctx, w, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if switched, err := r.Poll(ctx); !switched || err != nil {
		t.Fatalf("poll after publish 2: %v, %v", switched, err)
	}
	if info, _ := r.Index().Replica(); info.Seq != p2.Seq {
		t.Fatalf("replica serves %+v", info)
	}
	if n := lists.Load() - opened; n != 0 {
		t.Fatalf("6 polls listed the pointers %d times, want 0", n)
	}
}
