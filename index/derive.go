package index

// Derivation: a document's bytes to its rows (extract, chunk, contextualize,
// analyze), on all cores, touching no storage; and the check that skips it
// for bytes the index already serves.

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/index/fts"
)

// derivation is the outcome of deriving one input.
type derivation struct {
	p   pending
	err error
	// unchanged: the index holds this version already (sameBytes); p and
	// err are not set.
	unchanged bool
}

// sameBytes reports whether in is the version of the document that the
// index already serves, so that extracting it again would give the same
// rows: the same bytes, read by the same extractor, with inputs that
// cannot change the outcome. It is conservative: false means "derive and
// compare". A failed document is always derived again (a looser limit may
// let it through).
func sameBytes(in input, old *storedDoc) bool {
	if old == nil || old.status != statusOK || in.rederive || in.failure != "" || in.Source != old.rec.Source {
		return false
	}
	if old.rec.BlobID != blobstore.BlobID(in.Data) || (in.MediaType != "" && in.MediaType != old.rec.MediaType) {
		return false
	}
	name := path.Base(strings.ReplaceAll(in.Source, "\\", "/"))
	if in.Name != "" && in.Name != name {
		return false // another name may detect another type, or title
	}
	if in.MediaType == "" {
		// The type the bytes were read as may have been given then, or
		// detected by an older rule.
		if mt, err := extract.Detect(name, in.Data); err != nil || mt != old.rec.MediaType {
			return false
		}
	}
	e, err := extract.For(old.rec.MediaType)
	if err != nil || e.ID() != old.extractor {
		return false // a newer extractor reads it differently
	}
	if in.Title != "" && (!old.rec.TitleGiven || in.Title != old.rec.Title) || in.Title == "" && old.rec.TitleGiven {
		return false
	}
	return (in.Language == "" || in.Language == old.rec.Language) && (in.Sensitivity == "" || in.Sensitivity == old.rec.Sensitivity)
}

