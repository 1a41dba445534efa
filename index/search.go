package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/escurel/escurel/index/fts"
)

// DefaultK is the number of hits Search returns when SearchOptions.K is 0.
const DefaultK = 10

// SearchOptions configure Search. The zero value means DefaultK hits at
// Public clearance, any term matching, fts.DefaultParams.
type SearchOptions struct {
	K int // hits to return, ≥ 0; 0 means DefaultK
	// Clearance is the highest document sensitivity the caller may see:
	// Public (the default), Internal or Restricted. Blocks of documents above
	// it are left out before ranking, so K allowed hits still come back, and
	// checked again before hits are returned.
	Clearance string
	// Conjunctive makes every query term required (default: any term).
	Conjunctive bool
	// BM25 overrides the BM25F parameters (fts.DefaultParams when nil).
	BM25 *fts.Params
	// Language analyzes the query as this language. Default: as each
	// language of the index's documents, the terms united.
	Language string
}

// allowed returns the sensitivities a clearance may see, or an error for an
// unknown clearance.
func allowed(clearance string) ([]string, error) {
	levels := []string{Public, Internal, Restricted}
	if clearance == "" {
		clearance = Public
	}
	if err := CheckSensitivity(clearance); err != nil {
		return nil, fmt.Errorf("clearance: %w", err)
	}
	return levels[:slices.Index(levels, clearance)+1], nil
}

// Hit is one block found by Search. Body is verbatim: the document's text
// from ByteStart to ByteEnd. Context is the structural context that took
// part in ranking; cite the body, not the context.
type Hit struct {
	BlockID     int64    `json:"block_id"`
	DocID       string   `json:"doc_id"`
	Source      string   `json:"source"`
	Title       string   `json:"title"`
	Body        string   `json:"body"`
	Context     string   `json:"context"`
	HeadingPath []string `json:"heading_path"` // never nil
	Page        int      `json:"page"`         // 0 when the format has no pages
	ByteStart   int64    `json:"byte_start"`
	ByteEnd     int64    `json:"byte_end"`
	Score       float64  `json:"score"`
}

