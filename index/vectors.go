package index

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"
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
	if _, err := ix.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+v.table+` (
		block_id BIGINT PRIMARY KEY,
		vector   BLOB NOT NULL)`); err != nil {
		return fmt.Errorf("create %s: %w", v.table, err)
	}
	if err := ix.convertVectors(ctx, v); err != nil {
		return err
	}
	ix.vec = v
	return ix.embedMissing(ctx)
}

// A vector is stored as a BLOB of its dim components, each a float32
// in little-endian byte order (sql/0014_vector_blobs.sql): read as one
// value per row, not one boxed value per component as a FLOAT[dim]
// array is through database/sql.

// vectorValue is v as a vectors_<set_id> table stores it.
func vectorValue(v []float32) driver.Value {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decodeVector appends the vector that b stores to dst; b must hold dim
// components.
func decodeVector(dst []float32, b []byte, dim int) ([]float32, error) {
	if len(b) != 4*dim {
		return dst, fmt.Errorf("a stored vector of %d bytes, want %d (%d dimensions): the file is damaged; run escurel rebuild", len(b), 4*dim, dim)
	}
	for i := 0; i < len(b); i += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
	}
	return dst, nil
}

// convertBatch is how many FLOAT[dim] rows convertVectors reads at once.
const convertBatch = 4096

