package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/escurel/escurel/index"
)

type searchRequest struct {
	Body SearchInput
}

type searchResponse struct {
	ServerTiming string `header:"Server-Timing" doc:"the time the index took to answer, in ms: search;dur=3.214 (W3C Server Timing); the rest of the request's time is HTTP's"`
	Body         *SearchOutput
}

type expandRequest struct {
	ID       string `path:"id" pattern:"^[0-9a-f]{16}$" doc:"the block's id, from a hit: 16 lowercase hex digits"`
	Before   int    `query:"before" maximum:"100" doc:"neighbours before the block, at most 100; 0 or absent: 2; negative: none"`
	After    int    `query:"after" maximum:"100" doc:"neighbours after the block, at most 100; 0 or absent: 2; negative: none"`
	MaxBytes int    `query:"max_bytes" minimum:"0" maximum:"1048576" doc:"bytes of text in all; 0 or absent: 16384; the block's own body always comes whole"`
}

type expandResponse struct {
	Body *index.Expansion
}

type documentsRequest struct {
	SourcePrefix string `query:"source_prefix" maxLength:"4096" doc:"only documents whose source starts with this (a directory: end it with /)"`
	Status       string `query:"status" enum:"ok,failed" doc:"only documents with this status"`
	Limit        int    `query:"limit" minimum:"0" maximum:"1000" doc:"documents per page, at most 1000; 0 or absent: 100"`
	After        string `query:"after" maxLength:"4096" doc:"the next cursor of the previous page"`
}

type documentsResponse struct {
	Body *DocumentsOutput
}

type documentRequest struct {
	DocID string `path:"doc_id" maxLength:"64" doc:"the document's id, from a hit or the document list"`
}

type documentResponse struct {
	Body *index.DocumentInfo
}

type textRequest struct {
	DocID string `path:"doc_id" maxLength:"64" doc:"the document's id, from a hit or the document list"`
}

type textResponse struct {
	Body *DocumentOutput
}

type verifyRequest struct{}

type verifyResponse struct {
	Body *index.Verification
}

type statusRequest struct{}

type statusResponse struct {
	Body *StatusOutput
}

