package serve

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

type ingestRequest struct {
	Source      string `query:"source" maxLength:"1024" doc:"names the document (a path or URI); the same source replaces the document; with path: default the file's real path"`
	Title       string `query:"title" maxLength:"1024" doc:"the document's title over what extraction finds"`
	Sensitivity string `query:"sensitivity" enum:"public,internal,restricted" doc:"at most the caller's clearance; absent: the front matter's, else what the document had, else public"`
	Language    string `query:"language" maxLength:"35" doc:"BCP 47 tag (en, fr) when the front matter gives none"`
	MediaType   string `query:"media_type" maxLength:"100" doc:"e.g. text/markdown; absent: detected from the bytes and the source's extension"`
	Path        string `query:"path" maxLength:"4096" doc:"a file on the server under the directory it allows (--allow-paths), instead of a body; restricted clearance only"`
	Wait        bool   `query:"wait" doc:"answer once the job has finished (200), within the request timeout; else 202 at once"`
	RawBody     []byte `required:"false" doc:"the document's bytes (none with path)"`
}

type deleteRequest struct {
	Wait bool `query:"wait" doc:"answer once the job has finished (200), within the request timeout; else 202 at once"`
	Body DeleteInput
}

type rebuildRequest struct {
	Wait bool `query:"wait" doc:"answer once the job has finished (200), within the request timeout; else 202 at once"`
	Body RebuildInput
}

type reembedRequest struct {
	Wait bool `query:"wait" doc:"answer once the job has finished (200), within the request timeout; else 202 at once"`
	Body ReembedInput
}

type rollbackRequest struct {
	Wait bool `query:"wait" doc:"answer once the job has finished (200), within the request timeout; else 202 at once"`
	Body RollbackInput
}

type compactRequest struct {
	Wait bool `query:"wait" doc:"answer once the job has finished (200), within the request timeout; else 202 at once"`
}

// jobResponse is 202 while the job is queued or running, 200 once it has
// finished (wait=true).
type jobResponse struct {
	Status int
	Body   *Job
}

type jobRequest struct {
	ID string `path:"id" maxLength:"64" doc:"the job's id"`
}

type jobsRequest struct{}

type jobsResponse struct {
	Body *JobsOutput
}

