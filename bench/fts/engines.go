package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	bleveindex "github.com/blevesearch/bleve_index_api"
	duckdb "github.com/duckdb/duckdb-go/v2"
	_ "github.com/mattn/go-sqlite3"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/dense"
)

// Engine is one full-text engine under test.
type Engine interface {
	Add(ps []Passage) error       // index passages, durably, as one batch
	Search(q string) (int, error) // top 10 ids for a disjunctive query; returns how many
	Delete(id string) error       // remove one passage, durably
	Close() error
}

var engineNames = []string{"escurel", "bleve", "sqlite"}

// denseEngines are the engines of the dense benchmark (make bench-dense).
var denseEngines = []string{"escurel-hybrid", "escurel-dense", "duckdb-dense"}

// shares names an engine that searches another's index instead of
// building its own: it is not built, and adds and deletes nothing.
var shares = map[string]string{"escurel-dense": "escurel-hybrid"}

// recaller is an engine whose dense leg may be quantized: it answers a
// query's top 10 block ids as searched, and as searched with the dense leg
// scanning every vector exactly (dense.WithExact), the reference of its
// recall@10.
type recaller interface {
	Top10(q string, exact bool) ([]string, error)
}

// top10 is escurel's top 10 block ids for q in mode.
func top10(ix *index.Index, q, mode string, exact bool) ([]string, error) {
	ctx := context.Background()
	if exact {
		ctx = dense.WithExact(ctx)
	}
	hits, err := ix.Rank(ctx, q, &index.SearchOptions{K: 10, Mode: mode})
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.BlockID
	}
	return ids, err
}

func openEngine(name, dir string, memBlobs bool) (Engine, error) {
	switch name {
	case "escurel":
		return openEscurel(dir, memBlobs)
	case "escurel-hybrid":
		return openEscurelVectors(dir, memBlobs, index.ModeHybrid)
	case "duckdb-dense":
		return openDuckDense(dir)
	case "bleve":
		return openBleve(dir)
	case "sqlite":
		return openSQLite(dir)
	}
	return nil, fmt.Errorf("unknown engine %q", name)
}

