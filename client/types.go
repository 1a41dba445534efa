package client

import (
	"encoding/json"
	"time"
)

// Search modes (SearchRequest.Mode).
const (
	ModeBM25   = "bm25"
	ModeDense  = "dense"
	ModeHybrid = "hybrid"
)

// SearchRequest is a search (POST /v1/search). Zero fields take the
// server's defaults. There is no clearance field: a caller's clearance
// comes from its token only.
type SearchRequest struct {
	// Query is the question or keywords: 1 to 4096 bytes.
	Query string `json:"query"`
	// K is how many hits, at most 1000; 0 is 10.
	K int `json:"k,omitempty"`
	// Mode is ModeBM25, ModeDense or ModeHybrid; "" is the index's default
	// (hybrid with a trained embedder, bm25 with hash).
	Mode string `json:"mode,omitempty"`
	// Fusion is how hybrid fuses its legs: "rrf" (default) or "convex".
	Fusion string `json:"fusion,omitempty"`
	// Alpha weighs the dense leg, in (0, 1]; 0 is 0.5.
	Alpha float64 `json:"alpha,omitempty"`
	// Depth is the candidates per leg in hybrid, at most 10000; 0 is 100,
	// never fewer than K.
	Depth int `json:"depth,omitempty"`
	// Explain adds each leg's rank and score to every hit.
	Explain bool `json:"explain,omitempty"`
	// Language analyzes the query as this BCP 47 language (e.g. "en");
	// "" as every language of the documents.
	Language string `json:"language,omitempty"`
	// Conjunctive requires every query term in the bm25 leg.
	Conjunctive bool `json:"conjunctive,omitempty"`
	// Rerank reorders the K hits with the server's reranker (refused, 422,
	// when it has none).
	Rerank bool `json:"rerank,omitempty"`
	// Filter keeps to documents whose metadata match, applied inside each
	// leg before ranking, e.g. `product = "api" and version >= 2`.
	Filter string `json:"filter,omitempty"`
}

// SearchResponse is a search's answer.
type SearchResponse struct {
	Mode string `json:"mode"` // the mode that ranked the hits
	Hits []Hit  `json:"hits"` // best first
}

// Hit is a ranked block: cite Body, Source and the byte span; give a
// generator PromptText when present.
type Hit struct {
	// BlockID is the block's stable id, 16 lowercase hex digits (Expand
	// takes it).
	BlockID string `json:"block_id"`
	DocID   string `json:"doc_id"`
	Source  string `json:"source"`
	Title   string `json:"title"`
	// Body is the block's text, verbatim: the document text's bytes
	// [ByteStart, ByteEnd).
	Body string `json:"body"`
	// Context is the block's place in its document, "[title › heading
	// path › p.N]": it fed retrieval; it is not a quote.
	Context     string   `json:"context"`
	HeadingPath []string `json:"heading_path"`
	Page        int      `json:"page"` // 0 when the format has no pages
	ByteStart   int64    `json:"byte_start"`
	ByteEnd     int64    `json:"byte_end"`
	// Score is the ranking's: BM25F in bm25, cosine similarity in dense,
	// the fused score in hybrid. A reranker reorders hits without
	// changing it.
	Score   float64  `json:"score"`
	Explain *Explain `json:"explain,omitempty"` // with SearchRequest.Explain
	// PromptText is the block's window (its section or the sentences
	// around it), verbatim; "" for the default chunker.
	PromptText string `json:"prompt_text,omitempty"`
	// ParentLocator is where PromptText lies in the document.
	ParentLocator *Locator `json:"parent_locator,omitempty"`
	// Meta is the document's metadata; nil when none.
	Meta map[string]any `json:"meta,omitempty"`
}

// Explain is each ranking's view of a hit; a leg that did not rank it is
// nil.
type Explain struct {
	BM25   *LegRank `json:"bm25,omitempty"`
	Dense  *LegRank `json:"dense,omitempty"`
	Rerank *LegRank `json:"rerank,omitempty"`
}

// LegRank is a hit's place in one ranking: Rank from 1, and that
// ranking's score.
type LegRank struct {
	Rank  int     `json:"rank"`
	Score float64 `json:"score"`
}

