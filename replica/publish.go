package replica

// Publish: the writer's side (see the package doc).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/hooks"
)

// PublishOptions configure Publish.
type PublishOptions struct {
	// Now is the clock of PublishedAt. Default time.Now.
	Now func() time.Time
}

// Publication is what Publish did.
type Publication struct {
	Pointer
	// Unchanged is true when CURRENT already named this digest: nothing
	// was written.
	Unchanged bool `json:"unchanged"`
	// Uploaded is false when the generation's objects were already there
	// (a republish after a rollback, or after a lost race).
	Uploaded bool `json:"uploaded"`
}

// Publish publishes the live generation of ix to the bucket at urlstr: it
// reads CURRENT, copies the live generation with writes held back (the
// write-ahead log folded in) and verifies the copied rows against the
// blob store (writes go on meanwhile), uploads the copy, its full-text
// image (when it could be saved: a cache) and its manifest as immutable objects, and creates the next pointer
// conditionally. A generation that does not verify is
// refused (index.ErrUnverified) with nothing written; one whose digest
// CURRENT already names, published by this executable (Build), is a no-op
// (Unchanged). Another publisher moving
// CURRENT meanwhile fails it with a *ConflictError (ErrConflict).
func Publish(ctx context.Context, ix *index.Index, urlstr string, opts *PublishOptions) (*Publication, error) {
	now := time.Now
	if opts != nil && opts.Now != nil {
		now = opts.Now
	}
	b, err := OpenBucket(ctx, urlstr)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	// CURRENT is the highest valid pointer; the next number is above
	// every pointer, a damaged one included (its key is taken).
	seqs, err := pointers(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
	}
	prev, _, err := highestValid(ctx, b, seqs)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
	}
	hasPrev := prev != nil
	// A crash's copy is a .tmp the cleaner removes; while this one is in
	// use, a gc's cleaning leaves it (the verify runs without the writer
	// lock, which a gc takes).
	dir := hooks.Dir(ix)
	f, release, err := dir.CreateTemp("publish-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
		release()
	}()
	img, releaseImg, err := dir.CreateTemp("publish-*.fts-image.tmp")
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	defer func() {
		img.Close()
		os.Remove(img.Name())
		releaseImg()
	}()
	vv, err := hooks.Snapshot(ctx, ix, f.Name(), img.Name())
	if err != nil {
		return nil, err
	}
	v := vv.(*index.Verification)
	// A cleaning that removed the temporary files all the same (another
	// process's, by hand) would have made Snapshot write new files under
	// their names, which f and img do not read.
	for _, t := range []*os.File{f, img} {
		if err := stillNamed(t); err != nil {
			return nil, fmt.Errorf("publish: %w: nothing was published (publish again)", err)
		}
	}
	p := Pointer{Generation: v.Generation, Digest: v.Digest,
		Documents: v.Documents, Blocks: v.Blocks, EscurelVersion: index.Version, SchemaVersion: index.SchemaVersion,
		Build: buildID()}
	// The same digest published by the same build: nothing to do. By
	// another (an upgraded publisher, one before Build and the image),
	// published again, so that replicas that open from now on trust it
	// and open from its image.
	if hasPrev && prev.Digest == v.Digest && prev.Build == p.Build {
		return &Publication{Pointer: *prev, Unchanged: true}, nil
	}
	h := sha256.New()
	if p.Bytes, err = io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("publish: read %s: %w", f.Name(), err)
	}
	if p.Bytes == 0 {
		return nil, fmt.Errorf("publish: the copy %s is empty: nothing was published", f.Name())
	}
	p.SHA256 = hex.EncodeToString(h.Sum(nil))
	p.Object = fmt.Sprintf("%s%s-%s-%s/", genPrefix, v.Generation, v.Digest, p.SHA256[:16])
	// The image, written by Snapshot (empty: none); img's descriptor was
	// opened before, and Snapshot wrote the same file through another.
	h.Reset()
	if p.ImageBytes, err = io.Copy(h, img); err != nil {
		return nil, fmt.Errorf("publish: read %s: %w", img.Name(), err)
	}
	if p.ImageBytes > 0 {
		p.ImageSHA256 = hex.EncodeToString(h.Sum(nil))
	}
	out := &Publication{}
	exists, err := b.Exists(ctx, p.Object+manifestName)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
	}
	if exists {
		// The same bytes, published before: the manifest must say so.
		var m Pointer
		data, err := readSmall(ctx, b, p.Object+manifestName)
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil || m.SHA256 != p.SHA256 || m.Bytes != p.Bytes {
			return nil, fmt.Errorf("publish to %s: %s%s names another file (SHA-256 %q, %d bytes) than this publish's (%s, %d bytes) (%v): the published URL is damaged",
				blobstore.Redact(urlstr), p.Object, manifestName, m.SHA256, m.Bytes, p.SHA256, p.Bytes, err)
		}
		// Its image, or none, is the one published with it (the file is
		// the same, and the image a cache); a manifest whose image
		// fields do not check names none.
		p.ImageBytes, p.ImageSHA256 = 0, ""
		if len(m.ImageSHA256) == 64 && m.ImageBytes > 0 {
			p.ImageBytes, p.ImageSHA256 = m.ImageBytes, m.ImageSHA256
		}
	} else {
		// The file first, then the manifest: a manifest names a complete
		// file. Both are immutable, and their key names the file's hash:
		// a file another publisher (or a crash before its manifest) left
		// there has these bytes.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		if err := putNew(ctx, b, p.Object+fileName, f); err != nil {
			return nil, fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
		}
		if p.ImageBytes > 0 {
			// Its key names its hash, as the file's names the file's:
			// two publishers of the same file may hold images that
			// differ byte for byte (the same rows, loaded in another
			// order), each immutable under its own key.
			if _, err := img.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			if err := putNew(ctx, b, imageKey(&p), img); err != nil {
				return nil, fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
			}
		}
		// The manifest's time is its upload's; the pointer's, set below,
		// the publish's.
		p.PublishedAt = now().UTC()
		m, _ := json.MarshalIndent(p, "", "  ")
		if err := putNew(ctx, b, p.Object+manifestName, strings.NewReader(string(m))); err != nil {
			return nil, fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
		}
		out.Uploaded = true
	}
	p.Seq = 1
	if len(seqs) > 0 {
		p.Seq = seqs[0] + 1
	}
	p.PublishedAt = now().UTC()
	data, _ := json.MarshalIndent(p, "", "  ")
	if err := createPointer(ctx, b, urlstr, p.Seq, data); err != nil {
		return nil, err
	}
	out.Pointer = p
	return out, nil
}