// useLoose gives the index's new file:// blob store the loose layout
// (one file per blob and record) when -blob-loose is given; packs are
// the default.
func useLoose(dir string, memBlobs bool) error {
	if !*blobLoose || memBlobs {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	abs, err := filepath.Abs(filepath.Join(dir, "blobs"))
	if err != nil {
		return err
	}
	s, err := blobstore.OpenWith(context.Background(), "file://"+filepath.ToSlash(abs), &blobstore.OpenOptions{Loose: true})
	if err != nil {
		return err
	}
	return s.Close()
}

// escurel: BM25-only index (no vectors), file:// blob store unless
// memBlobs; a passage is a document with its title given.
type escurelEngine struct {
	ix   *index.Index
	mode string // "" is the index's default
}

func openEscurel(dir string, memBlobs bool) (*escurelEngine, error) {
	opts := &index.Options{Embedder: embed.None, MemoryLimit: os.Getenv("BENCH_MEMLIMIT")}
	if memBlobs {
		opts.BlobURL = "mem://"
	}
	if err := useLoose(dir, memBlobs); err != nil {
		return nil, err
	}
	ix, err := index.Open(context.Background(), dir, opts)
	if err != nil {
		return nil, err
	}
	return &escurelEngine{ix: ix}, nil
}

func (e *escurelEngine) Add(ps []Passage) error {
	ins := make([]index.Input, len(ps))
	for i, p := range ps {
		ins[i] = index.Input{Source: "bench://" + p.ID, Name: p.ID + ".txt", MediaType: "text/plain", Title: p.Title, Data: []byte(p.Body)}
	}
	_, errs, err := e.ix.IngestBatch(context.Background(), ins)
	if err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Top10 is a recaller's; only an engine with vectors has one to measure.
func (e *escurelEngine) Top10(q string, exact bool) ([]string, error) {
	return top10(e.ix, q, e.mode, exact)
}

func (e *escurelEngine) Search(q string) (int, error) {
	hits, err := e.ix.Rank(context.Background(), q, &index.SearchOptions{K: 10, Mode: e.mode})
	return len(hits), err
}

// escurel-hybrid: the same, with hash/384 vectors, searched in hybrid mode
// (RRF over each leg's top 100).
func openEscurelVectors(dir string, memBlobs bool, mode string) (*escurelEngine, error) {
	opts := &index.Options{Embedder: embed.Default}
	if memBlobs {
		opts.BlobURL = "mem://"
	}
	if err := useLoose(dir, memBlobs); err != nil {
		return nil, err
	}
	ix, err := index.Open(context.Background(), dir, opts)
	if err != nil {
		return nil, err
	}
	return &escurelEngine{ix: ix, mode: mode}, nil
}

// view is an engine searching another engine's escurel index in another
// mode (escurel-dense: escurel-hybrid's index in dense mode).
type view struct {
	ix   *index.Index
	mode string
}

func (v *view) Add([]Passage) error { return nil }
func (v *view) Search(q string) (int, error) {
	hits, err := v.ix.Rank(context.Background(), q, &index.SearchOptions{K: 10, Mode: v.mode})
	return len(hits), err
}
func (v *view) Top10(q string, exact bool) ([]string, error) { return top10(v.ix, q, v.mode, exact) }
func (v *view) Delete(string) error                          { return nil }
func (v *view) Close() error                                 { return nil }

func (e *escurelEngine) Delete(id string) error {
	_, err := e.ix.Delete(context.Background(), "bench://"+id)
	return err
}

func (e *escurelEngine) Close() error { return e.ix.Close() }

// WaitForMerges waits for the full-text merges the last add left to the
// background (Index.WaitForMerges).
func (e *escurelEngine) WaitForMerges() error { return e.ix.WaitForMerges(context.Background()) }

// merger is an engine whose adds leave work to the background: the
// benchmark waits for it, so that an add is timed with the work it
// caused and the delete after it is timed alone.
type merger interface{ WaitForMerges() error }

// waitMerges waits for e's background merges, if it has any.
func waitMerges(e Engine) error {
	if m, ok := e.(merger); ok {
		return m.WaitForMerges()
	}
	return nil
}

// duckdb-dense: the peer of escurel's dense leg, DuckDB alone. The same
// hash/384 vectors of "[title]\nbody" in a FLOAT[384] column; a query is
// ORDER BY array_inner_product(vector, query) DESC LIMIT 10 (DuckDB's
// exact scan; its vss extension, which adds HNSW, cannot be installed
// here).
type duckDense struct {
	db  *sql.DB
	emb embed.Embedder
}

func openDuckDense(dir string) (*duckDense, error) {
	db, err := sql.Open("duckdb", filepath.Join(dir, "vectors.duckdb"))
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS v (id VARCHAR PRIMARY KEY, vector FLOAT[384] NOT NULL)`); err != nil {
		return nil, err
	}
	return &duckDense{db: db, emb: embed.NewHash(embed.DefaultHashDim)}, nil
}

func (d *duckDense) Add(ps []Passage) error {
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = "[" + p.Title + "]\n" + p.Body
	}
	vs, err := d.emb.Embed(context.Background(), texts)
	if err != nil {
		return err
	}
	conn, err := d.db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(c any) error {
		app, err := duckdb.NewAppenderFromConn(c.(driver.Conn), "", "v")
		if err != nil {
			return err
		}
		for i, p := range ps {
			if err := app.AppendRow(p.ID, vs[i]); err != nil {
				app.Close()
				return err
			}
		}
		return app.Close()
	})
}

func (d *duckDense) Search(q string) (int, error) {
	vs, err := d.emb.Embed(context.Background(), []string{q})
	if err != nil {
		return 0, err
	}
	rows, err := d.db.Query(`SELECT id FROM v ORDER BY array_inner_product(vector, ?::FLOAT[384]) DESC LIMIT 10`, vs[0])
	if err != nil {
		return 0, err
	}
	return count(rows)
}

func (d *duckDense) Delete(id string) error {
	_, err := d.db.Exec(`DELETE FROM v WHERE id = ?`, id)
	return err
}

func (d *duckDense) Close() error { return d.db.Close() }

// count counts and closes rows.
func count(rows *sql.Rows) (int, error) {
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// bleve: default mapping, English analyzer, BM25 scoring, match query on
// the composite _all field (title and body).
type bleveEngine struct {
	idx bleve.Index
}

func openBleve(dir string) (*bleveEngine, error) {
	path := filepath.Join(dir, "bleve")
	if _, err := os.Stat(path); err == nil {
		idx, err := bleve.Open(path)
		return &bleveEngine{idx}, err
	}
	m := bleve.NewIndexMapping()
	m.DefaultAnalyzer = en.AnalyzerName
	m.ScoringModel = bleveindex.BM25Scoring
	idx, err := bleve.New(path, m)
	return &bleveEngine{idx}, err
}

func (b *bleveEngine) Add(ps []Passage) error {
	batch := b.idx.NewBatch()
	for _, p := range ps {
		if err := batch.Index(p.ID, map[string]string{"title": p.Title, "body": p.Body}); err != nil {
			return err
		}
	}
	return b.idx.Batch(batch)
}

func (b *bleveEngine) Search(q string) (int, error) {
	req := bleve.NewSearchRequestOptions(bleve.NewMatchQuery(q), 10, 0, false)
	res, err := b.idx.Search(req)
	if err != nil {
		return 0, err
	}
	return len(res.Hits), nil
}

func (b *bleveEngine) Delete(id string) error { return b.idx.Delete(id) }
func (b *bleveEngine) Close() error           { return b.idx.Close() }

// sqlite: FTS5 over (title, body) with the porter stemmer, WAL journal,
// synchronous=FULL (each commit durable, as escurel's and bleve's are), bm25() with title weight 2, English stop words left
// out of the OR query (as the other two engines' analyzers drop them).
type sqliteEngine struct {
	db   *sql.DB
	stop map[string]bool
	ids  map[string]int64
}

func openSQLite(dir string) (*sqliteEngine, error) {
	db, err := sql.Open("sqlite3", filepath.Join(dir, "fts.db")+"?_journal_mode=WAL&_synchronous=FULL")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE IF NOT EXISTS p USING fts5(title, body, tokenize='porter unicode61')`); err != nil {
		return nil, err
	}
	return &sqliteEngine{db: db, stop: stopWords(), ids: map[string]int64{}}, nil
}

func rowid(id string) int64 {
	var n int64
	fmt.Sscanf(id, "p%d", &n)
	return n + 1
}

func (s *sqliteEngine) Add(ps []Passage) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	st, err := tx.Prepare(`INSERT INTO p(rowid, title, body) VALUES (?, ?, ?)`)
	if err != nil {
		tx.Rollback()
		return err
	}
	for _, p := range ps {
		if _, err := st.Exec(rowid(p.ID), p.Title, p.Body); err != nil {
			tx.Rollback()
			return err
		}
	}
	st.Close()
	return tx.Commit()
}

func (s *sqliteEngine) Search(q string) (int, error) {
	var terms []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !s.stop[w] {
			terms = append(terms, `"`+w+`"`)
		}
	}
	if len(terms) == 0 {
		return 0, nil
	}
	rows, err := s.db.Query(`SELECT rowid FROM p WHERE p MATCH ? ORDER BY bm25(p, 2.0, 1.0) LIMIT 10`, strings.Join(terms, " OR "))
	if err != nil {
		return 0, err
	}
	return count(rows)
}

func (s *sqliteEngine) Delete(id string) error {
	_, err := s.db.Exec(`DELETE FROM p WHERE rowid = ?`, rowid(id))
	return err
}

func (s *sqliteEngine) Close() error {
	s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return s.db.Close()
}

// stopWords reads escurel's English Snowball stop list.
func stopWords() map[string]bool {
	data, _ := os.ReadFile("../../analysis/stopwords/en.txt")
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		w, _, _ := strings.Cut(line, "|")
		for _, f := range strings.Fields(w) {
			out[f] = true
		}
	}
	return out
}
