package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/escurel/escurel/index/fts"
	"github.com/escurel/escurel/rerank"
)

// ErrNoVectors is returned, wrapped, by a search in ModeDense or
// ModeHybrid of an index without vectors (built with embed.None).
var ErrNoVectors = errors.New("index: no vectors (embedder none)")

// ErrEmbedder is returned, wrapped with the embedder's own error, by a
// search in ModeDense or ModeHybrid when the query cannot be embedded:
// the model server is unreachable, times out or answers an error.
// ModeBM25 needs no embedder and still answers.
var ErrEmbedder = errors.New("index: the embedder failed to embed the query")

// ErrReranker is returned, wrapped with the reranker's own error, by a
// Search whose SearchOptions.Reranker failed; the same search without it
// still works.
var ErrReranker = errors.New("index: the reranker failed")

// DefaultK is the number of hits Search returns when SearchOptions.K is 0.
const DefaultK = 10

// Search modes (SearchOptions.Mode).
const (
	// ModeBM25 ranks by BM25F over body and context alone.
	ModeBM25 = "bm25"
	// ModeDense ranks by the cosine similarity of the query's vector to
	// the blocks' vectors alone.
	ModeDense = "dense"
	// ModeHybrid fuses the two legs' candidate lists (see Fusion).
	ModeHybrid = "hybrid"
)

// Fusion methods of ModeHybrid (SearchOptions.Fusion).
const (
	// FusionRRF is reciprocal rank fusion (Cormack, Clarke & Büttcher
	// 2009): a block scores Σ w/(k + rank) over the legs that found it,
	// rank from 1, with k = SearchOptions.RRFK and w the leg's weight
	// (SearchOptions.Alpha; equal by default).
	FusionRRF = "rrf"
	// FusionConvex is the convex combination α·dense + (1−α)·bm25 of
	// each leg's scores min-max normalised over its candidates, 0 in a leg
	// that did not find the block (Bruch, Gai & Ingber 2023, "An Analysis
	// of Fusion Functions for Hybrid Retrieval").
	FusionConvex = "convex"
)

// Defaults of SearchOptions.
const (
	DefaultDepth = 100 // candidates per leg in ModeHybrid
	DefaultRRFK  = 60  // RRF's k, as in Cormack et al. 2009
	DefaultAlpha = 0.5 // weight of the dense leg
)

// SearchOptions configure Search. The zero value means DefaultK hits at
// Public clearance, in the index's default mode (Index.DefaultMode), with
// hybrid legs fused by RRF.
type SearchOptions struct {
	K int // hits to return, 0 to MaxK; 0 means DefaultK
	// Clearance is the highest document sensitivity the caller may see:
	// Public (the default), Internal or Restricted. Blocks of documents above
	// it are left out inside each leg, before ranking, so K allowed hits
	// still come back, and checked again before hits are returned.
	Clearance string
	// Mode is ModeBM25, ModeDense or ModeHybrid; "" is the index's
	// DefaultMode. ModeDense and ModeHybrid need an index with vectors.
	Mode string
	// Fusion is FusionRRF (default) or FusionConvex, for ModeHybrid.
	Fusion string
	// Depth is how many candidates each leg gives fusion; 0 means
	// DefaultDepth, and it is never fewer than K; at most MaxDepth.
	Depth int
	// RRFK is RRF's k (> 0); 0 means DefaultRRFK.
	RRFK float64
	// Alpha is the dense leg's weight in (0, 1], the BM25 leg's being
	// 1 − Alpha: in FusionConvex the weight of its normalised score, in
	// FusionRRF of its reciprocal rank (weighted RRF; at 0.5 the order is
	// that of plain RRF). 0 means DefaultAlpha.
	Alpha float64
	// Explain adds each leg's rank and score to every hit (Hit.Explain).
	Explain bool
	// Reranker, when not nil, reorders the K hits (Search only; see
	// package rerank). Hits keep their retrieval Score; with Explain, the
	// reranker's score is in Hit.Explain.Rerank.
	Reranker rerank.Reranker
	// Conjunctive makes every query term required in the BM25 leg
	// (default: any term).
	Conjunctive bool
	// BM25 overrides the BM25F parameters (fts.DefaultParams when nil).
	BM25 *fts.Params
	// Language analyzes the query as this language. Default: as each
	// language of the index's documents, the terms united.
	Language string
	// Filter, when not nil, keeps the search to the documents whose
	// metadata satisfy it (ParseFilter). It is applied inside each leg,
	// before ranking, like the clearance and only within it: K hits come
	// back when K blocks match, and scores are those of the search
	// without the filter.
	Filter *Filter
}