// convertVectors rewrites a vectors table of a file from before schema
// 14, FLOAT[dim] arrays, as BLOBs, in one transaction (read in batches of
// convertBatch rows, so memory stays bounded), then checkpoints; a table
// already of BLOBs is left alone. A crash before the commit leaves the old
// table, converted by the next open.
func (ix *state) convertVectors(ctx context.Context, v *vectors) error {
	var typ string
	if err := ix.db.QueryRowContext(ctx, `SELECT data_type FROM information_schema.columns
		WHERE table_schema = 'main' AND table_name = ? AND column_name = 'vector'`, v.table).Scan(&typ); err != nil {
		return fmt.Errorf("convert %s: %w", v.table, err)
	}
	switch {
	case typ == "BLOB":
		return nil
	case typ != fmt.Sprintf("FLOAT[%d]", v.spec.Dim):
		return fmt.Errorf("convert %s: its vectors are %s, want BLOB or FLOAT[%d]: the file is damaged; run escurel rebuild", v.table, typ, v.spec.Dim)
	}
	tx, err := duck.Begin(ctx, ix.db)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	tmp := v.table + "_blobs"
	if _, err := tx.ExecContext(ctx, `CREATE TABLE `+tmp+` (block_id BIGINT PRIMARY KEY, vector BLOB NOT NULL)`); err != nil {
		return fmt.Errorf("convert %s: %w", v.table, err)
	}
	ids := make([]int64, 0, convertBatch)
	vals := make([]driver.Value, 0, convertBatch)
	for last := int64(math.MinInt64); ; {
		ids, vals = ids[:0], vals[:0]
		rows, err := tx.QueryContext(ctx, `SELECT block_id, vector FROM `+v.table+` WHERE block_id > ? ORDER BY block_id LIMIT ?`, last, convertBatch)
		if err != nil {
			return fmt.Errorf("convert %s: %w", v.table, err)
		}
		vec := make([]float32, v.spec.Dim)
		for rows.Next() {
			var id int64
			var xs []any
			if err := rows.Scan(&id, &xs); err != nil {
				rows.Close()
				return fmt.Errorf("convert %s: %w", v.table, err)
			}
			for i, x := range xs {
				vec[i], _ = x.(float32)
			}
			ids, vals = append(ids, id), append(vals, vectorValue(vec))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("convert %s: %w", v.table, err)
		}
		if len(ids) == 0 {
			break
		}
		last = ids[len(ids)-1]
		err = duck.Append(ctx, tx.Conn, tmp, []string{"block_id", "vector"}, func(add func(...driver.Value) error) error {
			for i, id := range ids {
				if err := add(id, vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("convert %s: %w", v.table, err)
		}
	}
	for _, q := range []string{`DROP TABLE ` + v.table, `ALTER TABLE ` + tmp + ` RENAME TO ` + v.table} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("convert %s: %w", v.table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("convert %s: %w", v.table, err)
	}
	if _, err := ix.db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("convert %s: checkpoint: %w", v.table, err)
	}
	return nil
}

// embedPage is how many blocks one query of embedMissing reads (a
// variable for tests).
var embedPage = 8192

// embedMissing embeds and stores the blocks without a vector in the active
// set, from their stored body and context.
func (ix *state) embedMissing(ctx context.Context) error {
	// Read in pages of block ids (each a bounded top-n, the rows past the
	// last page's pruned by the blocks' zone maps): one sorted read of
	// every block's text failed at a memory_limit of 128 MiB at 100k
	// passages.
	var ids []int64
	var texts []string
	for last := int64(-1); ; {
		rows, err := ix.db.QueryContext(ctx, `SELECT b.block_id, b.body, b.context FROM blocks b
			WHERE b.block_id > ? AND NOT EXISTS (SELECT 1 FROM `+ix.vec.table+` v WHERE v.block_id = b.block_id) ORDER BY b.block_id LIMIT ?`, last, embedPage)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var id int64
			var body, context string
			if err := rows.Scan(&id, &body, &context); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			texts = append(texts, ix.embeddingText(context, body))
			last = id
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if n < embedPage {
			break
		}
	}
	if len(ids) == 0 {
		return nil
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
			if err := add(id, vectorValue(vecs[i])); err != nil {
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
// The load counts the rows, then reads each row's vector as one BLOB into
// one array of that size and its room (dense.Room): its memory is the
// vectors' own plus one row (the driver's copy of it), and the room's
// address space.
func (ix *state) denseIndex(ctx context.Context, q querier) (*dense.Index, error) {
	v := ix.vec
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.loaded {
		return v.dense, nil
	}
	from := ` FROM ` + v.table + ` v JOIN blocks b ON b.block_id = v.block_id JOIN documents d ON d.doc_id = b.doc_id`
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*)`+from).Scan(&n); err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	// The level as level() maps a sensitivity: an unknown one is
	// restricted.
	rows, err := q.QueryContext(ctx, `SELECT v.block_id, v.vector,
		CASE d.sensitivity WHEN '`+Public+`' THEN 0 WHEN '`+Internal+`' THEN 1 ELSE 2 END::UTINYINT`+from)
	if err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	defer rows.Close()
	dim := v.spec.Dim
	// With room for the next writes' vectors (dense.Room,
	// dense.Index.Reserve): mostly address space (pages fresh from the OS
	// are not touched until written; reused ones are zeroed by make).
	room := dense.Room(n)
	ids, levels, vecs := make([]int64, 0, room), make([]uint8, 0, room), make([]float32, 0, room*dim)
	for rows.Next() {
		var id int64
		var lvl uint8
		var raw sql.RawBytes
		if err := rows.Scan(&id, &raw, &lvl); err != nil {
			return nil, fmt.Errorf("load vectors: %w", err)
		}
		if vecs, err = decodeVector(vecs, raw, dim); err != nil {
			return nil, fmt.Errorf("load vectors of %s: %w", v.table, err)
		}
		ids, levels = append(ids, id), append(levels, lvl)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	d, err := dense.Build(dim, ids, levels, vecs)
	if err != nil {
		return nil, fmt.Errorf("load vectors of %s: %w", v.table, err)
	}
	v.dense, v.loaded = d, true
	return d, nil
}

// reserveDense makes room in the in-memory vectors, when they are loaded,
// for n more (dense.Index.Reserve), so that applyDense, which runs while
// every search waits (fts.Index.CommitWith), appends in place. Call it
// before the commit, under writeMu.
func (ix *state) reserveDense(n int) {
	v := ix.vec
	if v == nil || n == 0 {
		return
	}
	v.mu.Lock()
	d := v.dense
	if !v.loaded {
		d = nil
	}
	v.mu.Unlock()
	if d != nil {
		d.Reserve(n) // without v.mu: a search's denseIndex takes it
	}
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
