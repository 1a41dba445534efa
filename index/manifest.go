package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/escurel/escurel/analysis"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/internal/layout"
)

// Errors returned by Open, possibly wrapped; match them with errors.Is.
var (
	// ErrSchemaTooNew: the index file was written by a newer escurel. The
	// error is a *SchemaError.
	ErrSchemaTooNew = errors.New("index: schema newer than this binary")
	// ErrManifestMismatch: the configuration differs from what built the
	// index. The error is a *MismatchError.
	ErrManifestMismatch = errors.New("index: configuration differs from the manifest")
)

// Contextualize modes.
const (
	// ContextStructural stores "[<title> › <heading path> › p.<page>]" in
	// each block's context (chunk.Context).
	ContextStructural = "structural"
	// ContextOff stores an empty context.
	ContextOff = "off"
)

// Manifest records what built an index. Open compares it with the
// configuration and refuses a mismatch.
type Manifest struct {
	SchemaVersion int    `json:"schema_version"`
	EmbedderModel string `json:"embedder_model"` // "none" when the index has no vectors
	EmbedderDim   int    `json:"embedder_dim"`
	// EmbedderSpec is the embedder's whole spec (embed.Spec.String()),
	// identity and how to reach the model; "" in files made before schema
	// 7, where the spec is EmbedderModel/EmbedderDim.
	EmbedderSpec  string `json:"embedder_spec"`
	Chunker       string `json:"chunker"`       // chunk.Spec.String()
	Analyzer      string `json:"analyzer"`      // analysis.Analyzer.ID()
	Contextualize string `json:"contextualize"` // ContextStructural or ContextOff
	// Extractors are the extractor IDs (extract.IDs) of the binary that
	// created the index or upgraded its schema. Each document row names
	// its own extractor; a newer one is taken up by escurel rebuild.
	Extractors     string    `json:"extractors"`
	EscurelVersion string    `json:"escurel_version"`
	CreatedAt      time.Time `json:"created_at"` // UTC
	UpdatedAt      time.Time `json:"updated_at"` // UTC
}

// Embedder returns the manifest's embedder spec: EmbedderSpec parsed, or
// EmbedderModel and EmbedderDim when it is empty or unreadable by this
// binary (then Open reports the model as unsupported).
func (m Manifest) Embedder() embed.Spec {
	if m.EmbedderSpec != "" {
		if s, err := embed.ParseSpec(m.EmbedderSpec); err == nil {
			return s
		}
	}
	return embed.Spec{Model: m.EmbedderModel, Dim: m.EmbedderDim}
}

// MismatchError reports a configured setting that differs from the one the
// index was built with. A rebuild (package rebuild, with Want in the
// Options field Option) derives the index again with the configured one;
// escurel's CLI names the command.
type MismatchError struct {
	Path       string // the index file
	Setting    string // "embedder", "embedder dimension", "chunker", "analyzer" or "contextualize"
	Index      string // the manifest's value
	Configured string // the configured value
	// Option is the Options field that holds the setting ("Embedder",
	// "Chunker", "Analyzer", "Contextualize"), and Want its configured
	// value in that field's notation (an embed.Spec string, a chunk spec,
	// an analyzer, a mode).
	Option, Want string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("open %s: the index was built with %s %q but the configuration asks for %q; "+
		"rebuild it from the blob store with the new setting, or drop the setting to use the index's own",
		e.Path, e.Setting, e.Index, e.Configured)
}

// Unwrap returns ErrManifestMismatch.
func (e *MismatchError) Unwrap() error { return ErrManifestMismatch }

// settings is a resolved configuration; zero fields mean "not configured".
type settings struct {
	embedder      embed.Spec
	chunker       chunk.Spec
	analyzer      string // analyzer ID
	contextualize string
	memoryLimit   string // DuckDB memory_limit; not in the manifest
	reembed       bool   // Options.Reembed
}

// parseOptions validates the explicitly configured settings of opts.
func parseOptions(opts *Options) (settings, error) {
	s := settings{memoryLimit: DefaultMemoryLimit}
	if opts == nil {
		return s, nil
	}
	if opts.MemoryLimit != "" {
		if !memoryLimit.MatchString(opts.MemoryLimit) {
			return s, fmt.Errorf("memory limit %q: want a size such as 512MB or 4GB", opts.MemoryLimit)
		}
		s.memoryLimit = opts.MemoryLimit
	}
	if opts.DuckDBThreads < 0 {
		return s, fmt.Errorf("DuckDB threads %d: want 0 (the default, 1) or more", opts.DuckDBThreads)
	}
	if !opts.Embedder.IsZero() {
		spec, err := embed.ParseSpec(opts.Embedder.String())
		if err != nil {
			return s, err
		}
		if spec != opts.Embedder {
			return s, fmt.Errorf("embedder %+v: not a valid setting (as a spec it reads back as %+v; build it with embed.ParseSpec)", opts.Embedder, spec)
		}
		s.embedder = spec
	}
	if opts.Chunker != "" {
		spec, err := chunk.ParseSpec(opts.Chunker)
		if err != nil {
			return s, err
		}
		s.chunker = spec
	}
	if opts.Analyzer != "" {
		a, err := analysis.ByName(opts.Analyzer)
		if err != nil {
			if a, err = analysis.ByID(opts.Analyzer); err != nil {
				return s, err
			}
		}
		s.analyzer = a.ID()
	}
	if opts.Contextualize != "" {
		mode, err := ParseContextualize(opts.Contextualize)
		if err != nil {
			return s, err
		}
		s.contextualize = mode
	}
	return s, nil
}