// DefaultMode is the mode of a search that names none: ModeHybrid when the
// index's vectors come from a trained model (openai, ollama), ModeBM25 when
// its embedder is none or hash. The hash embedder is a bag of words
// without IDF: its dense leg repeats BM25's evidence, worse (SciFact train
// split, nDCG@10: BM25 0.704, dense 0.483, hybrid by RRF 0.604, by convex
// fusion at α = 0.05 0.705), so it is searched by dense or hybrid mode only
// when asked.
func (ix *Index) DefaultMode() string {
	s, err := ix.acquire()
	if err != nil {
		return ModeBM25
	}
	defer s.unref()
	return s.defaultMode()
}

func (ix *state) defaultMode() string {
	if ix.vec == nil || ix.embedSpec.Provider() == "hash" {
		return ModeBM25
	}
	return ModeHybrid
}

// Explain is how a hit was ranked. A leg that did not find the hit among
// its candidates is nil.
type Explain struct {
	BM25   *LegRank `json:"bm25,omitempty"`
	Dense  *LegRank `json:"dense,omitempty"`
	Rerank *LegRank `json:"rerank,omitempty"`
}

// LegRank is a hit's place in one ranking: Rank from 1, and that ranking's
// score (BM25F, cosine similarity, or the reranker's).
type LegRank struct {
	Rank  int     `json:"rank"`
	Score float64 `json:"score"`
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
	// BlockID is the block's stable id, BlockIDLen lowercase hex digits
	// (a string: JSON numbers lose integers above 2^53). It depends only
	// on the document and the block's bytes (see Expand): it survives
	// re-ingest of unchanged bytes, rebuild, reembed, compaction and
	// rollback, and a changed or deleted document's ids name no block.
	BlockID     string   `json:"block_id"`
	DocID       string   `json:"doc_id"`
	Source      string   `json:"source"`
	Title       string   `json:"title"`
	Body        string   `json:"body"`
	Context     string   `json:"context"`
	HeadingPath []string `json:"heading_path"` // never nil
	Page        int      `json:"page"`         // 0 when the format has no pages
	ByteStart   int64    `json:"byte_start"`
	ByteEnd     int64    `json:"byte_end"`
	// Score is the ranking's: BM25F in ModeBM25, cosine similarity in
	// ModeDense, the fused score in ModeHybrid. A reranker reorders hits
	// without changing it.
	Score   float64  `json:"score"`
	Explain *Explain `json:"explain,omitempty"` // with SearchOptions.Explain
	// PromptText is the block's window, for generation: its parent
	// section (parent_child) or the sentences around it (sentence_window),
	// verbatim. Cite Body; give the generator PromptText. Empty, and absent
	// from JSON, for the default chunker. It never took part in ranking.
	PromptText string `json:"prompt_text,omitempty"`
	// ParentLocator is where PromptText lies in the document.
	ParentLocator *Locator `json:"parent_locator,omitempty"`
	// Meta is the document's metadata (DocumentInfo.Meta); absent when
	// none.
	Meta map[string]any `json:"meta,omitempty"`
}

// Search ranks blocks for query in the mode opts asks for and returns the
// best K with their stored fields, best first; equal scores are ordered by
// the index's internal block order (the order blocks were written). A query without terms (and, for the dense leg, without a
// non-zero vector) returns no hits. It sees every committed ingest, with no
// refresh step, and a write whole or not at all.
//
// Errors: invalid options; a mode the index cannot serve (ModeDense
// without vectors); ErrEmbedder wrapping the embedder's error; the
// reranker's error; storage errors.
func (ix *Index) Search(ctx context.Context, query string, opts *SearchOptions) ([]Hit, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	hits, err := s.search(ctx, query, opts)
	if s.outOfMemory(ctx, "search", err) {
		hits, err = s.search(ctx, query, opts)
	}
	return hits, err
}