// deriveAll derives every input, on all cores when the batch names each
// source once (a source given twice derives from its earlier version, so
// such a batch derives in order).
func (ix *state) deriveAll(ctx context.Context, ins []input, ids []string, current map[string]*storedDoc) []derivation {
	out := make([]derivation, len(ins))
	seen := make(map[string]bool, len(ids))
	recOf := func(id string) *blobstore.Record {
		if d := current[id]; d != nil {
			return d.rec
		}
		return nil
	}
	for _, id := range ids {
		if seen[id] {
			var prev = map[string]*blobstore.Record{}
			for i, in := range ins {
				old := recOf(ids[i])
				if r, ok := prev[ids[i]]; ok {
					old = r
				}
				out[i].p, out[i].err = ix.derive(ctx, in, old)
				if out[i].err == nil {
					prev[ids[i]] = out[i].p.rec
				}
			}
			return out
		}
		seen[id] = true
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < ix.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if sameBytes(ins[i], current[ids[i]]) {
					out[i].unchanged = true
					continue
				}
				out[i].p, out[i].err = ix.derive(ctx, ins[i], recOf(ids[i]))
			}
		}()
	}
	for i := range ins {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// derive extracts, chunks, contextualizes and analyzes in, touching
// no storage. old is the document's current record, if any: its language
// and sensitivity apply when neither the input nor the front matter sets
// them.
//
// Bytes that fail extraction give a pending document with status
// statusFailed and no blocks, not an error: the caller stores it. The
// error is a *DocumentError for input that cannot be taken at all (no
// source, an unsupported type, bad metadata), or ctx's error.
func (ix *state) derive(ctx context.Context, in input, old *blobstore.Record) (pending, error) {
	bad := func(err error) (pending, error) {
		return pending{}, &DocumentError{Source: in.Source, Err: err}
	}
	if in.Source == "" {
		return bad(errors.New("empty source"))
	}
	if !utf8.ValidString(in.Source) || !utf8.ValidString(in.Title) || !utf8.ValidString(in.Name) {
		// Stored as text: bytes that are not UTF-8 would fail the batch.
		return bad(errors.New("source, name or title is not valid UTF-8"))
	}
	if in.failure != "" && len(in.Data) > 0 {
		return bad(errors.New("input has both a failure and data"))
	}
	name := in.Name
	if name == "" {
		name = path.Base(strings.ReplaceAll(in.Source, "\\", "/"))
	}
	mediaType := in.MediaType
	if mediaType == "" {
		var err error
		if in.failure != "" {
			mediaType, err = extract.MediaType(name)
		} else {
			mediaType, err = extract.Detect(name, in.Data)
		}
		if err != nil {
			return bad(err)
		}
	}
	ext, err := extract.For(mediaType)
	if err != nil {
		return bad(err)
	}
	start := time.Now()
	var doc *extract.Doc
	var failure error
	if in.failure != "" {
		failure = errors.New(in.failure)
	} else if doc, err = extract.Extract(ctx, mediaType, name, in.Data, ix.limits); err != nil {
		if ctx.Err() != nil {
			return pending{}, ctx.Err()
		}
		if errors.Is(err, extract.ErrEngine) {
			// Not the document's fault: stop rather than record it.
			return pending{}, fmt.Errorf("ingest %s: %w", in.Source, err)
		}
		failure = err
		if byName, nameErr := extract.MediaType(name); in.MediaType == "" && nameErr == nil && byName != mediaType {
			// Say why a file named .md was read as a PDF.
			failure = fmt.Errorf("%w (read as %s by its content, not as its name says)", err, ext.Name)
		}
	}
	took := time.Since(start)
	var oldLang, oldSens string
	if old != nil {
		oldLang, oldSens = old.Language, old.Sensitivity
	}
	var docLang, docSens, docTitle string
	if doc != nil {
		docLang, docSens, docTitle = doc.Language, doc.Sensitivity, doc.Title
	}
	lang := firstNonEmpty(docLang, in.Language, oldLang, DefaultLanguage)
	if err := CheckLanguage(lang); err != nil {
		return bad(err)
	}
	if err := ix.analyzer.CheckLanguage(lang); err != nil {
		return bad(err)
	}
	sens := firstNonEmpty(docSens, in.Sensitivity, oldSens, Public)
	if err := CheckSensitivity(sens); err != nil {
		return bad(err)
	}
	if errors.Is(failure, extract.ErrFrontMatter) {
		sens = Restricted // a declaration escurel cannot read fails closed (issue 15)
	}
	at := in.IngestedAt
	if at.IsZero() {
		at = ix.now()
	}
	title := firstNonEmpty(in.Title, docTitle, extract.BaseTitle(name))
	given, err := CheckMeta(in.Meta)
	if err != nil {
		return bad(err)
	}
	meta := recordMeta(metaJSON(given))
	if in.Meta == nil && old != nil {
		meta = old.Meta // as language and sensitivity: kept unless given
	}
	rec := &blobstore.Record{
		DocID: blobstore.DocID(in.Source), Source: in.Source, MediaType: mediaType, Title: title, TitleGiven: in.Title != "",
		Sensitivity: sens, Language: lang, IngestedAt: at.UTC().Truncate(time.Microsecond), Error: in.failure,
		Bytes: int64(len(in.Data)), SourceMTime: in.mtime, Meta: meta,
	}
	p := pending{rec: rec, status: statusOK, extractor: ext.ID(), took: took}
	if in.failure == "" {
		rec.BlobID = blobstore.BlobID(in.Data)
	} else {
		p.extractor = "" // never ran
		rec.Bytes = in.size
	}
	if failure != nil {
		p.status, p.failure = statusFailed, failure
		return p, nil
	}
	doc.Title = title
	p.pages, p.meta = doc.Pages, doc.Meta
	if !textIsBlob(mediaType) || doc.Text != string(in.Data) {
		p.text = doc.Text // not the blob: HTML, DOCX, PDF, transcoded UTF-16
	}

	spans := ix.chunker.Chunker().Chunk(doc)
	p.blocks = make([]block, len(spans))
	ids := make(map[string]bool, len(spans))
	for i, sp := range spans {
		b := block{Block: sp, body: doc.Text[sp.Start:sp.End]}
		b.id = blockIDOf(rec.DocID, rec.BlobID, int64(sp.Start), int64(sp.End), b.body)
		if ids[b.id] {
			return bad(&CollisionError{ID: b.id, Source: in.Source, Other: in.Source})
		}
		ids[b.id] = true
		if sp.HasWindow() {
			b.window = doc.Text[sp.Window[0]:sp.Window[1]]
			b.locator = locatorJSON(sp)
			if sp.Parent >= 0 {
				b.parentID = fmt.Sprintf("%s/p%d", rec.DocID, sp.Parent)
			}
		}
		if ix.context == ContextStructural {
			b.context = chunk.BlockContext(doc.Title, sp)
		}
		b.terms = ix.analyzeBlock(b.body, b.context, lang)
		p.blocks[i] = b
	}
	p.textless = textlessPages(doc.Pages, p.blocks)
	return p, nil
}

// termScratch pools the slices that analyzeBlock analyzes into.
var termScratch = sync.Pool{New: func() any { return new([]string) }}

// analyzeBlock returns the terms of a block's body and context, the two
// fields sharing one allocation of their exact size: analyzed into a
// pooled slice first, so that the slices the block keeps never grow by
// doubling (which was a tenth of the analysis's cost in allocations and
// the collections they bring).
func (ix *state) analyzeBlock(body, context, lang string) [fts.NumFields][]string {
	sp := termScratch.Get().(*[]string)
	scratch := ix.analyzer.Terms((*sp)[:0], body, lang)
	nb := len(scratch)
	scratch = ix.analyzer.Terms(scratch, context, lang)
	all := make([]string, len(scratch))
	copy(all, scratch)
	clear(scratch) // the pool must not keep the terms alive
	*sp = scratch[:0]
	termScratch.Put(sp)
	var out [fts.NumFields][]string
	out[fts.Body], out[fts.Context] = all[:nb:nb], all[nb:]
	return out
}

// textIsBlob reports whether a media type's extracted text is its bytes
// (Markdown, plain text), so that the index need not keep it.
func textIsBlob(mediaType string) bool {
	return mediaType == extract.MediaMarkdown || mediaType == extract.MediaText
}