// Search ranks blocks by BM25F over body and context (package fts) and
// returns the best K with their stored fields, highest score first; equal
// scores are ordered by block id. A query without terms returns no hits. It
// sees every committed ingest, with no refresh step, and a write whole or
// not at all.
func (ix *Index) Search(ctx context.Context, query string, opts *SearchOptions) ([]Hit, error) {
	hits := []Hit{}
	err := ix.ranked(ctx, query, opts, func(tx querier, ranked []fts.Hit, levels []string) error {
		for _, r := range ranked {
			hits = append(hits, Hit{BlockID: r.Block, Score: r.Score})
		}
		var err error
		hits, err = fillHits(ctx, tx, hits, levels)
		return err
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// Ranked is a block's place in a ranking, without its stored fields.
type Ranked struct {
	BlockID int64
	Score   float64
}

// Rank ranks as Search does but returns block ids and scores only: the
// cost of ranking without that of reading the hits' rows (which grows with
// K). Read the rows of the blocks wanted with DocumentBlocks or Search.
func (ix *Index) Rank(ctx context.Context, query string, opts *SearchOptions) ([]Ranked, error) {
	out := []Ranked{}
	err := ix.ranked(ctx, query, opts, func(_ querier, ranked []fts.Hit, _ []string) error {
		for _, r := range ranked {
			out = append(out, Ranked{BlockID: r.Block, Score: r.Score})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ranked validates opts, ranks query and calls use with the ranking inside
// the read transaction it came from.
func (ix *Index) ranked(ctx context.Context, query string, opts *SearchOptions, use func(querier, []fts.Hit, []string) error) error {
	if opts == nil {
		opts = &SearchOptions{}
	}
	k := DefaultK
	if opts.K != 0 {
		k = opts.K
	}
	if k < 0 {
		return fmt.Errorf("search: k = %d, want ≥ 0", k)
	}
	levels, err := allowed(opts.Clearance)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	params := fts.DefaultParams
	if opts.BM25 != nil {
		params = *opts.BM25
	}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	terms, err := ix.queryTerms(query, opts.Language)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if len(terms) == 0 {
		return nil
	}
	q := fts.Query{Terms: terms, MaxLevel: uint8(len(levels) - 1), K: k, Params: params, Conjunctive: opts.Conjunctive}
	err = ix.fts.View(func() error {
		// One transaction, begun when first needed (a query on cached
		// terms needs none): posting lists and hit rows come from one
		// snapshot, the one the in-memory index describes, as no write
		// commits while View holds its lock.
		tx := &lazyTx{db: ix.db}
		defer tx.rollback()
		ranked, err := ix.fts.Search(ctx, tx, q)
		if err != nil {
			return err
		}
		return use(tx, ranked, levels)
	})
	if err != nil {
		return fmt.Errorf("search %q: %w", query, err)
	}
	return nil
}

// queryTerms analyzes a query: as lang when given, else as each language of
// the index's documents, and returns the distinct terms, sorted.
func (ix *Index) queryTerms(query, lang string) ([]string, error) {
	langs := []string{lang}
	if lang == "" {
		langs = ix.languages()
	} else if err := ix.analyzer.CheckLanguage(lang); err != nil {
		return nil, err
	}
	var terms []string
	for _, l := range langs {
		terms = ix.analyzer.Terms(terms, query, l)
	}
	return uniqueSorted(terms), nil
}

// languages returns the languages of the index's documents, sorted, or
// DefaultLanguage when there are none.
func (ix *Index) languages() []string {
	ix.langMu.RLock()
	defer ix.langMu.RUnlock()
	if len(ix.langs) == 0 {
		return []string{DefaultLanguage}
	}
	out := make([]string, 0, len(ix.langs))
	for l := range ix.langs {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func (ix *Index) noteLanguage(lang string) {
	ix.langMu.Lock()
	ix.langs[lang] = true
	ix.langMu.Unlock()
}

// fillHits reads the stored fields of hits, keeping their order, and is the
// output gate: it drops any hit whose document's sensitivity is not in
// levels, whatever the ranking did.
func fillHits(ctx context.Context, q querier, hits []Hit, levels []string) ([]Hit, error) {
	if len(hits) == 0 {
		return hits, nil
	}
	pos := make(map[int64]int, len(hits))
	args := make([]any, len(hits))
	for i, h := range hits {
		pos[h.BlockID] = i
		args[i] = h.BlockID
	}
	rows, err := q.QueryContext(ctx, `SELECT b.block_id, b.doc_id, d.source, d.title, b.body, b.context,
		b.heading_path, b.page, b.byte_start, b.byte_end, d.sensitivity
		FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
		WHERE b.block_id IN (`+placeholders(len(hits))+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := 0
	visible := make([]bool, len(hits))
	for rows.Next() {
		var id int64
		var path, sens string
		var h Hit
		if err := rows.Scan(&id, &h.DocID, &h.Source, &h.Title, &h.Body, &h.Context, &path, &h.Page, &h.ByteStart, &h.ByteEnd, &sens); err != nil {
			return nil, err
		}
		h.BlockID, h.Score = id, hits[pos[id]].Score
		if h.HeadingPath, err = decodeHeadingPath(id, path); err != nil {
			return nil, err
		}
		hits[pos[id]] = h
		visible[pos[id]] = slices.Contains(levels, sens)
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if found != len(hits) {
		return nil, fmt.Errorf("%d of %d ranked blocks have no block row", len(hits)-found, len(hits))
	}
	out := hits[:0]
	for i, h := range hits {
		if visible[i] {
			out = append(out, h)
		}
	}
	return out, nil
}

// decodeHeadingPath decodes blocks.heading_path (see headingJSON); never nil.
func decodeHeadingPath(block int64, s string) ([]string, error) {
	path := []string{}
	if err := json.Unmarshal([]byte(s), &path); err != nil {
		return nil, fmt.Errorf("block %d: heading_path %q: %w", block, s, err)
	}
	if path == nil {
		path = []string{}
	}
	return path, nil
}

// lazyTx is a read transaction begun on first use.
type lazyTx struct {
	db *sql.DB
	tx *sql.Tx
}

func (l *lazyTx) begin(ctx context.Context) error {
	if l.tx != nil {
		return nil
	}
	tx, err := l.db.BeginTx(ctx, nil)
	l.tx = tx
	return err
}

func (l *lazyTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := l.begin(ctx); err != nil {
		return nil, err
	}
	return l.tx.QueryContext(ctx, query, args...)
}

func (l *lazyTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := l.begin(ctx); err != nil {
		return l.db.QueryRowContext(ctx, query, args...) // reports the same error
	}
	return l.tx.QueryRowContext(ctx, query, args...)
}

func (l *lazyTx) rollback() {
	if l.tx != nil {
		l.tx.Rollback()
	}
}

// querier is what *sql.DB and *sql.Tx share for reading.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func uniqueSorted(ts []string) []string {
	sort.Strings(ts)
	out := ts[:0]
	for i, t := range ts {
		if i == 0 || t != ts[i-1] {
			out = append(out, t)
		}
	}
	return out
}

// Stats describes an index for `escurel status`.
type Stats struct {
	Path          string    `json:"path"`
	BlobURL       string    `json:"blob_url"`
	SchemaVersion int       `json:"schema_version"`
	Manifest      Manifest  `json:"manifest"`
	Documents     int64     `json:"documents"`
	Blocks        int64     `json:"blocks"`
	Embeddings    int64     `json:"embeddings"`
	FullText      fts.Stats `json:"full_text"`
	FileBytes     int64     `json:"file_bytes"` // size of the DuckDB file
}

// Stats counts the index's rows.
func (ix *Index) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Path: ix.path, BlobURL: ix.blobs.URL(), Manifest: ix.manifest}
	st.FullText = ix.fts.Stats()
	err := ix.db.QueryRowContext(ctx, `SELECT
		(SELECT max(version) FROM schema_migrations),
		(SELECT count(*) FROM documents),
		(SELECT count(*) FROM blocks),
		(SELECT count(*) FROM embeddings)`).Scan(&st.SchemaVersion, &st.Documents, &st.Blocks, &st.Embeddings)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	if _, err := ix.db.ExecContext(ctx, `CHECKPOINT`); err == nil {
		st.FileBytes = fileSize(ix.path)
	}
	return st, nil
}

// DocumentBlocks returns every block of a document in document order, as
// hits with score 0. A document without blocks, an unknown one and one above
// clearance (see SearchOptions.Clearance; "" is Public) all give an empty
// slice.
func (ix *Index) DocumentBlocks(ctx context.Context, docID, clearance string) ([]Hit, error) {
	levels, err := allowed(clearance)
	if err != nil {
		return nil, fmt.Errorf("document blocks: %w", err)
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT block_id FROM blocks WHERE doc_id = ? ORDER BY ord`, docID)
	if err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	defer rows.Close()
	hits := []Hit{}
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.BlockID); err != nil {
			return nil, err
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if hits, err = fillHits(ctx, tx, hits, levels); err != nil {
		return nil, fmt.Errorf("document blocks %s: %w", docID, err)
	}
	return hits, nil
}

// ForEachBlock calls fn with every block the clearance may see ("" is
// Public), in block id order, as a hit with score 0, from one snapshot. An
// error from fn stops the walk and is returned.
func (ix *Index) ForEachBlock(ctx context.Context, clearance string, fn func(Hit) error) error {
	levels, err := allowed(clearance)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	args := make([]any, len(levels))
	for i, l := range levels {
		args[i] = l
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT b.block_id, b.doc_id, d.source, d.title, b.body, b.context,
		b.heading_path, b.page, b.byte_start, b.byte_end
		FROM blocks b JOIN documents d ON d.doc_id = b.doc_id
		WHERE d.sensitivity IN (`+placeholders(len(levels))+`) ORDER BY b.block_id`, args...)
	if err != nil {
		return fmt.Errorf("blocks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h Hit
		var path string
		if err := rows.Scan(&h.BlockID, &h.DocID, &h.Source, &h.Title, &h.Body, &h.Context, &path, &h.Page, &h.ByteStart, &h.ByteEnd); err != nil {
			return fmt.Errorf("blocks: %w", err)
		}
		if h.HeadingPath, err = decodeHeadingPath(h.BlockID, path); err != nil {
			return err
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	return rows.Err()
}
