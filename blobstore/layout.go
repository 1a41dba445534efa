package blobstore

// Which layout a store is in: the LAYOUT object, written when a new store
// is first opened (packs, unless OpenOptions.Loose), or by UsePacks.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// layoutKey is the object that says a store's layout.
const layoutKey = "LAYOUT"

// The contents of layoutKey: the pack layout, and the loose layout of a
// store created with OpenOptions.Loose. A store without layoutKey that
// holds objects is in the loose layout (written before layouts existed).
const (
	layoutPacks = "packs/1\n"
	layoutLoose = "loose/1\n"
)

// OpenOptions are OpenWith's options; the zero value is Open's.
type OpenOptions struct {
	// Loose gives a new store (a bucket holding no blob, record or pack)
	// the loose layout, one object per blob and per record, instead of
	// the pack layout. It is recorded in the store (the LAYOUT object),
	// so later opens keep it without the option. An existing store keeps
	// its layout either way; Loose on a store in the pack layout is an
	// error (there is no way back from packs).
	Loose bool
}

// ErrLayout is returned, wrapped, when OpenOptions.Loose names a store in
// the pack layout. Match it with errors.Is.
var ErrLayout = errors.New("blobstore: the store is in the pack layout")

// UsePacks puts the store at urlstr (opened as Open does) in the pack
// layout, durably: from then on every Store opened on it writes a batch's
// blobs, records and record removals as one pack object
// (packs/<seq>-<random>.pack), and reads both packs and the loose
// objects written before (blobs/sha256/<hex>, documents/<doc_id>.json),
// which keep working as they are (Pack moves them into packs). A blob of
// packLooseMin bytes or more is still written loose. There is no way back:
// a store that has packs must be read with them. Calling it on a store
// already in the pack layout does nothing. A new store is in the pack
// layout already, unless opened with OpenOptions.Loose.
//
// Every other Store on the bucket must be closed (for an index: no
// process has it open, its LOCK free): a Store opened before keeps the
// loose layout and writes loose records, which any packed entry of the
// same document then hides, newer or not.
func UsePacks(ctx context.Context, urlstr string) error {
	s, err := Open(ctx, urlstr)
	if err != nil {
		return err
	}
	defer s.Close()
	if s.px != nil {
		return nil
	}
	if s.localDir != "" {
		if err := mkdirDurable(s.localDir, "packs"); err != nil {
			return fmt.Errorf("use packs in %s: %w", s.Redacted(), err)
		}
	}
	if err := s.write(ctx, layoutKey, []byte(layoutPacks), "text/plain"); err != nil {
		return fmt.Errorf("use packs in %s: %w", s.Redacted(), scrubError(err, urlstr))
	}
	return nil
}

// Packed reports whether the store is in the pack layout.
func (s *Store) Packed() bool { return s.px != nil }

// Remote reports whether the store is an object store (s3:// and other
// buckets), where each object read, written or deleted is a network
// round trip; false for file:// and mem://.
func (s *Store) Remote() bool { return s.remote }

// SmallPacks returns how many packs smaller than below bytes the store
// holds, as this Store knows them (those loaded, and those it wrote
// since): the packs of single writes and of removals' tombstones, each an
// object that every Sync lists and every open reads (Repack's FoldBelow
// folds them). 0 in the loose layout, or before the packs are loaded.
func (s *Store) SmallPacks(below int64) int {
	if s.px == nil {
		return 0
	}
	x := s.px
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for _, p := range x.packs {
		if !p.gone && p.size < below {
			n++
		}
	}
	return n
}

// openLayout reads the store's layout object, writing it first on a new
// store (as opts say); in the pack layout it sets s.px and notes whether
// loose objects exist.
func (s *Store) openLayout(ctx context.Context, opts *OpenOptions) error {
	data, err := s.bucket.ReadAll(ctx, layoutKey)
	if gcerrors.Code(err) == gcerrors.NotFound {
		data, err = s.newLayout(ctx, opts)
	}
	if err != nil {
		return err
	}
	switch string(data) {
	case layoutLoose:
		return nil
	case "":
		// An older store: loose. A pack without the layout object would
		// be read as nothing: fail closed.
		packs, err := s.anyObject(ctx, "packs/")
		if err != nil {
			return err
		}
		if packs {
			return fmt.Errorf("packs/ holds objects but %s is missing: put it back (%q) or restore the store", layoutKey, layoutPacks)
		}
		return nil
	case layoutPacks:
	default:
		return fmt.Errorf("%s holds %q: not a layout this version reads (%q or %q)", layoutKey, data, layoutPacks, layoutLoose)
	}
	if opts != nil && opts.Loose {
		return fmt.Errorf("loose layout asked for: %w (a new store only gets the loose layout)", ErrLayout)
	}
	s.px = newPackIndex()
	if s.localDir != "" {
		if err := mkdirDurable(s.localDir, "packs"); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		prefix string
		flag   *bool
	}{{"blobs/sha256/", &s.looseBlobs}, {"documents/", &s.looseRecs}} {
		any, err := s.anyObject(ctx, p.prefix)
		if err != nil {
			return err
		}
		*p.flag = any
	}
	return nil
}

// newLayout decides the layout of a store without a layout object: none
// ("") when it holds objects (an older, loose store); else the layout
// opts ask for, written durably and only if no other process wrote one
// first (whose layout is then the store's).
func (s *Store) newLayout(ctx context.Context, opts *OpenOptions) ([]byte, error) {
	for _, prefix := range []string{"blobs/sha256/", "documents/", "packs/"} {
		any, err := s.anyObject(ctx, prefix)
		if err != nil {
			return nil, err
		}
		if any {
			return nil, nil
		}
	}
	want := []byte(layoutPacks)
	if opts != nil && opts.Loose {
		want = []byte(layoutLoose)
	}
	created, err := s.createOnce(ctx, layoutKey, want)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", layoutKey, err)
	}
	if created {
		return want, nil
	}
	data, err := s.bucket.ReadAll(ctx, layoutKey)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", layoutKey, err)
	}
	return data, nil
}

// createOnce stores data at key durably unless an object is there
// already (created false): on file:// by a hard link of a synced
// temporary file (link(2) fails when the name exists, across processes),
// elsewhere by a conditional write (WriterOptions.IfNotExist).
func (s *Store) createOnce(ctx context.Context, key string, data []byte) (created bool, err error) {
	if s.localDir != "" {
		final := s.localPath(key)
		tmp := final + "." + randSuffix() + ".tmp"
		tempStarted(tmp)
		defer removeTemp(tmp)
		if err := writeNewFile(tmp, data); err != nil {
			return false, err
		}
		if err := os.Link(tmp, final); errors.Is(err, os.ErrExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return true, syncDir(filepath.Dir(final))
	}
	w, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "text/plain", IfNotExist: true})
	if err != nil {
		return false, err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return false, err
	}
	if err := w.Close(); gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}
