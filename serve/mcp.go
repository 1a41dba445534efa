package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escurel/escurel/index"
)

// NoInput is the input of a tool that takes no argument.
type NoInput struct{}

// MCPServer returns an MCP server for callers like c: its tools (search,
// expand, get_document, list_documents, status) and resources (documents
// and blocks, see addResources) read the index at c's clearance; with
// Options.AllowWrite and c.Write it also has the write tools (ingest,
// delete, rebuild, reembed, rollback, compact, job_status). The clearance
// and the write permission are fixed when the server is built: a tool has
// no argument that changes them. Over HTTP the handler at /mcp picks the
// server of the caller's token; over stdio the operator chooses (escurel
// serve --stdio --clearance, --stdio-write).
func (s *Server) MCPServer(c Caller) *mcp.Server {
	clearance := c.Clearance
	srv := mcp.NewServer(&mcp.Implementation{Name: "escurel", Title: "escurel document index", Version: index.Version}, &mcp.ServerOptions{
		Instructions: "Search the escurel index with search; cite each hit by its source, byte span (byte_start, byte_end), page and heading_path, and give a generator prompt_text when a hit has one. expand a hit's block_id for its surroundings; get_document for a document's whole text.",
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "search",
		Description: "Rank the index's blocks for a query and return the best k (default 10, at most 1000), each with body, source, title, byte span, page, heading path, block id, score and, for windowed chunkers, prompt_text.",
		Annotations: readOnly,
	}, tool(s, "search", func(ctx context.Context, in SearchInput) (SearchOutput, error) {
		out, err := s.sv.search(ctx, clearance, &in)
		if err != nil {
			return SearchOutput{}, err
		}
		return *out, nil
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "expand",
		Description: "A block (by block_id, from a search hit) with its neighbouring blocks in the same document and its window, within a byte budget.",
		Annotations: readOnly,
	}, tool(s, "expand", func(ctx context.Context, in ExpandInput) (index.Expansion, error) {
		out, err := s.sv.expand(ctx, clearance, &in)
		if err != nil {
			return index.Expansion{}, err
		}
		return *out, nil
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "get_document",
		Description: "A document's whole extracted text (by doc_id, from a hit or list_documents), with its source and title; every block's body is text[byte_start:byte_end].",
		Annotations: readOnly,
	}, tool(s, "get_document", func(ctx context.Context, in DocumentInput) (DocumentOutput, error) {
		out, err := s.sv.document(ctx, clearance, &in)
		if err != nil {
			return DocumentOutput{}, err
		}
		return *out, nil
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "list_documents",
		Description: "The documents of the index, by source, a page at a time (limit, default 100; pass next as after for the next page): doc_id, source, title, media type, status (failed ones with their reason), blocks, bytes, ingested_at. source_prefix and status narrow the list.",
		Annotations: readOnly,
	}, tool(s, "list_documents", func(ctx context.Context, in DocumentsInput) (DocumentsOutput, error) {
		out, err := s.sv.documents(ctx, clearance, &in)
		if err != nil {
			return DocumentsOutput{}, err
		}
		return *out, nil
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "status",
		Description: "The index's manifest (embedder, chunker, analyzer), counts, default search mode and failed documents.",
		Annotations: readOnly,
	}, tool(s, "status", func(ctx context.Context, _ NoInput) (StatusOutput, error) {
		out, err := s.sv.status(ctx, clearance)
		if err != nil {
			return StatusOutput{}, err
		}
		return *out, nil
	}))
	s.addResources(srv, clearance)
	if s.opts.AllowWrite && c.Write {
		s.addWriteTools(srv, c)
	}
	return srv
}

// tool adapts fn to a typed MCP handler: it bounds the call by the
// request timeout, counts it in the metrics as route "mcp/NAME", and
// turns errors into tool errors a model can act on (a storage error's
// detail goes to the log only).
func tool[In, Out any](s *Server, name string, fn func(context.Context, In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		info := &requestInfo{}
		ctx = context.WithValue(ctx, requestInfoKey{}, info)
		ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		start := time.Now()
		out, err := fn(ctx, in)
		code := "ok"
		if err != nil {
			code = "error"
		}
		s.metrics.observe("mcp/"+name, "TOOL", code, info.mode, time.Since(start))
		var fe *FieldError
		var ae *AccessError
		var nf *notFoundError
		switch {
		case err == nil:
		case errors.As(err, &fe):
			err = fmt.Errorf("invalid argument %s: %s", fe.Field, fe.Message)
		case errors.As(err, &ae):
			err = fmt.Errorf("not allowed: %s", ae.Reason)
		case errors.As(err, &nf):
			err = nf
		case errors.Is(err, index.ErrNotFound):
			err = errors.New("not found (or not within your clearance)")
		case errors.Is(err, errQueueFull), errors.Is(err, errShuttingDown):
		case errors.Is(err, index.ErrEmbedder):
			s.log.WarnContext(ctx, "embedder failed", "tool", name, "err", err)
			err = errors.New(embedderDown)
		case errors.Is(err, index.ErrReranker):
			s.log.WarnContext(ctx, "reranker failed", "tool", name, "err", err)
			err = errors.New(rerankerDown)
		case errors.Is(err, context.DeadlineExceeded):
			err = fmt.Errorf("the call took longer than the server's limit of %s", s.opts.RequestTimeout)
		default:
			s.log.ErrorContext(ctx, "tool failed", "tool", name, "err", err)
			err = errors.New("internal error (the server's log has the details)")
		}
		return nil, out, err
	}
}
