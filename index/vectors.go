package index

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/dense"
	"github.com/escurel/escurel/internal/duck"
)

// vectors is the index's active embedding set: its DuckDB table and, once a
// dense search has needed it, its in-memory copy.
type vectors struct {
	spec  embed.Spec // the manifest's, with the configured reach
	setID int
	table string // vectors_<setID>

	mu     sync.Mutex // guards loaded and the first load
	loaded bool
	dense  *dense.Index
}

// embedBatch is how many texts one Embed call gets during ingest; a remote
// embedder splits them further into requests of its own batch size.
const embedBatch = 256

// openVectors finds or creates the embedding set of the manifest's
// embedder, creates its table, and embeds every block that has no vector
// in it (a file upgraded from schema 6, or damaged).
func (ix *state) openVectors(ctx context.Context) error {
	spec := ix.embedSpec
	name := spec.Identity().String()
	v := &vectors{spec: spec, dense: dense.New(spec.Dim)}
	err := ix.db.QueryRowContext(ctx, `SELECT set_id FROM embedding_sets WHERE name = ?`, name).Scan(&v.setID)
	if err != nil {
		if _, err := ix.db.ExecContext(ctx, `INSERT INTO embedding_sets
			SELECT coalesce(max(set_id), 0) + 1, ?, ?, ?, ? FROM embedding_sets`,
			name, spec.Model, spec.Dim, ix.now().UTC()); err != nil {
			return fmt.Errorf("create embedding set %s: %w", name, err)
		}
		if err := ix.db.QueryRowContext(ctx, `SELECT set_id FROM embedding_sets WHERE name = ?`, name).Scan(&v.setID); err != nil {
			return fmt.Errorf("create embedding set %s: %w", name, err)
		}
	}
	v.table = fmt.Sprintf("vectors_%d", v.setID)
	if _, err := ix.db.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
		block_id BIGINT PRIMARY KEY,
		vector   FLOAT[%d] NOT NULL)`, v.table, spec.Dim)); err != nil {
		return fmt.Errorf("create %s: %w", v.table, err)
	}
	ix.vec = v
	return ix.embedMissing(ctx)
}

// embedMissing embeds and stores the blocks without a vector in the active
// set, from their stored body and context.
func (ix *state) embedMissing(ctx context.Context) error {
	rows, err := ix.db.QueryContext(ctx, `SELECT b.block_id, b.body, b.context FROM blocks b
		WHERE NOT EXISTS (SELECT 1 FROM `+ix.vec.table+` v WHERE v.block_id = b.block_id) ORDER BY b.block_id`)
	if err != nil {
		return err
	}
	var ids []int64
	var texts []string
	for rows.Next() {
		var id int64
		var body, context string
		if err := rows.Scan(&id, &body, &context); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
		texts = append(texts, ix.embeddingText(context, body))
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return err
	}
	vecs, err := ix.embedTexts(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed %d blocks without vectors: %w", len(ids), err)
	}
	tx, err := duck.Begin(ctx, ix.db)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	err = duck.Append(ctx, tx.Conn, ix.vec.table, []string{"block_id", "vector"}, func(add func(...driver.Value) error) error {
		for i, id := range ids {
			if err := add(id, vecs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// documentText is what a block's vector embeds: the document prefix, then
// the context, a newline and the body (the body alone without a context).
func (ix *state) embeddingText(context, body string) string {
	return ix.embedSpec.DocumentPrefix + embedText(context, body)
}

// embedTexts embeds texts in batches of embedBatch, several at once,
// and returns unit vectors in order.
func (ix *state) embedTexts(ctx context.Context, texts []string) ([][]float32, error) {
	model, err := ix.model()
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(2, ix.workers))
	for start := 0; start < len(texts); start += embedBatch {
		end := min(start+embedBatch, len(texts))
		g.Go(func() error {
			vs, err := model.Embed(gctx, texts[start:end])
			if err != nil {
				return err
			}
			if len(vs) != end-start {
				return fmt.Errorf("embedder %s: %d vectors for %d texts", model.Model(), len(vs), end-start)
			}
			for i, v := range vs {
				if len(v) != ix.embedSpec.Dim {
					return fmt.Errorf("embedder %s: a %d-dimensional vector, the index holds %d", model.Model(), len(v), ix.embedSpec.Dim)
				}
				if out[start+i], err = embed.Normalize(v); err != nil {
					return fmt.Errorf("embedder %s: %w", model.Model(), err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// model returns the embedder, building it on first use; a failure is
// returned each time until the cause is fixed (a key set, a runtime
// installed).
func (ix *state) model() (embed.Embedder, error) {
	ix.embedMu.Lock()
	defer ix.embedMu.Unlock()
	if ix.embedder != nil {
		return ix.embedder, nil
	}
	e, err := embed.New(ix.embedSpec)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", ix.path, err)
	}
	if e == nil {
		return nil, fmt.Errorf("index %s: no embedder (none)", ix.path)
	}
	ix.embedder = e
	return e, nil
}

// recordReach writes the embedder spec in use into the manifest when it
// differs from the recorded one (a new url that has just worked for an
// ingest), so that the next open without settings reaches the model the
// same way. A search never records: a mistyped url must not stick.
func (ix *state) recordReach(ctx context.Context) error {
	spec := ix.embedSpec.String()
	m := *ix.manifest.Load()
	if m.EmbedderSpec == spec {
		return nil
	}
	m.EmbedderSpec, m.UpdatedAt = spec, ix.now().UTC().Truncate(time.Microsecond)
	if err := writeManifest(ctx, ix.db, m); err != nil {
		return err
	}
	ix.manifest.Store(&m)
	return nil
}

// embedQuery embeds a query with the query prefix, as a unit vector.
func (ix *state) embedQuery(ctx context.Context, query string) ([]float32, error) {
	vs, err := ix.embedTexts(ctx, []string{ix.embedSpec.QueryPrefix + query})
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// isLoaded reports whether the in-memory vectors have been read.
func (v *vectors) isLoaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.loaded
}

// denseIndex returns the in-memory vectors, reading them from q on first
// use. Call it inside fts View, so that no write commits during the load.
func (ix *state) denseIndex(ctx context.Context, q querier) (*dense.Index, error) {
	v := ix.vec
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.loaded {
		return v.dense, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT v.block_id, v.vector, d.sensitivity FROM `+v.table+` v
		JOIN blocks b ON b.block_id = v.block_id JOIN documents d ON d.doc_id = b.doc_id`)
	if err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	defer rows.Close()
	var add []dense.Entry
	for rows.Next() {
		var e dense.Entry
		var vec []any
		var sens string
		if err := rows.Scan(&e.Block, &vec, &sens); err != nil {
			return nil, fmt.Errorf("load vectors: %w", err)
		}
		e.Level = level(sens)
		e.Vector = make([]float32, len(vec))
		for i, x := range vec {
			f, ok := x.(float32)
			if !ok {
				return nil, fmt.Errorf("load vectors: block %d: component of type %T", e.Block, x)
			}
			e.Vector[i] = f
		}
		add = append(add, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	d := dense.New(v.spec.Dim)
	if err := d.Apply(add, nil); err != nil {
		return nil, err
	}
	v.dense, v.loaded = d, true
	return d, nil
}

// applyDense changes the in-memory vectors as a committed write did; a
// no-op before they are loaded (the load reads the committed rows). Run it
// under the fts write lock (fts.Index.CommitWith).
func (ix *state) applyDense(add []dense.Entry, remove []int64) {
	v := ix.vec
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded {
		return
	}
	if err := v.dense.Apply(add, remove); err != nil {
		// Vectors were checked before the transaction; should one slip
		// through, drop the copy and reload from the rows next time.
		v.loaded, v.dense = false, nil
	}
}

// dropOtherSets drops every embedding set but the active one (all of them
// without an embedder), with their vector tables.
func (ix *state) dropOtherSets(ctx context.Context) error {
	active := -1
	if ix.vec != nil {
		active = ix.vec.setID
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT set_id FROM embedding_sets WHERE set_id <> ?`, active)
	if err != nil {
		return err
	}
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		for _, q := range []string{fmt.Sprintf(`DROP TABLE IF EXISTS vectors_%d`, id), fmt.Sprintf(`DELETE FROM embedding_sets WHERE set_id = %d`, id)} {
			if _, err := ix.db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("drop embedding set %d: %w", id, err)
			}
		}
	}
	return nil
}
