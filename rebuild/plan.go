package rebuild

// The plan: what a rebuild or re-embed will do, worked out from the live
// index and the blob store's records before anything changes.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/hooks"
	"github.com/escurel/escurel/internal/layout"
)

// Plan is what a rebuild or a re-embed will do, found without changing
// anything: the live generation and its settings, the settings of the new
// one, and how many documents it derives. escurel rebuild --dry-run prints
// it (litestream's restore plan is the model).
type Plan struct {
	Kind    string // "rebuild" or "reembed"
	Dir     string
	BlobURL string // the blob store, redacted (blobstore.Redact)
	// From is the live generation; "" when there is none (a new index, or
	// a lost live generation).
	From string
	// Live holds the live generation's settings; Settings the new one's,
	// resolved: a setting not given keeps the live one's.
	Live     index.Manifest
	Settings index.Options
	// Changes lists the settings that differ, as "name: old → new".
	Changes []string
	// Documents is how many records the new generation derives (for a
	// re-embed: how many documents it embeds again).
	Documents int
	// Dropped lists the sources of live documents without a record,
	// dropped under Options.AllowMissing.
	Dropped []string
	// Restored lists the sources of damaged records (see
	// blobstore.DamagedRecord) that the rebuild writes anew from the live
	// generation's copy of them (its documents row) before deriving.
	Restored []string
	// Left lists the damaged records no live row restores, left out
	// under Options.AllowMissing (their documents are not served).
	Left []blobstore.DamagedRecord
	// Keep is how many generations stay afterwards.
	Keep int
	// Damaged, when not "", is why the live generation (or CURRENT) could
	// not be read (index.ErrDamaged): the rebuild derives everything from
	// the blob store, with the settings given or the defaults.
	Damaged string

	reembed  bool
	hasLive  bool
	recs     []*blobstore.Record
	restore  []*blobstore.Record
	liveDocs map[string]string
	liveFail map[string]bool
}

