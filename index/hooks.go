package index

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/hooks"
	"github.com/escurel/escurel/internal/layout"
)

// What package rebuild needs and a library user never calls (see package
// internal/hooks).
func init() {
	hooks.OpenGeneration = func(ctx context.Context, d *layout.Dir, gen string, opts any, reembed bool) (any, error) {
		if !layout.IsGeneration(gen) {
			return nil, fmt.Errorf("open generation %q: not a generation name (gen-NNNNNN)", gen)
		}
		o, _ := opts.(*Options)
		return openIndex(ctx, d, gen, o, reembed)
	}
	hooks.Rederive = rederive
	hooks.Dir = func(ix any) *layout.Dir { return ix.(*Index).layout }
	hooks.Swap = func(ctx context.Context, ix any, prepare func(context.Context) (string, error)) error {
		return ix.(*Index).swap(ctx, prepare)
	}
	hooks.CopyTo = func(ctx context.Context, ix any, dst string) error {
		x := ix.(*Index)
		x.verifyMu.Lock() // before writeMu: its CHECKPOINT would wait for a verify under it
		defer x.verifyMu.Unlock()
		x.writeMu.Lock()
		defer x.writeMu.Unlock()
		s, err := x.live()
		if err != nil {
			return err
		}
		if err := s.copyTo(ctx, dst); err != nil {
			return err
		}
		// A re-embed changes no full-text row: the copy opens from the
		// image too.
		s.copyImage(dst)
		return nil
	}
	hooks.RowRecords = rowRecords
	hooks.Inspect = func(ctx context.Context, dir string) (any, map[string]string, map[string]bool, error) {
		return inspect(ctx, dir)
	}
}

// rederive writes the rows of records already in the blob store (see
// hooks.Rederive).
func rederive(ctx context.Context, x any, recs []*blobstore.Record, data [][]byte) (failed []bool, errs []error, err error) {
	ix := x.(*Index)
	ins := make([]input, len(recs))
	for i, rec := range recs {
		ins[i] = input{Input: Input{Source: rec.Source, MediaType: rec.MediaType, Data: data[i],
			Language: rec.Language, Sensitivity: rec.Sensitivity, IngestedAt: rec.IngestedAt}, rederive: true,
			size: rec.Bytes, mtime: rec.SourceMTime}
		if rec.BlobID == "" { // never stored: over the size cap at ingest
			ins[i].failure = rec.Error
		}
		if rec.TitleGiven {
			ins[i].Title = rec.Title
		}
		if rec.Meta != "" {
			m, err := parseMetaJSON(string(rec.Meta))
			if err != nil {
				return nil, nil, fmt.Errorf("record of %s: %w", rec.Source, err)
			}
			ins[i].Meta = m
		}
	}
	res, errs, err := ix.ingest(ctx, ins)
	if err != nil {
		return nil, nil, err
	}
	failed = make([]bool, len(res))
	for i := range res {
		failed[i] = res[i].Status == Failed
	}
	return failed, errs, nil
}

// rowRecords returns the records the documents rows of ids copy (see
// hooks.RowRecords).
func rowRecords(ctx context.Context, live any, dir string, ids []string) (map[string]*blobstore.Record, error) {
	var s *state
	if x, ok := live.(*Index); ok && x != nil {
		var err error
		if s, err = x.live(); err != nil {
			return nil, err
		}
	} else {
		path, err := layout.LivePath(dir)
		if err != nil {
			return nil, err
		}
		db, err := sql.Open("duckdb", sideDSN(path))
		if err != nil {
			return nil, err
		}
		defer db.Close()
		s = &state{db: db, path: path}
	}
	docs, err := s.currentDocs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*blobstore.Record, len(docs))
	for id, d := range docs {
		out[id] = d.rec
	}
	return out, nil
}
