package index

import (
	"context"
	"errors"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/escurel/escurel/blobstore"
)

// DamagedBlob is a stored blob whose bytes no longer hash to its id
// (Verification.DamagedBlobs). Ingesting the document's original bytes
// again (escurel ingest SOURCE) writes it anew; deleting the document
// drops it.
type DamagedBlob struct {
	Source string `json:"source"`
	DocID  string `json:"doc_id"`
	BlobID string `json:"blob_id"`
	Reason string `json:"reason"` // what reading it found, e.g. "bytes hash to sha256:…"
}

// damagedBlobs reads the blob of every record, 8 at a time, and returns
// those whose bytes do not hash to their id, by source. A missing blob is
// not listed here (Verification.RecordsWithoutBlobs lists it).
func damagedBlobs(ctx context.Context, blobs *blobstore.Store, recs []*blobstore.Record) ([]DamagedBlob, error) {
	var mu sync.Mutex
	var out []DamagedBlob
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, r := range recs {
		if r.BlobID == "" {
			continue
		}
		g.Go(func() error {
			_, err := blobs.Get(gctx, r.BlobID)
			switch {
			case err == nil, errors.Is(err, blobstore.ErrNotFound):
				return nil
			case errors.Is(err, blobstore.ErrCorrupt):
				mu.Lock()
				out = append(out, DamagedBlob{Source: r.Source, DocID: r.DocID, BlobID: r.BlobID, Reason: err.Error()})
				mu.Unlock()
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
}
