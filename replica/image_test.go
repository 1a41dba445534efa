package replica_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/replica"
)

// logLines is a slog handler's output, safe for the replica's goroutines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// last returns the attributes of the last line whose message is msg (nil
// when there is none).
func (l *logLines) last(t *testing.T, msg string) map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var found map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			found = m
		}
	}
	return found
}

// TestReplicaOpensFromImage: a publish uploads the full-text index's image
// beside the file, and a replica's open and switches load the full-text
// index from it (on every target); a damaged image is passed over with a
// warning, and the generation is served from its tables, with the same
// hits. Without the image (a publisher before it, or one removed) a
// replica's log says fts_image=false, which is what each check here
// reads.
func TestReplicaOpensFromImage(t *testing.T) {
	for name, target := range targets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			to := target(t)
			w := openWriter(t)
			ingest(t, w, "a.md", "# A\n\nalpha particles\n")
			ingest(t, w, "b.md", "# B\n\nbeta decay\n")
			p1, err := replica.Publish(ctx, w, to, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p1.ImageBytes <= 0 || len(p1.ImageSHA256) != 64 {
				t.Fatalf("publish: image %d bytes, SHA-256 %q; want one", p1.ImageBytes, p1.ImageSHA256)
			}
			b := openBucket(t, to)
			var manifest replica.Pointer
			if data, err := b.ReadAll(ctx, p1.Object+"manifest.json"); err != nil || json.Unmarshal(data, &manifest) != nil || manifest.PublishedAt.IsZero() || manifest.ImageSHA256 != p1.ImageSHA256 {
				t.Fatalf("manifest: %+v, %v; want its upload time and the image", manifest, err)
			}
			imgKey := p1.Object + "fts-image-" + p1.ImageSHA256[:16]
			if attrs, err := b.Attributes(ctx, imgKey); err != nil || attrs.Size != p1.ImageBytes {
				t.Fatalf("image object %s: %v, %v", imgKey, attrs, err)
			}
			var logs logLines
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			r, err := replica.Open(ctx, to, t.TempDir(), &replica.Options{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := logs.last(t, "replica serving"); got == nil || got["fts_image"] != true {
				t.Fatalf("open: %v, want fts_image true", got)
			}
			if hits, err := r.Index().Search(ctx, "beta", &index.SearchOptions{K: 3}); err != nil || len(hits) != 1 || hits[0].Source != "b.md" {
				t.Fatalf("search of the replica: %v, %v", hits, err)
			}

			ingest(t, w, "c.md", "# C\n\ngamma rays\n")
			if _, err := replica.Publish(ctx, w, to, nil); err != nil {
				t.Fatal(err)
			}
			if switched, err := r.Poll(ctx); !switched || err != nil {
				t.Fatalf("poll: switched %v, %v", switched, err)
			}
			if got := logs.last(t, "replica switched"); got == nil || got["fts_image"] != true {
				t.Fatalf("switch: %v, want fts_image true", got)
			}
			if hits, err := r.Index().Search(ctx, "gamma", &index.SearchOptions{K: 3}); err != nil || len(hits) != 1 || hits[0].Source != "c.md" {
				t.Fatalf("search after the switch: %v, %v", hits, err)
			}

			// A damaged image: the switch happens, from the tables.
			ingest(t, w, "d.md", "# D\n\ndelta waves\n")
			p3, err := replica.Publish(ctx, w, to, nil)
			if err != nil {
				t.Fatal(err)
			}
			key := p3.Object + "fts-image-" + p3.ImageSHA256[:16]
			data, err := b.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xff
			if err := b.WriteAll(ctx, key, data, nil); err != nil {
				t.Fatal(err)
			}
			if switched, err := r.Poll(ctx); !switched || err != nil {
				t.Fatalf("poll with a damaged image: switched %v, %v; want a switch", switched, err)
			}
			if got := logs.last(t, "replica switched"); got == nil || got["fts_image"] != false {
				t.Fatalf("switch with a damaged image: %v, want fts_image false", got)
			}
			if warn := logs.last(t, "replica: the full-text image was not downloaded; the generation loads its full-text index from its tables instead (slower)"); warn == nil || !strings.Contains(warn["err"].(string), "damaged") {
				t.Fatalf("no warning for the damaged image: %v", warn)
			}
			for q, want := range map[string]string{"alpha": "a.md", "delta": "d.md"} {
				if hits, err := r.Index().Search(ctx, q, &index.SearchOptions{K: 3}); err != nil || len(hits) != 1 || hits[0].Source != want {
					t.Fatalf("search %q from the tables: %v, %v", q, hits, err)
				}
			}
		})
	}
}

