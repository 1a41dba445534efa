package blobstore

// Converting a loose store into the pack layout.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
)

// convertPackBytes is the size from which Pack closes a pack and starts
// the next: few packs (each one footer to read at open), none too large
// to rewrite (Repack).
const convertPackBytes = 32 << 20

// PackResult is what Pack did.
type PackResult struct {
	Blobs       int   `json:"blobs"`        // loose blobs written into packs
	Records     int   `json:"records"`      // loose records written into packs
	Packs       int   `json:"packs"`        // packs written
	PackBytes   int64 `json:"pack_bytes"`   // their size
	Removed     int   `json:"removed"`      // loose objects removed (packed now, or hidden by a packed record)
	KeptLoose   int   `json:"kept_loose"`   // loose blobs of packLooseMin (4 MiB) or more, which stay loose
	WasPacked   bool  `json:"was_packed"`   // the store was in the pack layout already
	LooseBefore int64 `json:"loose_before"` // bytes of the loose objects found
}

// Pack converts the store at urlstr into the pack layout and moves its
// loose objects into packs: UsePacks, then every loose blob under 4 MiB
// and every loose record that no pack hides is written into packs of
// about 32 MiB, each durable before the next; once all are, the loose
// objects they hold (and the loose records a pack hides) are removed, and
// the removals made durable. A crash at any point leaves a store that
// reads the same (a loose object and its packed copy hold the same bytes,
// and a packed record hides its loose one); running Pack again finishes
// the work, and on a store with no loose object left it writes nothing.
//
// It stops, before removing any loose object, when a loose record is
// damaged or a loose blob's bytes do not hash to its id (ErrCorrupt,
// naming them; escurel verify lists them, a rebuild restores records):
// packed, they would stay damaged under another name. The packs written
// before it found them hold copies of intact objects, which change no
// read and which the next Pack reuses. Every other Store on the bucket must be closed, as
// for UsePacks (for an index: its LOCK held by the caller).
func Pack(ctx context.Context, urlstr string) (*PackResult, error) {
	res := &PackResult{}
	s, err := Open(ctx, urlstr)
	if err != nil {
		return res, err
	}
	res.WasPacked = s.px != nil
	if !res.WasPacked {
		s.Close()
		if err := UsePacks(ctx, urlstr); err != nil {
			return res, err
		}
		if s, err = Open(ctx, urlstr); err != nil {
			return res, err
		}
	}
	defer s.Close()
	if err := s.packLoose(ctx, res); err != nil {
		return res, fmt.Errorf("pack blob store %s: %w", s.Redacted(), err)
	}
	return res, nil
}

// packLoose is Pack on a store in the pack layout.
func (s *Store) packLoose(ctx context.Context, res *PackResult) error {
	if err := s.loadPacks(ctx, true); err != nil {
		return err
	}
	if err := s.damagedPacks(); err != nil {
		return err
	}
	type loose struct {
		key  string
		kind byte
		k    [32]byte
		id   string // blob id or doc id
		size int64
	}
	var todo []loose
	var hidden int // loose records a pack hides: removed below
	err := s.list(ctx, "blobs/sha256/", true, func(name string, size int64, _ time.Time) {
		id := "sha256:" + name
		k, ok := blobKeyBytes(id)
		if !ok {
			return
		}
		res.LooseBefore += size
		if size >= packLooseMin {
			res.KeptLoose++
			return
		}
		todo = append(todo, loose{key: "blobs/sha256/" + name, kind: kindBlob, k: k, id: id, size: size})
	})
	if err != nil {
		return fmt.Errorf("list blobs: %w", err)
	}
	err = s.list(ctx, "documents/", true, func(name string, size int64, _ time.Time) {
		id, ok := strings.CutSuffix(name, ".json")
		k, ok2 := docKeyBytes(id)
		if !ok || !ok2 {
			return
		}
		res.LooseBefore += size
		if _, _, named := s.px.record(k); named {
			hidden++
			return
		}
		todo = append(todo, loose{key: "documents/" + name, kind: kindRecord, k: wide(k), id: id, size: size})
	})
	if err != nil {
		return fmt.Errorf("list records: %w", err)
	}
	// Read and check everything first: nothing is written when anything
	// is damaged. Reads run 16 at a time, a pack's worth at once.
	var packs [][]loose
	var cur []loose
	var curBytes int64
	for _, l := range todo {
		if curBytes+l.size > convertPackBytes && len(cur) > 0 {
			packs = append(packs, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, l)
		curBytes += l.size
	}
	if len(cur) > 0 {
		packs = append(packs, cur)
	}
	var written []loose // packed now: their loose objects go
	var damaged []string
	for _, group := range packs {
		data := make([][]byte, len(group))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for i, l := range group {
			g.Go(func() error {
				d, err := s.read(gctx, l.key)
				if errors.Is(err, ErrNotFound) {
					return nil // removed meanwhile (a crash's leftover run twice)
				}
				if err != nil {
					return err
				}
				data[i] = d
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		b := newPackBuilder()
		for i, l := range group {
			d := data[i]
			if d == nil {
				continue
			}
			switch l.kind {
			case kindBlob:
				if got := BlobID(d); got != l.id {
					damaged = append(damaged, fmt.Sprintf("%s: bytes hash to %s", l.key, got))
					continue
				}
				if got, ok, err := s.packedBlob(ctx, l.id); ok && err == nil && bytes.Equal(got, d) {
					written = append(written, l) // packed already
					continue
				} else if err != nil && !errors.Is(err, ErrCorrupt) {
					return err
				}
			case kindRecord:
				if _, err := decodeRecordOf(l.id, d); err != nil {
					damaged = append(damaged, fmt.Sprintf("%s: %v", l.key, err))
					continue
				}
				// Packed as packed records are, without indentation; every
				// byte of content kept (json.Compact only drops spaces).
				var c bytes.Buffer
				if err := json.Compact(&c, d); err != nil {
					return err
				}
				d = c.Bytes()
			}
			if err := b.add(l.kind, l.k, d); err != nil {
				return err
			}
			written = append(written, l)
			if l.kind == kindBlob {
				res.Blobs++
			} else {
				res.Records++
			}
		}
		if len(damaged) > 0 {
			break
		}
		if len(b.entries) == 0 {
			continue
		}
		p, err := s.writePack(ctx, b, 0)
		if err != nil {
			return err
		}
		res.Packs++
		res.PackBytes += p.size
	}
	if len(damaged) > 0 {
		return fmt.Errorf("%d damaged loose objects (%s): %w; escurel verify lists them, escurel rebuild restores records; nothing more was packed",
			len(damaged), strings.Join(damaged, "; "), ErrCorrupt)
	}
	// Every pack is durable (writePack): the loose copies go.
	dirs := map[string]bool{}
	for _, l := range written {
		var err error
		if l.kind == kindBlob {
			err = s.removeObject(ctx, l.key)
		} else {
			err = s.removeLoose(ctx, l.id)
		}
		if err != nil {
			return err
		}
		res.Removed++
		dirs[filepath.Dir(l.key)] = true
	}
	if s.localDir != "" {
		for d := range dirs {
			if err := syncDir(s.localPath(d)); err != nil {
				return err
			}
		}
	}
	if hidden > 0 {
		n, err := s.dropHiddenLoose(ctx)
		res.Removed += n
		if err != nil {
			return err
		}
	}
	return nil
}

// removeObject removes the object at key (not durably on file://: the
// caller fsyncs its directory); an object already gone is no error.
func (s *Store) removeObject(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	return nil
}