// writeRoutes registers the write operations and the job views.
func (s *Server) writeRoutes(api huma.API) {
	writeErrors := []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable}
	respond := func(ctx context.Context, j *Job, err error, where string) (*jobResponse, error) {
		if err != nil {
			return nil, s.httpError(ctx, err, where)
		}
		status := http.StatusAccepted
		if j.Finished != nil {
			status = http.StatusOK
		}
		return &jobResponse{Status: status, Body: j}, nil
	}
	huma.Register(api, huma.Operation{
		OperationID:   "ingest",
		Method:        http.MethodPost,
		Path:          "/v1/ingest",
		Summary:       "Ingest a document",
		Description:   "Stores the request body as a document named by source, as a job (202; GET /v1/jobs/{id}). Needs a token with write; a sensitivity above the caller's clearance (given, or in the front matter), or a source that names a document above it, is refused (403).",
		DefaultStatus: http.StatusAccepted,
		MaxBodyBytes:  s.opts.MaxUploadBytes,
		Errors:        append(writeErrors, http.StatusRequestEntityTooLarge),
	}, func(ctx context.Context, in *ingestRequest) (*jobResponse, error) {
		j, err := s.ingest(ctx, callerFrom(ctx), &IngestInput{
			Source: in.Source, Title: in.Title, Sensitivity: in.Sensitivity, Language: in.Language,
			MediaType: in.MediaType, Path: in.Path, Wait: in.Wait,
		}, in.RawBody)
		return respond(ctx, j, err, "query")
	})
	// huma requires a RawBody; an ingest by path sends none. The
	// operation's RequestBody is the one the handler checks.
	api.OpenAPI().Paths["/v1/ingest"].Post.RequestBody.Required = false
	huma.Register(api, huma.Operation{
		OperationID:   "delete",
		Method:        http.MethodPost,
		Path:          "/v1/delete",
		Summary:       "Delete documents",
		Description:   "Deletes documents by doc id or source, as a job. A document above the caller's clearance answers 404, as a missing one does.",
		DefaultStatus: http.StatusAccepted,
		MaxBodyBytes:  MaxBodyBytes,
		Errors:        append(writeErrors, http.StatusNotFound),
	}, func(ctx context.Context, in *deleteRequest) (*jobResponse, error) {
		in.Body.Wait = in.Body.Wait || in.Wait
		j, err := s.delete(ctx, callerFrom(ctx), &in.Body)
		return respond(ctx, j, err, "body")
	})
	huma.Register(api, huma.Operation{
		OperationID:   "rebuild",
		Method:        http.MethodPost,
		Path:          "/v1/rebuild",
		Summary:       "Rebuild the index",
		Description:   "Re-derives every document from the blob store into a new generation, as a job, and switches to it; searches go on meanwhile. Needs write and restricted clearance.",
		DefaultStatus: http.StatusAccepted,
		MaxBodyBytes:  MaxBodyBytes,
		Errors:        writeErrors,
	}, func(ctx context.Context, in *rebuildRequest) (*jobResponse, error) {
		in.Body.Wait = in.Body.Wait || in.Wait
		j, err := s.rebuild(ctx, callerFrom(ctx), &in.Body)
		return respond(ctx, j, err, "body")
	})
	huma.Register(api, huma.Operation{
		OperationID:   "reembed",
		Method:        http.MethodPost,
		Path:          "/v1/reembed",
		Summary:       "Re-embed the index",
		Description:   "Embeds every block with another embedder in a new generation, as a job, and switches to it; searches go on meanwhile. Needs write and restricted clearance.",
		DefaultStatus: http.StatusAccepted,
		MaxBodyBytes:  MaxBodyBytes,
		Errors:        writeErrors,
	}, func(ctx context.Context, in *reembedRequest) (*jobResponse, error) {
		in.Body.Wait = in.Body.Wait || in.Wait
		j, err := s.reembed(ctx, callerFrom(ctx), &in.Body)
		return respond(ctx, j, err, "body")
	})
	huma.Register(api, huma.Operation{
		OperationID:   "rollback",
		Method:        http.MethodPost,
		Path:          "/v1/rollback",
		Summary:       "Roll back a generation",
		Description:   "Makes the previous generation live again, as a job, when it still matches the blob store (or with force). Needs write and restricted clearance.",
		DefaultStatus: http.StatusAccepted,
		MaxBodyBytes:  MaxBodyBytes,
		Errors:        writeErrors,
	}, func(ctx context.Context, in *rollbackRequest) (*jobResponse, error) {
		in.Body.Wait = in.Body.Wait || in.Wait
		j, err := s.rollback(ctx, callerFrom(ctx), &in.Body)
		return respond(ctx, j, err, "body")
	})
	huma.Register(api, huma.Operation{
		OperationID:   "compact",
		Method:        http.MethodPost,
		Path:          "/v1/compact",
		Summary:       "Compact the full-text index",
		Description:   "Merges the full-text index into one segment without deleted postings, as a job. Needs write and restricted clearance.",
		DefaultStatus: http.StatusAccepted,
		Errors:        writeErrors,
	}, func(ctx context.Context, in *compactRequest) (*jobResponse, error) {
		j, err := s.compact(ctx, callerFrom(ctx), &CompactInput{Wait: in.Wait})
		return respond(ctx, j, err, "")
	})
	huma.Register(api, huma.Operation{
		OperationID: "list-jobs",
		Method:      http.MethodGet,
		Path:        "/v1/jobs",
		Summary:     "List jobs",
		Description: "The write jobs the caller may see (those of its clearance or below; rebuilds and the like at restricted only), newest first; finished ones are kept for a while.",
		Errors:      []int{http.StatusUnauthorized},
	}, func(ctx context.Context, _ *jobsRequest) (*jobsResponse, error) {
		return &jobsResponse{Body: s.listJobs(callerFrom(ctx))}, nil
	})
	huma.Register(api, huma.Operation{
		OperationID: "get-job",
		Method:      http.MethodGet,
		Path:        "/v1/jobs/{id}",
		Summary:     "A job",
		Description: "A write job's state, progress, result or error. A job the caller may not see answers 404, as a missing one does.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound},
	}, func(ctx context.Context, in *jobRequest) (*jobResponse, error) {
		j, err := s.job(callerFrom(ctx), in.ID)
		if err != nil {
			return nil, s.httpError(ctx, err, "path")
		}
		return &jobResponse{Status: http.StatusOK, Body: j}, nil
	})
}