// stillNamed checks that f is the file its name names now.
func stillNamed(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	now, err := os.Stat(f.Name())
	if err != nil || !os.SameFile(fi, now) {
		return fmt.Errorf("the temporary file %s was removed or replaced while the snapshot was written (a gc of the index at the same time?)", f.Name())
	}
	return nil
}

// buildID identifies this executable: "sha256:" and the first 32 hex
// digits of the SHA-256 of its bytes, read once (a 156 MB binary: about
// 0.1 s); "" when it cannot be read, which makes a replica compute every
// digest and a publisher name no build. On Linux it reads /proc/self/exe,
// the file this process runs even after its path was given a new binary
// (an upgrade in place); elsewhere the file at os.Executable's path.
var buildID = sync.OnceValue(func() string {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		path, perr := os.Executable()
		if perr != nil {
			return ""
		}
		if f, err = os.Open(path); err != nil {
			return ""
		}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
})

// imageKey is the key of p's full-text image; p has one (ImageSHA256).
func imageKey(p *Pointer) string { return p.Object + imagePrefix + p.ImageSHA256[:16] }

// putNew writes an immutable object unless it exists (IfNotExist); one
// that exists already is left as it is.
func putNew(ctx context.Context, b *blob.Bucket, key string, r io.Reader) error {
	w, err := b.NewWriter(ctx, key, &blob.WriterOptions{IfNotExist: true, ContentType: "application/octet-stream"})
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil && gcerrors.Code(err) != gcerrors.FailedPrecondition {
		return err
	}
	return nil
}

// createPointer creates current/<seq> only if no one has: exactly one of
// any number of concurrent callers with the same seq succeeds, the others
// get a *ConflictError.
func createPointer(ctx context.Context, b *blob.Bucket, urlstr string, seq int64, data []byte) error {
	key := pointerKey(seq)
	conflict := &ConflictError{To: blobstore.Redact(urlstr), Seq: seq}
	// fileblob checks IfNotExist with a stat before its rename, which two
	// writers may pass together: on file:// an flock beside the pointers
	// makes the check and the write one step, across processes too.
	if unlock, err := lockFileTarget(urlstr); err != nil {
		return fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
	} else if unlock != nil {
		defer unlock()
		if ok, err := b.Exists(ctx, key); err != nil {
			return fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
		} else if ok {
			return conflict
		}
	}
	err := b.WriteAll(ctx, key, data, &blob.WriterOptions{IfNotExist: true, ContentType: "application/json"})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return conflict
	}
	if err != nil {
		return fmt.Errorf("publish to %s: %w", blobstore.Redact(urlstr), err)
	}
	return nil
}

// lockFileTarget takes an exclusive flock on DIR/.publish.lock when
// urlstr is file://DIR, and returns its release; nil for other schemes.
func lockFileTarget(urlstr string) (func(), error) {
	u, err := url.Parse(urlstr)
	if err != nil || u.Scheme != "file" {
		return nil, err
	}
	dir := u.Path
	if u.Host == "." {
		dir = "." + dir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return flock(filepath.Join(dir, ".publish.lock"))
}
