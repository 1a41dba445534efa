package serve

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addWriteTools adds the write tools for callers like c. Each makes a job
// through the same code as the HTTP API; the job runs in the background
// (job_status follows it) unless the call asks to wait.
func (s *Server) addWriteTools(srv *mcp.Server, c Caller) {
	destructive := &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: false, OpenWorldHint: new(bool)}
	who := func(ctx context.Context) Caller {
		// The name for the job comes from the request where there is
		// one; what the caller may do comes from c, fixed with the server.
		if r := callerFrom(ctx); r.Clearance == c.Clearance && r.Write == c.Write && r.Name != Anonymous.Name {
			return r
		}
		return c
	}
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "ingest",
		Description: "Store a document (text, or bytes as data_base64) under a source name, as a job; ingesting a source again replaces it. A sensitivity above your clearance is refused.",
		Annotations: destructive,
	}, tool(s, "ingest", func(ctx context.Context, in IngestInput) (Job, error) {
		return deref(s.ingest(ctx, who(ctx), &in, nil))
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "delete",
		Description: "Delete documents by doc id or source, as a job.",
		Annotations: destructive,
	}, tool(s, "delete", func(ctx context.Context, in DeleteInput) (Job, error) {
		return deref(s.delete(ctx, who(ctx), &in))
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "rebuild",
		Description: "Re-derive every document from the blob store into a new generation and switch to it, as a job; searches go on meanwhile. Needs restricted clearance.",
		Annotations: destructive,
	}, tool(s, "rebuild", func(ctx context.Context, in RebuildInput) (Job, error) {
		return deref(s.rebuild(ctx, who(ctx), &in))
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "reembed",
		Description: "Embed every block with another embedder in a new generation and switch to it, as a job. Needs restricted clearance.",
		Annotations: destructive,
	}, tool(s, "reembed", func(ctx context.Context, in ReembedInput) (Job, error) {
		return deref(s.reembed(ctx, who(ctx), &in))
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "rollback",
		Description: "Make the previous generation live again, as a job. Needs restricted clearance.",
		Annotations: destructive,
	}, tool(s, "rollback", func(ctx context.Context, in RollbackInput) (Job, error) {
		return deref(s.rollback(ctx, who(ctx), &in))
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "compact",
		Description: "Merge the full-text index into one segment without deleted postings, as a job. Needs restricted clearance.",
		Annotations: destructive,
	}, tool(s, "compact", func(ctx context.Context, in CompactInput) (Job, error) {
		return deref(s.compact(ctx, who(ctx), &in))
	}))
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "job_status",
		Description: "A write job's state (queued, running, succeeded, failed, canceled), progress, result or error, by the id a write tool returned.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
	}, tool(s, "job_status", func(ctx context.Context, in JobInput) (Job, error) {
		return deref(s.job(who(ctx), in.ID))
	}))
}

func ptr[T any](v T) *T { return &v }

func deref[T any](v *T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return *v, nil
}