// routes registers the /v1 operations on api. Every handler takes the
// clearance from the caller that authenticate put in the context.
func (s *Server) routes(api huma.API) {
	defer s.writeRoutes(api)
	huma.Register(api, huma.Operation{
		OperationID:  "search",
		Method:       http.MethodPost,
		Path:         "/v1/search",
		Summary:      "Search blocks",
		Description:  "Ranks the blocks of the documents the caller's token may see (bm25, dense or hybrid) and returns the best k, best first.",
		MaxBodyBytes: MaxBodyBytes,
		Errors:       []int{http.StatusUnauthorized, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
	}, func(ctx context.Context, in *searchRequest) (*searchResponse, error) {
		start := time.Now()
		out, err := s.sv.search(ctx, callerFrom(ctx).Clearance, &in.Body)
		if err != nil {
			return nil, s.httpError(ctx, err, "body")
		}
		return &searchResponse{ServerTiming: serverTiming("search", time.Since(start)), Body: out}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "expand",
		Method:      http.MethodGet,
		Path:        "/v1/blocks/{id}/expand",
		Summary:     "Expand a block",
		Description: "A block with its neighbours in the same document and its window, within a byte budget. A block above the caller's clearance answers 404, as a missing one does.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
	}, func(ctx context.Context, in *expandRequest) (*expandResponse, error) {
		out, err := s.sv.expand(ctx, callerFrom(ctx).Clearance, &ExpandInput{
			BlockID: in.ID, Before: in.Before, After: in.After, MaxBytes: in.MaxBytes,
		})
		if err != nil {
			return nil, s.httpError(ctx, err, "query")
		}
		return &expandResponse{Body: out}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "list-documents",
		Method:      http.MethodGet,
		Path:        "/v1/documents",
		Summary:     "List documents",
		Description: "A page of the documents the caller's token may see, by source (the records of the document list: status, reason, blocks, bytes…); documents above its clearance are neither listed nor counted. Pass next as after for the next page.",
		Errors:      []int{http.StatusUnauthorized, http.StatusServiceUnavailable},
	}, func(ctx context.Context, in *documentsRequest) (*documentsResponse, error) {
		out, err := s.sv.documents(ctx, callerFrom(ctx).Clearance, &DocumentsInput{
			SourcePrefix: in.SourcePrefix, Status: in.Status, Limit: in.Limit, After: in.After,
		})
		if err != nil {
			return nil, s.httpError(ctx, err, "query")
		}
		return &documentsResponse{Body: out}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "get-document",
		Method:      http.MethodGet,
		Path:        "/v1/documents/{doc_id}",
		Summary:     "A document's record",
		Description: "A document as the document list gives it (source, title, media type, sensitivity, status and reason, blocks, bytes, ingested_at…). A document that does not exist or is above the caller's clearance answers 404 alike.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusServiceUnavailable},
	}, func(ctx context.Context, in *documentRequest) (*documentResponse, error) {
		d, err := s.ix.Document(ctx, in.DocID, callerFrom(ctx).Clearance)
		if err != nil {
			return nil, s.httpError(ctx, err, "path")
		}
		return &documentResponse{Body: &d}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "get-document-text",
		Method:      http.MethodGet,
		Path:        "/v1/documents/{doc_id}/text",
		Summary:     "A document's text",
		Description: "The text a document's blocks are spans of: text[byte_start:byte_end] is each block's body. A document that does not exist, failed, or is above the caller's clearance answers 404 alike.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusServiceUnavailable},
	}, func(ctx context.Context, in *textRequest) (*textResponse, error) {
		out, err := s.sv.document(ctx, callerFrom(ctx).Clearance, &DocumentInput{DocID: in.DocID})
		if err != nil {
			return nil, s.httpError(ctx, err, "path")
		}
		return &textResponse{Body: out}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "verify",
		Method:      http.MethodGet,
		Path:        "/v1/verify",
		Summary:     "Verify the index",
		Description: "The digest of the derived rows and the coverage checks against the blob store, as escurel verify --json prints them. It names documents of every sensitivity, so it needs a token of restricted clearance (403 otherwise); it reads every row, so it can take long on a large index.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable},
	}, func(ctx context.Context, _ *verifyRequest) (*verifyResponse, error) {
		c := callerFrom(ctx)
		if c.Clearance != index.Restricted {
			return nil, s.httpError(ctx, &AccessError{fmt.Sprintf("verify names documents of every sensitivity: it needs a token of restricted clearance; %q has %s", c.Name, c.Clearance)}, "")
		}
		v, err := s.ix.Verify(ctx, nil)
		if err != nil {
			return nil, s.httpError(ctx, err, "")
		}
		return &verifyResponse{Body: v}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "status",
		Method:      http.MethodGet,
		Path:        "/v1/status",
		Summary:     "Index status",
		Description: "Manifest, counts and the failed documents within the caller's clearance (those above it are only counted).",
		Errors:      []int{http.StatusUnauthorized, http.StatusServiceUnavailable},
	}, func(ctx context.Context, _ *statusRequest) (*statusResponse, error) {
		out, err := s.sv.status(ctx, callerFrom(ctx).Clearance)
		if err != nil {
			return nil, s.httpError(ctx, err, "")
		}
		return &statusResponse{Body: out}, nil
	})
}

// httpError turns a service error into the problem huma writes: 422
// naming the field (where: "body", "query" or "path"; a value longer than
// MaxEcho bytes is cut), 403 for a write the token does not allow, 404,
// 429 when the job queue is full, 503 past the request timeout, while
// closing or with the embedder down, else 500 with the detail kept for
// the log (a storage error may name files).
func (s *Server) httpError(ctx context.Context, err error, where string) error {
	var fe *FieldError
	var ae *AccessError
	var nf *notFoundError
	switch {
	case errors.As(err, &fe):
		loc := fe.Field
		if where != "" {
			loc = where + "." + fe.Field
		}
		return huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Location: loc, Message: fe.Message, Value: clipValue(fe.Value)})
	case errors.As(err, &ae):
		return huma.Error403Forbidden(ae.Reason)
	case errors.As(err, &nf):
		return huma.Error404NotFound(nf.Error())
	case errors.Is(err, index.ErrNotFound):
		return huma.Error404NotFound("not found (or not within your clearance)")
	case errors.Is(err, errQueueFull):
		return huma.NewError(http.StatusTooManyRequests, err.Error())
	case errors.Is(err, errShuttingDown):
		return huma.Error503ServiceUnavailable("the server is shutting down: it takes no more writes")
	case errors.Is(err, index.ErrEmbedder):
		s.log.WarnContext(ctx, "embedder failed", "err", err)
		return huma.Error503ServiceUnavailable(embedderDown)
	case errors.Is(err, index.ErrReranker):
		s.log.WarnContext(ctx, "reranker failed", "err", err)
		return huma.Error503ServiceUnavailable(rerankerDown)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return huma.Error503ServiceUnavailable(fmt.Sprintf("the request took longer than the server's limit of %s", s.opts.RequestTimeout))
	case errors.Is(err, index.ErrClosed):
		return huma.Error503ServiceUnavailable("the server is shutting down")
	}
	s.log.ErrorContext(ctx, "request failed", "err", err)
	return huma.Error500InternalServerError("internal error (the server's log has the details)")
}

// serverTiming is a Server-Timing header's metric: name;dur= d in
// milliseconds.
func serverTiming(name string, d time.Duration) string {
	return name + ";dur=" + strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64)
}

// rerankerDown says what to do when the reranker fails.
const rerankerDown = "the reranker is unreachable (or failing); the same search without \"rerank\" still works"

// embedderDown says what to do when the embedder cannot embed a query.
const embedderDown = "the embedder is unreachable (or failing), so modes dense and hybrid cannot answer now; mode bm25 still works (\"mode\": \"bm25\")"

// clipValue cuts a value a caller sent to MaxEcho bytes: a string, or
// anything else by its JSON.
func clipValue(v any) any {
	switch x := v.(type) {
	case nil, bool, int, int64, float64:
		return v
	case string:
		return clip(x)
	}
	data, err := json.Marshal(v)
	if err != nil || len(data) > MaxEcho {
		return clip(string(data))
	}
	return v
}

// huma's own validation errors (maxLength, enum, an unknown property)
// echo the offending value: cut it, so that a 422 never repeats a
// request's megabyte. huma.NewError is huma's documented hook.
func init() {
	newError := huma.NewError
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		for _, e := range errs {
			if d, ok := e.(*huma.ErrorDetail); ok {
				d.Value = clipValue(d.Value)
			}
		}
		return newError(status, msg, errs...)
	}
}