// search is Index.Search on one generation.
func (ix *state) search(ctx context.Context, query string, opts *SearchOptions) ([]Hit, error) {
	hits := []Hit{}
	err := ix.ranked(ctx, query, opts, func(tx querier, ranked []candidate, levels []string) error {
		ids := make([]int64, len(ranked))
		for i, r := range ranked {
			ids[i] = r.id
		}
		var kept []int
		var err error
		if hits, kept, err = ix.fillHitsCached(ctx, tx, ids, levels); err != nil {
			return err
		}
		for i, k := range kept {
			hits[i].Score, hits[i].Explain = ranked[k].score, ranked[k].explain
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.Reranker != nil && len(hits) > 0 {
		if hits, err = rerankHits(ctx, opts.Reranker, query, hits, opts.Explain); err != nil {
			return nil, fmt.Errorf("search %s: %w: %w", echoQuery(query), ErrReranker, err)
		}
	}
	return hits, nil
}

// rerankHits reorders hits as the reranker says (rerank.Order), after the
// output gate: a reranker only ever sees passages the caller may see.
func rerankHits(ctx context.Context, r rerank.Reranker, query string, hits []Hit, explain bool) ([]Hit, error) {
	passages := make([]string, len(hits))
	for i, h := range hits {
		passages[i] = embedText(h.Context, h.Body)
	}
	results, err := r.Rerank(ctx, query, passages)
	if err != nil {
		return nil, err
	}
	order, err := rerank.Order(len(hits), results)
	if err != nil {
		return nil, err
	}
	scores := map[int]float64{}
	for _, res := range results {
		scores[res.Index] = res.Score
	}
	out := make([]Hit, len(hits))
	for rank, i := range order {
		out[rank] = hits[i]
		if s, ok := scores[i]; ok && explain {
			if out[rank].Explain == nil {
				out[rank].Explain = &Explain{}
			}
			out[rank].Explain.Rerank = &LegRank{Rank: rank + 1, Score: s}
		}
	}
	return out, nil
}

// Ranked is a block's place in a ranking, without its stored fields.
type Ranked struct {
	BlockID string // as Hit.BlockID
	Score   float64
}

// Rank ranks as Search does but returns block ids and scores only: the
// cost of ranking without that of reading the hits' rows (which grows with
// K). Read the rows of the blocks wanted with DocumentBlocks or Search. A
// Reranker needs the rows: Rank refuses one.
func (ix *Index) Rank(ctx context.Context, query string, opts *SearchOptions) ([]Ranked, error) {
	s, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer s.unref()
	ranked, err := s.rank(ctx, query, opts)
	if s.outOfMemory(ctx, "rank", err) {
		ranked, err = s.rank(ctx, query, opts)
	}
	return ranked, err
}

// rank is Index.Rank on one generation.
func (ix *state) rank(ctx context.Context, query string, opts *SearchOptions) ([]Ranked, error) {
	if opts != nil && opts.Reranker != nil {
		return nil, fmt.Errorf("rank %s: a reranker reads the hits' rows; use Search", echoQuery(query))
	}
	out := []Ranked{}
	err := ix.ranked(ctx, query, opts, func(tx querier, ranked []candidate, _ []string) error {
		if len(ranked) == 0 {
			return nil
		}
		ids := make([]int64, len(ranked))
		for i, r := range ranked {
			ids[i] = r.id
		}
		public, err := ix.pub.lookup(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i, r := range ranked {
			out = append(out, Ranked{BlockID: public[i], Score: r.score})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryTerms analyzes a query: as lang when given, else as each language of
// the documents at a level up to maxLevel (the caller's clearance: the
// languages of documents above it must not change what a query finds), and
// returns the distinct terms, sorted.
func (ix *state) queryTerms(query, lang string, maxLevel uint8) ([]string, error) {
	langs := []string{lang}
	if lang == "" {
		langs = ix.languages(maxLevel)
	} else if err := ix.analyzer.CheckLanguage(lang); err != nil {
		return nil, err
	}
	var terms []string
	for _, l := range langs {
		terms = ix.analyzer.Terms(terms, query, l)
	}
	return uniqueSorted(terms), nil
}

// languages returns the languages of the documents at a level up to
// maxLevel, sorted, or DefaultLanguage when there are none.
func (ix *state) languages(maxLevel uint8) []string {
	ix.langMu.RLock()
	defer ix.langMu.RUnlock()
	var out []string
	for l, n := range ix.langs {
		for lv := 0; lv <= int(maxLevel) && lv < len(n); lv++ {
			if n[lv] > 0 {
				out = append(out, l)
				break
			}
		}
	}
	if len(out) == 0 {
		return []string{DefaultLanguage}
	}
	sort.Strings(out)
	return out
}

// countLanguages counts the documents per language and sensitivity level,
// from q (a write's transaction, before it commits: the counts it will
// leave).
func (ix *state) countLanguages(ctx context.Context, q querier) (map[string][3]int, error) {
	rows, err := q.QueryContext(ctx, `SELECT language, sensitivity, count(*) FROM documents GROUP BY ALL`)
	if err != nil {
		return nil, fmt.Errorf("read languages: %w", err)
	}
	defer rows.Close()
	langs := map[string][3]int{}
	for rows.Next() {
		var l, sens string
		var n int
		if err := rows.Scan(&l, &sens, &n); err != nil {
			return nil, fmt.Errorf("read languages: %w", err)
		}
		c := langs[l]
		c[level(sens)] += n
		langs[l] = c
	}
	return langs, rows.Err()
}

// setLanguages installs counts from countLanguages. A write calls it with
// its commit, under the full-text write lock, so a search sees the
// documents and their languages together.
func (ix *state) setLanguages(langs map[string][3]int) {
	ix.langMu.Lock()
	ix.langs = langs
	ix.langMu.Unlock()
	ix.metaStale() // the counts were read again: so are the documents
}

// fillHits reads the stored fields of the blocks ids (internal numbers),
// keeping their order, and is the output gate: it drops any block whose
// document's sensitivity is not in levels, whatever the ranking did.
// kept[i] is the index in ids of hits[i]. Hits carry the public id only.
// It joins the blocks with their documents' rows; a search, inside
// fts.View, reads the documents from memory instead (fillHitsCached).
func fillHits(ctx context.Context, q querier, ids []int64, levels []string) (hits []Hit, kept []int, err error) {
	return fillHitsFrom(ctx, q, ids, levels, nil, nil)
}

// fillHitsCached is fillHits with the documents' fields from the
// generation's table (hitdocs.go): call it inside fts.View, with q the
// search's snapshot. The first hitDocsLoadAfter-1 searches of a state
// that has not loaded the table read through the join (fillHits); the
// next loads it.
//
// The blocks are read by a statement prepared once per state (parsing
// and planning it cost about as much as running it). When q is a lazyTx
// that has not begun, that is one statement on the database, without
// BEGIN and ROLLBACK (two more statements): a statement is its own
// snapshot, the one a transaction begun at that moment would read, and
// nothing else is read after it (a document missing from the table
// sends the whole read back to q, as fillHits).
func (ix *state) fillHitsCached(ctx context.Context, q querier, ids []int64, levels []string) (hits []Hit, kept []int, err error) {
	if len(ids) == 0 {
		return []Hit{}, nil, nil
	}
	if !ix.hitDocs.loadNow() {
		return fillHits(ctx, q, ids, levels)
	}
	if err := ix.hitDocs.load(ctx, q); err != nil {
		return nil, nil, err
	}
	stmt, err := ix.hitDocs.blocksStmt(ctx, ix.db)
	if err != nil {
		return nil, nil, err
	}
	var read *sql.Stmt // stmt on the connection q reads from
	if l, ok := q.(*lazyTx); ok {
		if l.tx == nil {
			read = stmt
		} else {
			read = l.tx.StmtContext(ctx, stmt)
			defer read.Close()
		}
	}
	hits, kept, err = fillHitsFrom(ctx, q, ids, levels, &ix.hitDocs, read)
	if errors.Is(err, errHitDocMissing) {
		return fillHitsFrom(ctx, q, ids, levels, nil, nil)
	}
	return hits, kept, err
}

// errHitDocMissing is fillHitsFrom's answer when a block's document is
// not in the table (a doc id that is not 32 hex digits): read them again
// joined with their documents' rows.
var errHitDocMissing = errors.New("a hit's document is not in memory")

// hitRow is a block's row as fillHits reads it, with its document's
// fields.
type hitRow struct {
	id                                int64
	hit                               Hit
	path, sens, window, locator, meta string
	given                             string
}

// hitBlocksSQL reads the hits' block rows, without their documents'.
const hitBlocksSQL = `SELECT b.block_id, b.public_id, b.doc_id, b.body, b.context,
		b.heading_path, b.page, b.byte_start, b.byte_end, b.window_text, b.parent_locator
		FROM blocks b JOIN (SELECT unnest(?::BIGINT[]) AS id) r ON r.id = b.block_id`

// fillHitsFrom is fillHits, with the documents' fields from docs when not
// nil (inside fts.View), else from their rows. stmt, when not nil, is
// hitBlocksSQL prepared where q reads (with docs only).
func fillHitsFrom(ctx context.Context, q querier, ids []int64, levels []string, docs *hitDocs, stmt *sql.Stmt) (hits []Hit, kept []int, err error) {
	if len(ids) == 0 {
		return []Hit{}, nil, nil
	}
	pos := make(map[int64]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	// A list parameter joined, not an IN list of placeholders: binding
	// 1,000 placeholders costs DuckDB ~50 ms, the list ~3 ms.
	query := `SELECT b.block_id, b.public_id, b.doc_id, d.source, d.title, b.body, b.context,
		b.heading_path, b.page, b.byte_start, b.byte_end, d.sensitivity, b.window_text, b.parent_locator, d.meta, d.meta_given
		FROM blocks b JOIN documents d ON d.doc_id = b.doc_id JOIN (SELECT unnest(?::BIGINT[]) AS id) r ON r.id = b.block_id`
	if docs != nil {
		query = hitBlocksSQL
	}
	var rows *sql.Rows
	if stmt != nil {
		rows, err = stmt.QueryContext(ctx, ids)
	} else {
		rows, err = q.QueryContext(ctx, query, ids)
	}
	if err != nil {
		return nil, nil, err
	}
	read := make([]hitRow, 0, len(ids))
	for rows.Next() {
		var r hitRow
		h := &r.hit
		if docs != nil {
			err = rows.Scan(&r.id, &h.BlockID, &h.DocID, &h.Body, &h.Context, &r.path, &h.Page, &h.ByteStart, &h.ByteEnd, &r.window, &r.locator)
		} else {
			err = rows.Scan(&r.id, &h.BlockID, &h.DocID, &h.Source, &h.Title, &h.Body, &h.Context, &r.path, &h.Page, &h.ByteStart, &h.ByteEnd, &r.sens, &r.window, &r.locator, &r.meta, &r.given)
		}
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		read = append(read, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if docs != nil {
		docIDs := make([]string, len(read))
		for i := range read {
			docIDs[i] = read[i].hit.DocID
		}
		byID, ok := docs.lookup(docIDs)
		if !ok {
			return nil, nil, errHitDocMissing
		}
		joined := read[:0]
		for _, r := range read {
			d, ok := byID[r.hit.DocID]
			if !ok {
				continue // no document row: counted below, as the join would drop it
			}
			r.hit.Source, r.hit.Title, r.sens = d.source, d.title, d.sensitivity
			r.meta, r.given = d.metaColumns()
			joined = append(joined, r)
		}
		read = joined
	}
	if len(read) != len(ids) {
		return nil, nil, fmt.Errorf("%d of %d ranked blocks have no block row", len(ids)-len(read), len(ids))
	}
	all := make([]Hit, len(ids))
	visible := make([]bool, len(ids))
	for _, r := range read {
		if !slices.Contains(levels, r.sens) {
			// The output gate, before expansion: a block the caller may
			// not see never has its window read into a hit.
			continue
		}
		h := r.hit
		if r.window != "" {
			h.PromptText = r.window
			h.ParentLocator = &Locator{}
			if err := json.Unmarshal([]byte(r.locator), h.ParentLocator); err != nil {
				return nil, nil, fmt.Errorf("block %s: parent_locator %q: %w", h.BlockID, r.locator, err)
			}
		}
		if h.HeadingPath, err = decodeHeadingPath(h.BlockID, r.path); err != nil {
			return nil, nil, err
		}
		if h.Meta, err = storedMeta(r.meta, r.given); err != nil {
			return nil, nil, fmt.Errorf("block %s: %w", h.BlockID, err)
		}
		all[pos[r.id]], visible[pos[r.id]] = h, true
	}
	hits = make([]Hit, 0, len(ids))
	for i, h := range all {
		if visible[i] {
			hits, kept = append(hits, h), append(kept, i)
		}
	}
	return hits, kept, nil
}

// decodeHeadingPath decodes blocks.heading_path (see headingJSON) of the
// block with public id block; never nil.
func decodeHeadingPath(block, s string) ([]string, error) {
	path := []string{}
	if err := json.Unmarshal([]byte(s), &path); err != nil {
		return nil, fmt.Errorf("block %s: heading_path %q: %w", block, s, err)
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

// queryColumn runs query, whose rows are one column of type T, and
// returns its values in order.
func queryColumn[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
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