// ParseContextualize accepts "structural" or "off"; anything else is an
// error, never a fallback.
func ParseContextualize(s string) (string, error) {
	switch s {
	case ContextStructural, ContextOff:
		return s, nil
	}
	return "", fmt.Errorf("contextualize %q: want %q or %q", s, ContextStructural, ContextOff)
}

// defaults fills the unset fields with the defaults for a new index.
func (s settings) defaults() settings {
	if s.embedder.IsZero() {
		s.embedder = embed.Default
	}
	if s.chunker == (chunk.Spec{}) {
		s.chunker = chunk.DefaultSpec
	}
	if s.analyzer == "" {
		s.analyzer = analysis.Standard{}.ID()
	}
	if s.contextualize == "" {
		s.contextualize = ContextStructural
	}
	return s
}

// against compares the configured settings with the manifest m of the index
// at path. Unset fields take the manifest's value. It fails with a
// *MismatchError when a configured value differs, and with a plain error when
// the manifest names something this binary cannot provide.
func (s settings) against(m Manifest, path string) (settings, error) {
	mismatch := func(setting, index, configured, option, want string) error {
		return &MismatchError{Path: path, Setting: setting, Index: index, Configured: configured, Option: option, Want: want}
	}
	if e := s.embedder; !e.IsZero() {
		got, have := adopt(e.Identity(), m.Embedder().Identity()), m.Embedder().Identity()
		if got != have {
			if got.Model == have.Model && got.Dim != have.Dim {
				return s, mismatch("embedder dimension", fmt.Sprint(have.Dim), fmt.Sprint(got.Dim), "Embedder", e.String())
			}
			return s, mismatch("embedder", have.String(), got.String(), "Embedder", e.String())
		}
	}
	if c := s.chunker.String(); s.chunker != (chunk.Spec{}) && c != m.Chunker {
		return s, mismatch("chunker", m.Chunker, c, "Chunker", c)
	}
	if s.analyzer != "" && s.analyzer != m.Analyzer {
		return s, mismatch("analyzer", m.Analyzer, s.analyzer, "Analyzer", s.analyzer)
	}
	if s.contextualize != "" && s.contextualize != m.Contextualize {
		return s, mismatch("contextualize", m.Contextualize, s.contextualize, "Contextualize", s.contextualize)
	}
	// Adopt the manifest's values, and check that this binary has them.
	unsupported := func(what string, err error) error {
		return fmt.Errorf("open %s: the index was built with %s, which this escurel cannot use (%v); run `escurel rebuild` with a setting it has", path, what, err)
	}
	out := settings{contextualize: m.Contextualize, analyzer: m.Analyzer, memoryLimit: s.memoryLimit}
	var err error
	spec := m.EmbedderSpec
	if spec == "" {
		spec = m.Embedder().String()
	}
	if _, err = embed.ParseSpec(spec); err != nil {
		return s, unsupported("embedder "+m.Embedder().String(), err)
	}
	out.embedder = reach(m.Embedder(), s.embedder)
	if out.chunker, err = chunk.ParseSpec(m.Chunker); err != nil {
		return s, unsupported("chunker "+m.Chunker, err)
	}
	if _, err = analysis.ByID(m.Analyzer); err != nil {
		return s, unsupported("analyzer "+m.Analyzer, err)
	}
	if _, err = ParseContextualize(m.Contextualize); err != nil {
		return s, unsupported("contextualize "+m.Contextualize, err)
	}
	return out, nil
}

// adopt returns the identity got with the fields it leaves unset (the
// dimension, both prefixes) taken from have.
func adopt(got, have embed.Spec) embed.Spec {
	if got.Dim == 0 && got.Model != embed.None.Model {
		got.Dim = have.Dim
	}
	if got.QueryPrefix == "" && got.DocumentPrefix == "" {
		got.QueryPrefix, got.DocumentPrefix = have.QueryPrefix, have.DocumentPrefix
	}
	if got.Fingerprint == "" {
		got.Fingerprint = have.Fingerprint // checked against the files when the model is loaded
	}
	return got
}

// ResolveEmbedder returns the embedder a configuration asks of an index
// built as m says: the manifest's when configured is zero or names the same
// model (its unset dimension and prefixes are the manifest's), with
// configured's ways to reach it; configured itself when it names another
// model. Rebuild uses it so that "--embedder 'openai:m?url=NEW'" keeps the
// recorded prefixes.
func (m Manifest) ResolveEmbedder(configured embed.Spec) embed.Spec {
	if configured.IsZero() {
		return m.Embedder()
	}
	if adopt(configured.Identity(), m.Embedder().Identity()) == m.Embedder().Identity() {
		return reach(m.Embedder(), configured)
	}
	return configured
}

