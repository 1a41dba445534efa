package serve

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rerank"
)

// Limits of a request, the same over HTTP and MCP.
const (
	MaxK          = 1000    // hits a search may ask for
	MaxQueryBytes = 4 << 10 // bytes of a query
	MaxDepth      = 10000   // candidates per leg a hybrid search may ask for
	MaxBodyBytes  = 1 << 20 // bytes of a request body
	MaxExpand     = 1 << 20 // bytes an expansion may ask for (max_bytes)
	MaxNeighbours = 100     // neighbours each side an expansion may ask for
)

// SearchInput is a search request: index.SearchOptions less Clearance,
// which comes from the caller's token, and with Rerank for Reranker: a
// caller may ask for the server's reranker, never name one (a URL in a
// request would let a caller make the server call anywhere).
type SearchInput struct {
	Query       string  `json:"query" minLength:"1" maxLength:"4096" doc:"the question or keywords; at most 4096 bytes" jsonschema:"the question or keywords; at most 4096 bytes"`
	K           int     `json:"k,omitempty" minimum:"0" maximum:"1000" doc:"hits to return, at most 1000; 0 or absent: 10" jsonschema:"hits to return, at most 1000; 0 or absent: 10"`
	Mode        string  `json:"mode,omitempty" enum:"bm25,dense,hybrid" doc:"bm25, dense or hybrid; absent: the index's default (hybrid with a trained embedder, bm25 with hash)" jsonschema:"bm25, dense or hybrid; absent: the index's default"`
	Fusion      string  `json:"fusion,omitempty" enum:"rrf,convex" doc:"how hybrid fuses its legs: rrf (default) or convex" jsonschema:"how hybrid fuses its legs: rrf (default) or convex"`
	Alpha       float64 `json:"alpha,omitempty" minimum:"0" maximum:"1" doc:"weight of the dense leg in (0, 1]; 0 or absent: 0.5" jsonschema:"weight of the dense leg in (0, 1]; 0 or absent: 0.5"`
	Depth       int     `json:"depth,omitempty" minimum:"0" maximum:"10000" doc:"candidates per leg in hybrid; 0 or absent: 100, never fewer than k" jsonschema:"candidates per leg in hybrid; 0 or absent: 100"`
	Explain     bool    `json:"explain,omitempty" doc:"add each leg's rank and score to every hit" jsonschema:"add each leg's rank and score to every hit"`
	Language    string  `json:"language,omitempty" maxLength:"35" doc:"analyze the query as this language (BCP 47, e.g. en, fr); absent: as every language of the documents" jsonschema:"analyze the query as this language (e.g. en, fr); absent: as every language of the documents"`
	Conjunctive bool    `json:"conjunctive,omitempty" doc:"require every query term in the bm25 leg" jsonschema:"require every query term in the bm25 leg"`
	Rerank      bool    `json:"rerank,omitempty" doc:"reorder the k hits with the server's reranker (escurel serve --rerank); refused when it has none" jsonschema:"reorder the k hits with the server's reranker; refused when it has none"`
	Filter      string  `json:"filter,omitempty" maxLength:"4096" doc:"keep to documents whose metadata match, applied inside each leg before ranking, e.g. product = \"api\" and version >= 2 and folder ^= \"/docs/\" and not draft (operators = != < <= > >= ^= in exists, and or not)" jsonschema:"keep to documents whose metadata match, applied before ranking, e.g. product = \"api\" and version >= 2 and not draft (operators = != < <= > >= ^= in exists, and or not)"`
}

// SearchOutput is a search's answer.
type SearchOutput struct {
	Mode string      `json:"mode" doc:"the mode that ranked the hits" jsonschema:"the mode that ranked the hits"`
	Hits []index.Hit `json:"hits" doc:"best first; cite body, source and the byte span; give a generator prompt_text when present" jsonschema:"best first; cite body, source and the byte span; give a generator prompt_text when present"`
}

// ExpandInput asks for a block with its neighbours and its window.
type ExpandInput struct {
	BlockID  string `json:"block_id" jsonschema:"the block's id, from a hit: 16 lowercase hex digits"`
	Before   int    `json:"before,omitempty" jsonschema:"neighbours before it, at most 100; 0: 2, negative: none"`
	After    int    `json:"after,omitempty" jsonschema:"neighbours after it, at most 100; 0: 2, negative: none"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"bytes of text in all, at most 1048576; 0: 16384; the block's own body always comes whole"`
}