// String is the plan as escurel rebuild --dry-run prints it.
func (p *Plan) String() string {
	var b strings.Builder
	from := p.From
	if from == "" {
		from = "none"
	}
	fmt.Fprintf(&b, "%s %s from %s\n", p.Kind, p.Dir, p.BlobURL)
	fmt.Fprintf(&b, "live generation: %s\n", from)
	if p.Damaged != "" {
		fmt.Fprintf(&b, "damaged: %s (rebuilt from the blob store; settings not given are the defaults)\n", p.Damaged)
	}
	fmt.Fprintf(&b, "documents: %d\n", p.Documents)
	if len(p.Dropped) > 0 {
		fmt.Fprintf(&b, "dropped (no record): %d, first %s\n", len(p.Dropped), strconv.Quote(p.Dropped[0]))
	}
	for _, src := range p.Restored {
		fmt.Fprintf(&b, "restore damaged record of %s from the live generation's row\n", strconv.Quote(src))
	}
	for _, d := range p.Left {
		fmt.Fprintf(&b, "leave out damaged record %s (%s): %s\n", d.Key, sourceOf(d), d.Reason)
	}
	s := p.Settings
	fmt.Fprintf(&b, "settings: embedder %s, chunker %s, analyzer %s, contextualize %s\n",
		orDefault(s.Embedder.String(), "default"), orDefault(s.Chunker, "default"), orDefault(s.Analyzer, "default"), orDefault(s.Contextualize, "default"))
	if len(p.Changes) == 0 {
		b.WriteString("changes: none (the same rows, re-derived)\n")
	}
	for _, c := range p.Changes {
		fmt.Fprintf(&b, "change: %s\n", c)
	}
	fmt.Fprintf(&b, "keep: %d generations\n", p.Keep)
	return b.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// PlanRun returns the plan of Run(ctx, opts) without changing anything.
// Without opts.Live it takes the directory's lock while it reads, so it
// fails with index.ErrLocked while another process holds the index. Errors
// as Run's that come before any change.
func PlanRun(ctx context.Context, opts Options) (*Plan, error) {
	return planOnly(ctx, opts, false)
}

// PlanReembed returns the plan of Reembed(ctx, opts), as PlanRun does.
func PlanReembed(ctx context.Context, opts Options) (*Plan, error) {
	if opts.Index.Embedder.IsZero() {
		return nil, errors.New("reembed: no embedder given")
	}
	return planOnly(ctx, opts, true)
}

func planOnly(ctx context.Context, opts Options, reembed bool) (*Plan, error) {
	d, release, err := acquireDir(opts, kind(reembed))
	if err != nil {
		return nil, err
	}
	defer release()
	return plan(ctx, d, opts, reembed)
}

func kind(reembed bool) string {
	if reembed {
		return "reembed"
	}
	return "rebuild"
}

// acquireDir returns the index directory: the live index's, or locked
// here (released by release) and moved to the generations layout.
func acquireDir(opts Options, what string) (d *layout.Dir, release func(), err error) {
	if opts.Blobs == nil {
		return nil, nil, fmt.Errorf("%s: no blob store", what)
	}
	if opts.Live != nil {
		if opts.Live.Dir() != opts.Dir {
			return nil, nil, fmt.Errorf("%s: Live is the index of %s, not %s", what, opts.Live.Dir(), opts.Dir)
		}
		return hooks.Dir(opts.Live), func() {}, nil
	}
	if d, err = layout.Lock(opts.Dir); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := d.UpgradeLayout(); err != nil {
		d.Unlock()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return d, func() { d.Unlock() }, nil
}

// plan reads the live index and the blob store's records and works out
// what a rebuild (or re-embed) does, refusing what it must not do.
func plan(ctx context.Context, d *layout.Dir, opts Options, reembed bool) (*Plan, error) {
	what := kind(reembed)
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Keep < 1 {
		return nil, fmt.Errorf("%s: keep %d generations: want at least 1", what, opts.Keep)
	}
	p := &Plan{Kind: what, Dir: opts.Dir, BlobURL: opts.Blobs.Redacted(), Keep: opts.Keep, reembed: reembed, hasLive: true}
	settings := opts.Index
	settings.BlobURL, settings.Blobs = "", opts.Blobs
	var err error
	if opts.Live != nil {
		p.Live, p.From = opts.Live.Manifest(), opts.Live.Generation()
		if p.liveDocs, p.liveFail, err = liveState(ctx, opts.Live); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	} else {
		var m any
		m, p.liveDocs, p.liveFail, err = hooks.Inspect(ctx, opts.Dir)
		switch {
		case err == nil:
			p.Live = m.(index.Manifest)
			p.From, _, _ = d.Current()
		case errors.Is(err, fs.ErrNotExist):
			p.hasLive = false
		case errors.Is(err, index.ErrDamaged) && !reembed:
			// Everything derived comes from the blob store: rebuild from
			// it, with the settings given or the defaults, and leave the
			// damaged generation to the cleaner.
			p.hasLive, p.Damaged = false, err.Error()
		default:
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	if reembed && !p.hasLive {
		return nil, fmt.Errorf("reembed: no index in %s to re-embed; use rebuild", opts.Dir)
	}
	if p.hasLive {
		if !reembed {
			settings.Embedder = p.Live.ResolveEmbedder(settings.Embedder)
		}
		settings.Chunker = firstNonEmpty(settings.Chunker, p.Live.Chunker)
		settings.Analyzer = firstNonEmpty(settings.Analyzer, p.Live.Analyzer)
		settings.Contextualize = firstNonEmpty(settings.Contextualize, p.Live.Contextualize)
		change := func(name, old, new string) {
			if new != "" && new != old {
				p.Changes = append(p.Changes, fmt.Sprintf("%s: %s → %s", name, old, new))
			}
		}
		change("embedder", p.Live.Embedder().Identity().String(), settings.Embedder.Identity().String())
		change("chunker", p.Live.Chunker, settings.Chunker)
		change("analyzer", p.Live.Analyzer, settings.Analyzer)
		change("contextualize", p.Live.Contextualize, settings.Contextualize)
	}
	p.Settings = settings
	var damaged []blobstore.DamagedRecord
	if p.recs, damaged, err = opts.Blobs.ScanRecords(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(damaged) > 0 {
		if err := p.restoreDamaged(ctx, opts, damaged); err != nil {
			return nil, err
		}
	}
	// The coverage check guards against a mistyped blob store; the live
	// index's own store is right by construction, and with writers running
	// its records and the index's documents are read at different moments.
	if opts.Live == nil || opts.Blobs != opts.Live.Blobs() {
		if p.Dropped, err = checkCoverage(p.recs, p.liveDocs, opts); err != nil {
			return nil, err
		}
	}
	if reembed {
		// The copy holds the live rows; records without rows (an ingest
		// killed between its blobs and its rows) would make it fail to
		// verify, after all the embedding.
		var lacking []string
		for _, r := range p.recs {
			if _, ok := p.liveDocs[r.DocID]; !ok {
				lacking = append(lacking, r.Source)
			}
		}
		if len(lacking) > 0 && opts.Live == nil {
			sort.Strings(lacking)
			return nil, fmt.Errorf("reembed: %d documents of the blob store have no rows in the live index (an interrupted ingest?), first %s: run escurel rebuild instead, which derives them", len(lacking), lacking[0])
		}
		// With Live, the catch-up derives them: leave them out of the
		// snapshot, so that they count as new.
		p.recs = slices.DeleteFunc(slices.Clone(p.recs), func(r *blobstore.Record) bool { _, ok := p.liveDocs[r.DocID]; return !ok })
	}
	p.Documents = len(p.recs)
	return p, nil
}

// checkCoverage refuses a rebuild that would lose live documents, or that
// has nothing to rebuild from, and returns how many live documents the
// rebuild drops.
func checkCoverage(recs []*blobstore.Record, live map[string]string, opts Options) ([]string, error) {
	if len(recs) == 0 && len(live) == 0 {
		return nil, fmt.Errorf("rebuild: the blob store %s holds no document records: nothing to rebuild from", opts.Blobs.Redacted())
	}
	have := make(map[string]bool, len(recs))
	for _, r := range recs {
		have[r.DocID] = true
	}
	var missing []string
	for id, src := range live {
		if !have[id] {
			missing = append(missing, src)
		}
	}
	if len(missing) > 0 && !opts.AllowMissing {
		sort.Strings(missing)
		return nil, &MissingError{Store: opts.Blobs.Redacted(), Missing: missing, Live: len(live)}
	}
	sort.Strings(missing)
	return missing, nil
}

// restoreDamaged works out what becomes of damaged records: each whose
// document the live generation holds is restored from that row (the
// index's copy of the record: a row's sensitivity is its record's or
// higher, never lower); the others refuse the rebuild with
// *DamagedRecordsError, or are left out under Options.AllowMissing, their
// documents then unserved (never served at a level read from nowhere).
func (p *Plan) restoreDamaged(ctx context.Context, opts Options, damaged []blobstore.DamagedRecord) error {
	if err := damagedPack(damaged); err != nil {
		return fmt.Errorf("%s: %w", p.Kind, err)
	}
	rows := map[string]*blobstore.Record{}
	if p.hasLive {
		ids := make([]string, len(damaged))
		for i, d := range damaged {
			ids[i] = d.DocID
		}
		var live any
		if opts.Live != nil {
			live = opts.Live
		}
		var err error
		if rows, err = hooks.RowRecords(ctx, live, opts.Dir, ids); err != nil {
			return fmt.Errorf("%s: read the live rows of %d damaged records: %w", p.Kind, len(damaged), err)
		}
	}
	var left []blobstore.DamagedRecord
	for _, d := range damaged {
		r := rows[d.DocID]
		if r == nil || blobstore.DocID(r.Source) != d.DocID || index.CheckSensitivity(r.Sensitivity) != nil {
			if r != nil && d.Source == "" && blobstore.DocID(r.Source) == d.DocID {
				d.Source = r.Source
			}
			left = append(left, d)
			continue
		}
		p.restore = append(p.restore, r)
		p.Restored = append(p.Restored, r.Source)
	}
	if len(left) > 0 && !opts.AllowMissing {
		return &DamagedRecordsError{Records: left}
	}
	p.Left = left
	p.recs = append(p.recs, p.restore...)
	sort.Slice(p.recs, func(i, j int) bool { return p.recs[i].DocID < p.recs[j].DocID })
	sort.Strings(p.Restored)
	return nil
}

// DamagedRecordsError is a rebuild refused because records of the blob
// store are damaged and the live generation holds no row to restore them
// from (Records: each with its key, its source when known, and why). It
// wraps blobstore.ErrCorrupt. Repair each by ingesting its source again,
// or deleting the document (escurel delete DOC_ID), or rebuild with
// Options.AllowMissing to leave their documents out.
type DamagedRecordsError struct {
	Records []blobstore.DamagedRecord
}

func (e *DamagedRecordsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rebuild: %d damaged document records that no live row restores; the live index was kept:", len(e.Records))
	for _, d := range e.Records {
		fmt.Fprintf(&b, "\n  %s (%s): %s; repair: ", d.Key, sourceOf(d), d.Reason)
		if d.Source != "" {
			fmt.Fprintf(&b, "escurel ingest %s (re-ingest the source), or ", strconv.Quote(d.Source))
		}
		if d.DocID == "" {
			// A whole pack (no doc id): only restoring or removing it helps.
			b.WriteString("restore the pack from a backup, or remove it by hand")
			continue
		}
		fmt.Fprintf(&b, "escurel delete %s, or escurel rebuild --allow-missing (leaves the document out)", d.DocID)
	}
	return b.String()
}

// Unwrap returns blobstore.ErrCorrupt.
func (e *DamagedRecordsError) Unwrap() error { return blobstore.ErrCorrupt }

// damagedPack refuses a rebuild while a pack of the blob store cannot be
// read (a DamagedRecord with no doc id), whatever Options.AllowMissing
// says: the other packs then yield older versions of its documents (a
// record reclassified RESTRICTED there reads as its earlier level, one
// deleted there reads as alive), and nothing names the documents to leave
// out. The error wraps blobstore.ErrCorrupt.
func damagedPack(damaged []blobstore.DamagedRecord) error {
	for _, d := range damaged {
		if d.DocID == "" {
			return fmt.Errorf("pack %s cannot be read (%s); the live index was kept, and --allow-missing does not apply: the other packs would yield older versions of its documents. Restore the pack from a backup (then rebuild again), or remove it by hand knowing that its documents then read as their previous versions: %w", d.Key, d.Reason, blobstore.ErrCorrupt)
		}
	}
	return nil
}

// sourceOf is a damaged record's source as messages show it.
func sourceOf(d blobstore.DamagedRecord) string {
	if d.Source == "" {
		return "source unknown"
	}
	return "source " + strconv.Quote(d.Source)
}