// Locator is where a window lies in its document's text: a byte range and
// the range of content units (paragraphs, list items, code blocks;
// 0-based, end exclusive) it covers.
type Locator struct {
	ByteStart      int64 `json:"byte_start"`
	ByteEnd        int64 `json:"byte_end"`
	ParagraphStart int   `json:"paragraph_start"`
	ParagraphEnd   int   `json:"paragraph_end"`
}

// ExpandOptions bound an expansion; zero fields take the server's
// defaults.
type ExpandOptions struct {
	// Before and After are the neighbours each side, at most 100; 0 is 2,
	// a negative number none.
	Before, After int
	// MaxBytes bounds the text in all, at most 1048576; 0 is 16384. The
	// block's own body always comes whole.
	MaxBytes int
}

// Expansion is a block with its neighbours and its window.
type Expansion struct {
	Block     Hit   `json:"block"`  // PromptText holds the window, cut to the budget
	Before    []Hit `json:"before"` // in document order, nearest last
	After     []Hit `json:"after"`  // in document order, nearest first
	Bytes     int   `json:"bytes"`  // text returned: bodies and window
	Truncated bool  `json:"truncated"`
}

// DocumentsOptions select a page of the document list; zero fields take
// the server's defaults.
type DocumentsOptions struct {
	// SourcePrefix keeps documents whose source starts with it (a
	// directory: end it with "/").
	SourcePrefix string
	// Status is "ok" or "failed"; "" is both.
	Status string
	// Limit is documents per page, at most 1000; 0 is 100.
	Limit int
	// After is the previous page's Next.
	After string
}

// DocumentsPage is a page of the documents a caller may see, by source.
type DocumentsPage struct {
	Documents []DocumentInfo `json:"documents"`
	// Next is the cursor of the next page; "" on the last.
	Next string `json:"next,omitempty"`
}

// DocumentInfo is a document's record.
type DocumentInfo struct {
	DocID       string `json:"doc_id"`
	Source      string `json:"source"`
	Title       string `json:"title"`
	MediaType   string `json:"media_type"`
	Sensitivity string `json:"sensitivity"`
	// Status is "ok" or "failed" (its bytes could not be extracted; no
	// blocks); Reason says why it failed.
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Blocks     int64     `json:"blocks"`
	Bytes      int64     `json:"bytes"` // size of the raw bytes
	IngestedAt time.Time `json:"ingested_at"`
	Extractor  string    `json:"extractor"` // e.g. "pdf/2"; "" when extraction never ran
	Language   string    `json:"language"`  // BCP 47 tag
	Pages      int       `json:"pages"`     // pages of a paged format (PDF), else 0
	// Meta is the document's metadata as a JSON object; nil when none.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// DocumentText is a document's extracted text: every block's body is
// Text[ByteStart:ByteEnd].
type DocumentText struct {
	DocID  string `json:"doc_id"`
	Source string `json:"source"`
	Title  string `json:"title,omitempty"`
	Text   string `json:"text"`
}

// Status describes the index to a caller. Below restricted clearance its
// counts are of what the caller may see.
type Status struct {
	Generation    string `json:"generation"`
	SchemaVersion int    `json:"schema_version"`
	// Manifest is what built the index (its embedder, analyzer,
	// chunker…), as the JSON the server writes.
	Manifest        json.RawMessage  `json:"manifest"`
	DefaultMode     string           `json:"default_mode"`
	Documents       int64            `json:"documents"`
	Blocks          int64            `json:"blocks"`
	Embeddings      int64            `json:"embeddings"`
	EmbeddingSet    string           `json:"embedding_set,omitempty"`
	Extractors      map[string]int64 `json:"extractors"`
	StaleExtractors []string         `json:"stale_extractors,omitempty"`
	FileBytes       int64            `json:"file_bytes"` // 0 below restricted clearance
	Failed          int64            `json:"failed"`
	FailedDocuments []FailedDocument `json:"failed_documents"`
	Clearance       string           `json:"clearance"` // the caller's, from its token
}

// FailedDocument is a document whose bytes could not be extracted.
type FailedDocument struct {
	DocID       string    `json:"doc_id"`
	Source      string    `json:"source"`
	MediaType   string    `json:"media_type"`
	Extractor   string    `json:"extractor"`
	Reason      string    `json:"reason"`
	IngestedAt  time.Time `json:"ingested_at"`
	Sensitivity string    `json:"sensitivity"`
}