// DocumentsInput selects the documents to list, a page at a time.
type DocumentsInput struct {
	SourcePrefix string `json:"source_prefix,omitempty" maxLength:"4096" jsonschema:"only documents whose source starts with this (a directory: end it with /)"`
	Status       string `json:"status,omitempty" jsonschema:"ok or failed: only documents with that status"`
	Limit        int    `json:"limit,omitempty" jsonschema:"documents per page, at most 1000; 0: 100"`
	After        string `json:"after,omitempty" maxLength:"4096" jsonschema:"the next cursor of the previous page"`
}

// DocumentsOutput is a page of the documents a caller may see, by source.
type DocumentsOutput struct {
	Documents []index.DocumentInfo `json:"documents" doc:"by source"`
	// Next is the cursor of the next page (its after); "" on the last.
	Next string `json:"next,omitempty" doc:"pass as after for the next page; absent on the last page"`
}

// Limits of a document list.
const (
	DefaultDocumentsPage = 100
	MaxDocumentsPage     = 1000
)

// DocumentInput names a document.
type DocumentInput struct {
	DocID string `json:"doc_id" jsonschema:"the document's id, from a hit or list_documents"`
}

// DocumentOutput is a document's extracted text: every block's body is
// text[byte_start:byte_end].
type DocumentOutput struct {
	DocID  string `json:"doc_id"`
	Source string `json:"source"`
	Title  string `json:"title,omitempty"`
	Text   string `json:"text"`
}

// StatusOutput describes the index to a caller. Below restricted
// clearance its counts are of what the caller may see: documents above it
// are neither listed nor counted.
type StatusOutput struct {
	Generation      string                 `json:"generation"`
	SchemaVersion   int                    `json:"schema_version"`
	Manifest        index.Manifest         `json:"manifest"`
	DefaultMode     string                 `json:"default_mode"`
	Documents       int64                  `json:"documents" doc:"documents at or below the caller's clearance, failed ones included"`
	Blocks          int64                  `json:"blocks" doc:"blocks at or below the caller's clearance"`
	Embeddings      int64                  `json:"embeddings"`
	EmbeddingSet    string                 `json:"embedding_set,omitempty"`
	Extractors      map[string]int64       `json:"extractors"`
	StaleExtractors []string               `json:"stale_extractors,omitempty"`
	FileBytes       int64                  `json:"file_bytes" doc:"size of the index file; 0 below restricted clearance"`
	Failed          int64                  `json:"failed" doc:"failed documents at or below the caller's clearance"`
	FailedDocuments []index.FailedDocument `json:"failed_documents" doc:"the failed documents the caller may see"`
	Clearance       string                 `json:"clearance" doc:"the caller's clearance, from its token"`
}