// reach returns the manifest's embedder spec with the configured spec's
// ways to reach the model (url, path, key_env, batch, timeout, retries)
// where they are set: the identity is the manifest's, the server or the
// model directory may move.
func reach(m, configured embed.Spec) embed.Spec {
	if configured.URL != "" {
		m.URL = configured.URL
	}
	if configured.Path != "" {
		m.Path = configured.Path
	}
	if configured.Dimensions {
		m.Dimensions = true // ask the server for Dim (dimensions=N)
	}
	if configured.KeyEnv != "" {
		m.KeyEnv = configured.KeyEnv
	}
	if configured.Batch != 0 {
		m.Batch = configured.Batch
	}
	if configured.Timeout != 0 {
		m.Timeout = configured.Timeout
	}
	if configured.Retries != 0 {
		m.Retries = configured.Retries
	}
	return m
}

func readManifest(ctx context.Context, db *sql.DB) (Manifest, bool, error) {
	var m Manifest
	// Inspect reads files it does not migrate: columns added since 0001
	// may be missing there.
	cols := map[string]string{"embedder_spec": "''", "extractors": "''"}
	rows, err := db.QueryContext(ctx, `SELECT column_name FROM information_schema.columns WHERE table_name = 'manifest'`)
	if err != nil {
		return m, false, fmt.Errorf("read manifest: %w", err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return m, false, fmt.Errorf("read manifest: %w", err)
		}
		if _, ok := cols[c]; ok {
			cols[c] = c
		}
	}
	rows.Close()
	err = db.QueryRowContext(ctx, `SELECT schema_version, embedder_model, embedder_dim, `+cols["embedder_spec"]+`, chunker, analyzer,
		contextualize, `+cols["extractors"]+`, escurel_version, created_at, updated_at FROM manifest WHERE id = 1`).Scan(
		&m.SchemaVersion, &m.EmbedderModel, &m.EmbedderDim, &m.EmbedderSpec, &m.Chunker, &m.Analyzer,
		&m.Contextualize, &m.Extractors, &m.EscurelVersion, &m.CreatedAt, &m.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read manifest: %w", err)
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return m, true, nil
}

func writeManifest(ctx context.Context, db *sql.DB, m Manifest) error {
	_, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO manifest (id, schema_version, embedder_model, embedder_dim,
		embedder_spec, chunker, analyzer, contextualize, extractors, escurel_version, created_at, updated_at)
		VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.SchemaVersion, m.EmbedderModel, m.EmbedderDim, m.EmbedderSpec, m.Chunker, m.Analyzer, m.Contextualize,
		m.Extractors, m.EscurelVersion, m.CreatedAt, m.UpdatedAt)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// inspect returns the manifest of the live index in dir, its documents
// (doc id → source) and which of them failed extraction (doc id → true;
// none in a file from before schema 9) without migrating it, after a CHECKPOINT that folds any
// write-ahead log into the file. It does not take the directory lock. It
// fails with an error wrapping fs.ErrNotExist when dir has no index file,
// with a *SchemaError when the file is newer than this binary, and with
// DuckDB's error when another process holds the file.
func inspect(ctx context.Context, dir string) (Manifest, map[string]string, map[string]bool, error) {
	path, err := layout.LivePath(dir)
	if err != nil {
		return Manifest{}, nil, nil, fmt.Errorf("inspect %s: %w", dir, err)
	}
	fail := func(err error) (Manifest, map[string]string, map[string]bool, error) {
		return Manifest{}, nil, nil, fmt.Errorf("inspect %s: %w", path, err)
	}
	db, err := sql.Open("duckdb", sideDSN(path))
	if err != nil {
		return fail(fmt.Errorf("%v: %w", err, ErrDamaged))
	}
	defer db.Close()
	var version int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fail(fmt.Errorf("%v: %w", err, ErrDamaged))
	}
	if version > SchemaVersion {
		return Manifest{}, nil, nil, &SchemaError{Path: path, File: version, Binary: SchemaVersion}
	}
	m, ok, err := readManifest(ctx, db)
	if err == nil && !ok {
		err = errors.New("no manifest row")
	}
	if err != nil {
		return fail(fmt.Errorf("%v: %w", err, ErrDamaged))
	}
	status := `'ok'`
	if version >= 9 {
		status = `status`
	}
	rows, err := db.QueryContext(ctx, `SELECT doc_id, source, `+status+` FROM documents`)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	docs, failed := map[string]string{}, map[string]bool{}
	for rows.Next() {
		var id, src, st string
		if err := rows.Scan(&id, &src, &st); err != nil {
			return fail(err)
		}
		docs[id] = src
		if st == statusFailed {
			failed[id] = true
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if _, err := db.ExecContext(ctx, `CHECKPOINT`); err != nil {
		return fail(err)
	}
	return m, docs, failed, nil
}