// TestPointerImageFields: a pointer without any image field (a publisher
// before the image) and one whose image fields do not check are both
// served from the tables: the image is a cache, and its fields are
// dropped, not the pointer.
func TestPointerImageFields(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := openBucket(t, to)
	old := p1.Pointer
	old.Seq, old.ImageBytes, old.ImageSHA256 = 2, 0, ""
	data, _ := json.Marshal(old)
	if bytes.Contains(data, []byte("image")) {
		t.Fatalf("a pointer without an image still names one: %s", data)
	}
	putPointer(t, b, to, old)
	var logs logLines
	r, err := replica.Open(ctx, to, t.TempDir(), &replica.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := logs.last(t, "replica serving"); got == nil || got["fts_image"] != false || got["seq"] != float64(2) {
		t.Fatalf("open: %v, want publish 2 (no image) and fts_image false", got)
	}
	bad := p1.Pointer
	bad.Seq, bad.ImageBytes = 3, 0
	putPointer(t, b, to, bad)
	if _, err := r.Poll(ctx); err != nil {
		t.Fatalf("poll of a pointer whose image has no size: %v", err)
	}
	if info, _ := r.Index().Replica(); info.Seq != 3 {
		t.Fatalf("replica serves %+v, want publish 3 (the same digest: no switch)", info)
	}
	r2, err := replica.Open(ctx, to, t.TempDir(), &replica.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if got := logs.last(t, "replica serving"); got == nil || got["fts_image"] != false || got["seq"] != float64(3) {
		t.Fatalf("open of publish 3: %v, want fts_image false", got)
	}
	if hits, err := r2.Index().Search(ctx, "alpha", &index.SearchOptions{K: 3}); err != nil || len(hits) != 1 {
		t.Fatalf("search: %v, %v", hits, err)
	}
}

// TestReplicaDigestRule: a replica of a publisher of its own executable
// (Pointer.Build) trusts the file's SHA-256 for the digest and does not
// compute it, at open and at a switch; one of a pointer of another build
// or none, or with Options.CheckDigest, computes it from the rows and
// refuses a file whose rows are not the published digest's
// (index.ErrDigestMismatch).
func TestReplicaDigestRule(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p1.Build, "sha256:") || len(p1.Build) != len("sha256:")+32 {
		t.Fatalf("publish names build %q", p1.Build)
	}
	open := func(check bool) (*replica.Replica, *logLines, error) {
		t.Helper()
		var logs logLines
		r, err := replica.Open(ctx, to, t.TempDir(), &replica.Options{CheckDigest: check, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err == nil {
			t.Cleanup(func() { r.Close() })
		}
		return r, &logs, err
	}
	trusting, tlogs, err := open(false)
	if err != nil {
		t.Fatal(err)
	}
	if got := tlogs.last(t, "replica serving"); got == nil || got["digest_computed"] != false {
		t.Fatalf("a replica of its own build: %v, want digest_computed false", got)
	}
	checking, clogs, err := open(true)
	if err != nil {
		t.Fatal(err)
	}
	if got := clogs.last(t, "replica serving"); got == nil || got["digest_computed"] != true {
		t.Fatalf("a replica with CheckDigest: %v, want digest_computed true", got)
	}

	b := openBucket(t, to)
	wrong := strings.Repeat("0", len(p1.Digest))
	point := func(seq int64, build string) {
		t.Helper()
		q := p1.Pointer
		q.Seq, q.Build, q.Digest = seq, build, wrong
		putPointer(t, b, to, q)
	}
	// Pointers 2 and 3: p1's file under a digest its rows do not have,
	// from another build and from a publisher that names none: every
	// replica computes the digest and refuses them.
	// In order: a poll reads the pointers above the served one by name.
	for _, c := range []struct {
		seq   int64
		build string
	}{{2, "sha256:00000000000000000000000000000000"}, {3, ""}} {
		seq, build := c.seq, c.build
		point(seq, build)
		for name, r := range map[string]*replica.Replica{"trusting": trusting, "checking": checking} {
			if switched, err := r.Poll(ctx); switched || !errors.Is(err, index.ErrDigestMismatch) {
				t.Fatalf("%s replica, pointer %d (build %q) with a wrong digest: switched %v, %v", name, seq, build, switched, err)
			}
			if info, _ := r.Index().Replica(); info.Seq != 1 || info.Digest != p1.Digest {
				t.Fatalf("%s replica serves %+v after the refusal", name, info)
			}
		}
		// A new replica's open computes it as well.
		if _, _, err := open(false); !errors.Is(err, index.ErrDigestMismatch) {
			t.Fatalf("open of pointer %d (build %q) with a wrong digest: %v", seq, build, err)
		}
	}
	// Pointer 4: the same under this build. The checking replica and a
	// new one with CheckDigest refuse it; the trusting one takes the
	// pointer's word, which is what trusting the same executable means
	// (a publisher of it names the digest it verified).
	point(4, p1.Build)
	if switched, err := checking.Poll(ctx); switched || !errors.Is(err, index.ErrDigestMismatch) {
		t.Fatalf("checking replica, pointer 4: switched %v, %v", switched, err)
	}
	if _, _, err := open(true); !errors.Is(err, index.ErrDigestMismatch) {
		t.Fatalf("open with CheckDigest of pointer 4: %v", err)
	}
	if switched, err := trusting.Poll(ctx); !switched || err != nil {
		t.Fatalf("trusting replica, pointer 4: switched %v, %v", switched, err)
	}
	if got := tlogs.last(t, "replica switched"); got == nil || got["digest_computed"] != false {
		t.Fatalf("trusting replica's switch: %v", got)
	}
}

// TestRepublishForNewBuild: the same digest, published by a build other
// than the one CURRENT names (an upgraded publisher; one before Build), is
// published again, so that replicas opening from now on trust it; by the
// same build it is a no-op.
func TestRepublishForNewBuild(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	w := openWriter(t)
	ingest(t, w, "a.md", "# A\n\nalpha\n")
	p1, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := openBucket(t, to)
	old := p1.Pointer
	old.Seq, old.Build, old.ImageBytes, old.ImageSHA256 = 2, "", 0, ""
	putPointer(t, b, to, old)
	p3, err := replica.Publish(ctx, w, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Unchanged || p3.Seq != 3 || p3.Digest != p1.Digest || p3.Build != p1.Build || p3.ImageBytes == 0 {
		t.Fatalf("publish over an old build's pointer of the same digest: %+v", p3)
	}
	if again, err := replica.Publish(ctx, w, to, nil); err != nil || !again.Unchanged || again.Seq != 3 {
		t.Fatalf("publish again by the same build: %+v, %v", again, err)
	}
}

// TestReplicaRefusesWritersDirectory: a replica opened on a writer's
// directory (its blob store in blobs/, or recorded in BLOBS) is refused
// before it touches anything: the writer's live generation and its
// documents stay as they were.
func TestReplicaRefusesWritersDirectory(t *testing.T) {
	ctx := context.Background()
	to := "file://" + t.TempDir()
	for name, opts := range map[string]*index.Options{
		"blobs/": nil,
		"BLOBS":  {BlobURL: "file://" + t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := index.Open(ctx, dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ingest(t, w, "a.md", "# A\n\nalpha\n")
			if _, err := replica.Publish(ctx, w, to, nil); err != nil {
				t.Fatal(err)
			}
			ingest(t, w, "b.md", "# B\n\nbeta, not published\n")
			gen := w.Generation()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if r, err := replica.Open(ctx, to, dir, nil); err == nil || !strings.Contains(err.Error(), "a writer's index") {
				if r != nil {
					r.Close()
				}
				t.Fatalf("a replica on the writer's directory: %v; want it refused", err)
			}
			w, err = index.Open(ctx, dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if hits, err := w.Search(ctx, "beta", &index.SearchOptions{K: 3}); err != nil || len(hits) != 1 || w.Generation() != gen {
				t.Fatalf("the writer after the refusal: %v, %v, generation %s (was %s)", hits, err, w.Generation(), gen)
			}
		})
	}
}

// TestReplicaOfMissingDirectory: a replica of a file:// URL whose
// directory does not exist says nothing is published and creates nothing
// there (OpenBucket, for a publisher, would create it).
func TestReplicaOfMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "never-published")
	_, err := replica.Open(context.Background(), "file://"+missing, t.TempDir(), nil)
	if !errors.Is(err, replica.ErrNothingPublished) {
		t.Fatalf("a replica of a missing directory: %v; want ErrNothingPublished", err)
	}
	if _, serr := os.Stat(missing); !os.IsNotExist(serr) {
		t.Fatalf("the missing directory after the refusal: %v", serr)
	}
}

// openBucket opens the published bucket at to, closed at the test's end.
func openBucket(t *testing.T, to string) *blob.Bucket {
	t.Helper()
	b, err := replica.OpenBucket(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// putPointer writes p as the pointer of publish p.Seq, as a publisher
// would (conditionally: it must not exist).
func putPointer(t *testing.T, b *blob.Bucket, to string, p replica.Pointer) {
	t.Helper()
	data, _ := json.Marshal(p)
	if err := replica.CreatePointerForTest(context.Background(), b, to, p.Seq, data); err != nil {
		t.Fatal(err)
	}
}