// FieldError is a request field out of its limits or not understood: a
// 422 over HTTP naming the field, a tool error over MCP.
type FieldError struct {
	Field   string // the JSON name, e.g. "k"
	Message string
	Value   any
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// service answers requests for one caller at a time; HTTP and MCP both
// go through it, so the limits and the clearance gate are written once.
type service struct {
	ix *index.Index
	// reranker is Options.Reranker: nil when the server has none.
	reranker rerank.Reranker
	// embedDown is when (Unix nanoseconds) the embedder last failed a
	// query: for EmbedderBackoff after it, dense and hybrid searches fail
	// at once instead of each waiting out the client's retries.
	embedDown atomic.Int64
}

// EmbedderBackoff is how long after the embedder failed a query the
// server answers dense and hybrid searches with the embedder's error at
// once (503 over HTTP), without calling it: bm25 searches go on.
const EmbedderBackoff = 5 * time.Second

// search runs a search at clearance.
func (sv *service) search(ctx context.Context, clearance string, in *SearchInput) (*SearchOutput, error) {
	switch {
	case in.Query == "":
		return nil, &FieldError{"query", "empty", in.Query}
	case len(in.Query) > MaxQueryBytes:
		return nil, &FieldError{"query", fmt.Sprintf("%d bytes, at most %d", len(in.Query), MaxQueryBytes), len(in.Query)}
	case in.K < 0 || in.K > MaxK:
		return nil, &FieldError{"k", fmt.Sprintf("want 0 to %d", MaxK), in.K}
	case in.Depth < 0 || in.Depth > MaxDepth:
		return nil, &FieldError{"depth", fmt.Sprintf("want 0 to %d", MaxDepth), in.Depth}
	case in.Alpha < 0 || in.Alpha > 1:
		return nil, &FieldError{"alpha", "want a number in (0, 1], or 0 for the default", in.Alpha}
	}
	switch in.Mode {
	case "", index.ModeBM25, index.ModeDense, index.ModeHybrid:
	default:
		return nil, &FieldError{"mode", "want bm25, dense or hybrid", in.Mode}
	}
	switch in.Fusion {
	case "", index.FusionRRF, index.FusionConvex:
	default:
		return nil, &FieldError{"fusion", "want rrf or convex", in.Fusion}
	}
	if in.Language != "" {
		if err := index.CheckLanguage(in.Language); err != nil {
			return nil, &FieldError{"language", err.Error(), in.Language}
		}
	}
	filter, err := index.ParseFilter(in.Filter)
	if err != nil {
		return nil, &FieldError{"filter", err.Error(), in.Filter}
	}
	mode := in.Mode
	if mode == "" {
		mode = sv.ix.DefaultMode()
	}
	if mode != index.ModeHybrid {
		for _, f := range []struct {
			name string
			set  bool
			v    any
		}{{"fusion", in.Fusion != "", in.Fusion}, {"alpha", in.Alpha != 0, in.Alpha}, {"depth", in.Depth != 0, in.Depth}} {
			if f.set {
				return nil, &FieldError{f.name, "applies to mode hybrid only, not " + mode, f.v}
			}
		}
	}
	var reranker rerank.Reranker
	if in.Rerank {
		if sv.reranker == nil {
			return nil, &FieldError{"rerank", "this server has no reranker (start it with escurel serve --rerank URL); search without rerank", true}
		}
		reranker = sv.reranker
	}
	setMode(ctx, mode)
	if mode != index.ModeBM25 {
		if t := sv.embedDown.Load(); t != 0 && time.Since(time.Unix(0, t)) < EmbedderBackoff {
			return nil, fmt.Errorf("%w: it failed less than %s ago", index.ErrEmbedder, EmbedderBackoff)
		}
	}
	hits, err := sv.ix.Search(ctx, in.Query, &index.SearchOptions{
		K:           in.K,
		Clearance:   clearance,
		Mode:        mode,
		Fusion:      in.Fusion,
		Depth:       in.Depth,
		Alpha:       in.Alpha,
		Explain:     in.Explain,
		Conjunctive: in.Conjunctive,
		Reranker:    reranker,
		Language:    in.Language,
		Filter:      filter,
	})
	if errors.Is(err, index.ErrEmbedder) && ctx.Err() == nil {
		sv.embedDown.Store(time.Now().UnixNano())
	}
	if errors.Is(err, index.ErrNoVectors) {
		return nil, &FieldError{"mode", "this index has no vectors (embedder none): mode bm25 still works", mode}
	}
	if err != nil {
		return nil, err
	}
	if hits == nil {
		hits = []index.Hit{}
	}
	return &SearchOutput{Mode: mode, Hits: hits}, nil
}

// expand expands a block at clearance; errNotFound for one that does not
// exist or is above it, alike.
func (sv *service) expand(ctx context.Context, clearance string, in *ExpandInput) (*index.Expansion, error) {
	switch {
	case in.Before > MaxNeighbours:
		return nil, &FieldError{"before", fmt.Sprintf("at most %d", MaxNeighbours), in.Before}
	case in.After > MaxNeighbours:
		return nil, &FieldError{"after", fmt.Sprintf("at most %d", MaxNeighbours), in.After}
	case in.MaxBytes < 0 || in.MaxBytes > MaxExpand:
		return nil, &FieldError{"max_bytes", fmt.Sprintf("want 0 to %d", MaxExpand), in.MaxBytes}
	case index.CheckBlockID(in.BlockID) != nil:
		return nil, &FieldError{"block_id", index.ErrBadBlockID.Error(), in.BlockID}
	}
	return sv.ix.Expand(ctx, in.BlockID, &index.ExpandOptions{
		Before: in.Before, After: in.After, MaxBytes: in.MaxBytes, Clearance: clearance,
	})
}

// documents lists a page of the documents clearance may see
// (index.ListDocuments gates them), and counts those it may not.
func (sv *service) documents(ctx context.Context, clearance string, in *DocumentsInput) (*DocumentsOutput, error) {
	switch {
	case in.Status != "" && in.Status != index.StatusOK && in.Status != index.StatusFailed:
		return nil, &FieldError{"status", "want ok or failed", in.Status}
	case in.Limit < 0 || in.Limit > MaxDocumentsPage:
		return nil, &FieldError{"limit", fmt.Sprintf("want 0 to %d", MaxDocumentsPage), in.Limit}
	}
	limit := in.Limit
	if limit == 0 {
		limit = DefaultDocumentsPage
	}
	opts := &index.ListOptions{Clearance: clearance, SourcePrefix: in.SourcePrefix, Status: in.Status, After: in.After, PageSize: limit + 1}
	out := &DocumentsOutput{Documents: []index.DocumentInfo{}}
	for d, err := range sv.ix.ListDocuments(ctx, opts) {
		if err != nil {
			return nil, err
		}
		if len(out.Documents) == limit {
			out.Next = out.Documents[limit-1].Source
			break
		}
		out.Documents = append(out.Documents, d)
	}
	// No count of what lies above the clearance: how many documents a
	// caller may not see is itself not its business (as in status).
	return out, nil
}

// failed returns the failed documents clearance may see. index.Failed
// lists every failed document (an operator's view); a source may itself
// be confidential, so only documents at or below clearance are shown, and
// those above are not counted either.
func (sv *service) failed(ctx context.Context, clearance string) ([]index.FailedDocument, error) {
	all, err := sv.ix.Failed(ctx, clearance)
	if err != nil {
		return nil, err
	}
	max := rank(clearance)
	if max < 0 {
		return nil, fmt.Errorf("clearance %q", clearance)
	}
	out := []index.FailedDocument{}
	for _, f := range all {
		if r := rank(f.Sensitivity); r >= 0 && r <= max { // unknown levels fail closed
			out = append(out, f)
		}
	}
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// document returns a document's text, source and title at clearance;
// index.ErrNotFound (wrapped) for one that does not exist, failed, or is
// above it, alike.
func (sv *service) document(ctx context.Context, clearance string, in *DocumentInput) (*DocumentOutput, error) {
	text, err := sv.ix.DocumentText(ctx, in.DocID, clearance)
	if err != nil {
		return nil, err
	}
	out := &DocumentOutput{DocID: in.DocID, Text: text}
	blocks, err := sv.ix.DocumentBlocks(ctx, in.DocID, clearance)
	if err != nil {
		return nil, err
	}
	if len(blocks) > 0 {
		out.Source, out.Title = blocks[0].Source, blocks[0].Title
	}
	return out, nil
}

// status describes the index at clearance.
func (sv *service) status(ctx context.Context, clearance string) (*StatusOutput, error) {
	st, err := sv.ix.Stats(ctx)
	if err != nil {
		return nil, err
	}
	failed, err := sv.failed(ctx, clearance)
	if err != nil {
		return nil, err
	}
	if clearance != index.Restricted {
		// Counts of what the caller may see; the whole index's size
		// (its file, its vectors) would tell what lies above it.
		c, err := sv.ix.CountsAt(ctx, clearance)
		if err != nil {
			return nil, err
		}
		st.Documents, st.Failed, st.Blocks, st.Extractors = c.Documents, c.Failed, c.Blocks, c.Extractors
		st.Embeddings, st.FileBytes = 0, 0
		if st.EmbeddingSet != "" {
			st.Embeddings = c.Blocks
		}
	}
	return &StatusOutput{
		Generation:      sv.ix.Generation(),
		SchemaVersion:   st.SchemaVersion,
		Manifest:        st.Manifest,
		DefaultMode:     sv.ix.DefaultMode(),
		Documents:       st.Documents,
		Blocks:          st.Blocks,
		Embeddings:      st.Embeddings,
		EmbeddingSet:    st.EmbeddingSet,
		Extractors:      st.Extractors,
		StaleExtractors: st.StaleExtractors,
		FileBytes:       st.FileBytes,
		Failed:          st.Failed,
		FailedDocuments: failed,
		Clearance:       clearance,
	}, nil
}
