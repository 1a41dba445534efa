// Package hooks lets package rebuild reach what package index keeps from
// its library users: opening a generation that is not live, deriving rows
// from records already in the blob store, copying and swapping a
// generation. Package index sets these functions in its init; rebuild,
// which imports index, calls them. grpc-go's internal/internal.go is the
// precedent: an internal package of function variables is how two packages
// of one module share what neither exports.
//
// Values typed any are index's own types (*index.Index, index.Options,
// index.Manifest), which this package cannot name without an import cycle.
package hooks

import (
	"context"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/layout"
)

var (
	// OpenGeneration opens generation gen of d, creating its file when
	// it has none, and returns an *index.Index whose lock stays d's. opts
	// is an *index.Options. With reembed, an existing file takes
	// opts.Embedder although its manifest names another: a new embedding
	// set is created and filled from the stored blocks, and the others
	// are dropped.
	OpenGeneration func(ctx context.Context, d *layout.Dir, gen string, opts any, reembed bool) (any, error)

	// Rederive writes into ix (an *index.Index) the rows of records
	// already in the blob store, data[i] being the blob of recs[i] (nil
	// for a record without one, Record.Error saying why), through the
	// same derivation as an ingest, without writing to the blob store.
	// failed[i] reports a document recorded as failed; errs[i] a document
	// that could not be taken; err a storage error.
	Rederive func(ctx context.Context, ix any, recs []*blobstore.Record, data [][]byte) (failed []bool, errs []error, err error)

	// Dir returns the directory an open *index.Index holds.
	Dir func(ix any) *layout.Dir

	// Swap runs prepare with the index's writes held back, publishes the
	// generation prepare names and switches the index to it.
	Swap func(ctx context.Context, ix any, prepare func(context.Context) (string, error)) error

	// CopyTo copies the live generation's file of ix to dst with writes
	// held back and the write-ahead log folded in first.
	CopyTo func(ctx context.Context, ix any, dst string) error

	// Inspect returns the manifest (an index.Manifest) of the live index
	// in dir, its documents (doc id → source) and the failed ones, without
	// migrating or locking it.
	Inspect func(ctx context.Context, dir string) (manifest any, docs map[string]string, failed map[string]bool, err error)

	// RowRecords returns the index's copies of the records of ids (doc
	// id → record, read from the documents rows; absent when there is no
	// row): of live (an *index.Index) when not nil, else of the live
	// generation of dir, read without migrating or locking it.
	RowRecords func(ctx context.Context, live any, dir string, ids []string) (map[string]*blobstore.Record, error)
)

// Published generations and read replicas (package replica).
var (
	// Snapshot copies the live generation's file of ix (an *index.Index)
	// to dst with writes held back, and verifies the copied rows against
	// its blob store (writes go on meanwhile). It returns the
	// *index.Verification; a generation that does not verify is refused
	// (an *index.UnverifiedError), dst written all the same (the caller
	// removes it).
	// With image not "", it writes there the full-text index's image of
	// the copied rows too, or leaves it empty when it could not (logged:
	// the image is a cache).
	Snapshot func(ctx context.Context, ix any, dst, image string) (any, error)

	// ImagePath is where the full-text index's image of the index file
	// at path lies: an open of path reads it, when its fingerprint is
	// the file's, instead of the full-text tables.
	ImagePath func(path string) string

	// FromImage reports whether the live generation of ix (an
	// *index.Index) loaded its full-text index from the image.
	FromImage func(ix any) bool

	// OpenReplica locks the replica's own directory dir, makes a
	// generation, calls fill with the path its index file must have,
	// opens it and returns the read-only *index.Index once the file's
	// digest is info's (an index.ReplicaInfo): computed from its rows
	// with checkDigest, taken from info without. opts is an
	// *index.Options.
	OpenReplica func(ctx context.Context, dir string, fill func(path string) error, info any, opts any, checkDigest bool) (any, error)

	// Adopt switches the replica ix to a new generation as OpenReplica
	// opens one, without downtime; on error it serves what it served.
	Adopt func(ctx context.Context, ix any, fill func(path string) error, info any, checkDigest bool) error

	// Checked records the replica's last look at the published pointer.
	Checked func(ix any, at time.Time, failure string)

	// Republished records that the digest the replica ix serves was
	// published again, as publish seq at publishedAt.
	Republished func(ix any, seq int64, publishedAt time.Time)
)
