package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/chunk"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/rebuild"
)

// Limits of writes, the same over HTTP and MCP.
const (
	DefaultMaxUploadBytes = 64 << 20 // bytes of one ingested document (Options.MaxUploadBytes)
	MaxSourceBytes        = 1024     // bytes of a source name
	MaxTitleBytes         = 1024     // bytes of a title
	MaxDeleteNames        = 1000     // documents one delete may name
	MaxKeep               = 100      // generations a rebuild may keep
)

// IngestInput is a document to ingest: its bytes (over HTTP the request
// body; over MCP text or data_base64) or, where the server allows it, a
// path on the server (Options.AllowPaths), and how to file it.
type IngestInput struct {
	Source      string `json:"source,omitempty" doc:"names the document (a path or URI; the same source replaces the document); at most 1024 bytes; with path: default the file's path" jsonschema:"names the document, e.g. a path or URI; ingesting the same source again replaces it; at most 1024 bytes"`
	Title       string `json:"title,omitempty" jsonschema:"the document's title over what extraction finds"`
	Sensitivity string `json:"sensitivity,omitempty" jsonschema:"public, internal or restricted, at most your clearance; absent: the front matter's, else what the document had, else public"`
	Language    string `json:"language,omitempty" jsonschema:"BCP 47 tag (en, fr) when the front matter gives none"`
	MediaType   string `json:"media_type,omitempty" jsonschema:"e.g. text/markdown; absent: detected from the bytes and the source's extension"`
	Text        string `json:"text,omitempty" jsonschema:"the document's content as text (or give data_base64)"`
	DataBase64  string `json:"data_base64,omitempty" jsonschema:"the document's bytes, base64 (standard encoding)"`
	Path        string `json:"path,omitempty" jsonschema:"a file on the server, under the directory it allows (--allow-paths); restricted clearance only"`
	Wait        bool   `json:"wait,omitempty" jsonschema:"answer once the job has finished (within the call's time limit)"`
}

// DeleteInput names documents to delete, by doc id or source.
type DeleteInput struct {
	Documents []string `json:"documents" minItems:"1" maxItems:"1000" doc:"doc ids or sources" jsonschema:"doc ids or sources of the documents to delete, at most 1000"`
	Wait      bool     `json:"wait,omitempty" jsonschema:"answer once the job has finished (within the call's time limit)"`
}

// RebuildInput configures a rebuild: settings left empty keep the live
// index's.
type RebuildInput struct {
	Chunker       string `json:"chunker,omitempty" jsonschema:"a chunker spec, e.g. default(max_bytes=800); absent: the index's"`
	Analyzer      string `json:"analyzer,omitempty" jsonschema:"an analyzer (standard, simple); absent: the index's"`
	Contextualize string `json:"contextualize,omitempty" jsonschema:"structural or off; absent: the index's"`
	AllowFailures bool   `json:"allow_failures,omitempty" jsonschema:"let documents served now become failed documents"`
	Keep          int    `json:"keep,omitempty" minimum:"0" maximum:"100" jsonschema:"generations to keep, the new one included; 0: 2"`
	Wait          bool   `json:"wait,omitempty" jsonschema:"answer once the job has finished (within the call's time limit)"`
}

// ReembedInput names the embedder a reembed moves the index to.
type ReembedInput struct {
	Embedder string `json:"embedder" minLength:"1" jsonschema:"the new embedder's spec, e.g. hash/256 or openai:text-embedding-3-small?url=..."`
	Keep     int    `json:"keep,omitempty" minimum:"0" maximum:"100" jsonschema:"generations to keep, the new one included; 0: 2"`
	Wait     bool   `json:"wait,omitempty" jsonschema:"answer once the job has finished (within the call's time limit)"`
}

// RollbackInput configures a rollback.
type RollbackInput struct {
	Force bool `json:"force,omitempty" jsonschema:"roll back although the previous generation no longer matches the blob store"`
	Wait  bool `json:"wait,omitempty" jsonschema:"answer once the job has finished (within the call's time limit)"`
}

// CompactInput configures a compaction.
type CompactInput struct {
	Wait bool `json:"wait,omitempty" jsonschema:"answer once the job has finished (within the call's time limit)"`
}

// JobInput names a job.
type JobInput struct {
	ID string `json:"id" jsonschema:"the job's id, from the write that made it"`
}

// JobsOutput lists the jobs a caller may see, newest first.
type JobsOutput struct {
	Jobs []Job `json:"jobs"`
}

// AccessError is a write the caller's token does not allow: 403 over
// HTTP, a tool error over MCP. Reason never names what lies above the
// caller's clearance.
type AccessError struct{ Reason string }

func (e *AccessError) Error() string { return e.Reason }

// notFoundError is documents a delete names that do not exist or lie
// above the caller's clearance, alike; named by their place in the
// request (documents[i]), never by what the index holds.
type notFoundError struct{ names []string }

func (e *notFoundError) Error() string {
	return strings.Join(e.names, ", ") + ": no such document (or not within your clearance)"
}

func (e *notFoundError) Unwrap() error { return index.ErrNotFound }

// rank orders clearances; -1 for an unknown one, which sees nothing.
func rank(clearance string) int {
	switch clearance {
	case index.Public:
		return 0
	case index.Internal:
		return 1
	case index.Restricted:
		return 2
	}
	return -1
}

// mayWrite says why c may not make a job of kind, or nil. whole: the
// write acts on every document (rebuild, reembed, rollback, compact,
// server-side paths), so it needs restricted clearance.
func (s *Server) mayWrite(c Caller, kind string, whole bool) error {
	switch {
	case !s.opts.AllowWrite:
		return &AccessError{"this server takes no writes: start it with --allow-write (escurel serve), or serve.Options.AllowWrite"}
	case !c.Write:
		return &AccessError{fmt.Sprintf("%s writes: the token of %q has no write permission (\"write\": true in the tokens file)", kind, c.Name)}
	case whole && c.Clearance != index.Restricted:
		return &AccessError{fmt.Sprintf("%s acts on every document: it needs a token with write and restricted clearance; %q has %s", kind, c.Name, c.Clearance)}
	}
	return nil
}

// submit enqueues j for c and, with wait, waits until it finishes or ctx
// ends; it returns the job as it is then.
func (s *Server) submit(ctx context.Context, j *job, wait bool) (*Job, error) {
	if err := s.jobs.enqueue(j); err != nil {
		if errors.Is(err, errQueueFull) {
			return nil, fmt.Errorf("%w: %d write jobs wait already; try again when one has finished (GET /v1/jobs)", errQueueFull, s.opts.MaxQueue)
		}
		return nil, err
	}
	if wait {
		select {
		case <-j.done:
		case <-ctx.Done():
		}
	}
	out := j.snapshot()
	return &out, nil
}

// jobFailure is the error a job shows for err: as it is where only
// restricted callers see the job (the operator's view), else a generic
// one, the detail going to the log: a storage error may name files.
func (s *Server) jobFailure(ctx context.Context, j *job, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return err // the queue says canceled
	}
	if j.level == index.Restricted {
		return err
	}
	s.log.ErrorContext(ctx, "job failed", "job", j.pub.ID, "kind", j.pub.Kind, "err", err)
	return errors.New("internal error (the server's log has the details)")
}

// ingest makes an ingest job for c.
func (s *Server) ingest(ctx context.Context, c Caller, in *IngestInput, body []byte) (*Job, error) {
	if err := s.mayWrite(c, JobIngest, in.Path != ""); err != nil {
		return nil, err
	}
	input, err := s.ingestInput(in, body)
	if err != nil {
		return nil, err
	}
	if err := s.mayIngest(ctx, c, &input); err != nil {
		return nil, err
	}
	j := &job{pub: Job{Kind: JobIngest, Caller: c.Name, Progress: JobProgress{Total: 1}}, level: c.Clearance}
	j.one = &single{source: input.Source, size: len(input.Data)}
	j.one.check = func(ctx context.Context) (index.Input, error) {
		// Again: a job queued before this one may have changed the
		// document.
		if err := s.mayIngest(ctx, c, &input); err != nil {
			return index.Input{}, err
		}
		return input, nil
	}
	// The queue runs the job in a batch with the single-document ingests
	// queued behind it (jobQueue.runBatch).
	j.one.finish = func(ctx context.Context, j *job, r index.Result, docErr, err error) (*JobResult, error) {
		if err != nil {
			return nil, s.jobFailure(ctx, j, err)
		}
		if r.Status == "" { // nothing stored; the error is about the caller's own document
			return nil, docErr
		}
		// Fail closed: were the stored document above c's clearance
		// (mayIngest checks the front matter of text formats only), the
		// job shows it to those who may see it.
		if rec, err := s.ix.Blobs().GetRecord(ctx, r.DocID); err != nil || rank(rec.Sensitivity) < 0 {
			j.raise(index.Restricted)
		} else {
			j.raise(rec.Sensitivity)
		}
		j.progress(1, 1)
		return &JobResult{Documents: []IngestedDocument{{
			DocID: r.DocID, Source: r.Source, Title: r.Title, Status: string(r.Status),
			Blocks: r.Blocks, MediaType: r.MediaType, Reason: r.Reason,
		}}}, nil
	}
	return s.submit(ctx, j, in.Wait)
}

// ingestInput checks in's fields and builds the document: its bytes from
// body, Text, DataBase64 or Path, exactly one.
func (s *Server) ingestInput(in *IngestInput, body []byte) (index.Input, error) {
	out := index.Input{Source: in.Source, Title: in.Title, Sensitivity: in.Sensitivity, Language: in.Language, MediaType: in.MediaType}
	given := 0
	for _, b := range []bool{len(body) > 0, in.Text != "", in.DataBase64 != "", in.Path != ""} {
		if b {
			given++
		}
	}
	if given > 1 {
		return out, &FieldError{"data", "give the document's bytes one way only: the body (text, data_base64) or path", nil}
	}
	max := s.opts.MaxUploadBytes
	switch {
	case in.Path != "":
		p, data, err := s.readAllowed(in.Path, max)
		if err != nil {
			return out, err
		}
		if out.Source == "" {
			out.Source = p
		}
		out.Data = data
	case in.DataBase64 != "":
		if int64(base64.StdEncoding.DecodedLen(len(in.DataBase64))) > max+2 {
			return out, &FieldError{"data_base64", fmt.Sprintf("more than %d bytes", max), len(in.DataBase64)}
		}
		data, err := base64.StdEncoding.DecodeString(in.DataBase64)
		if err != nil {
			return out, &FieldError{"data_base64", "not standard base64: " + err.Error(), nil}
		}
		out.Data = data
	case in.Text != "":
		out.Data = []byte(in.Text)
	default:
		// A copy: body is the HTTP layer's buffer (huma's pool), reused
		// for the next request once the handler returns, while the job
		// may still wait in the queue or run.
		out.Data = bytes.Clone(body)
	}
	if int64(len(out.Data)) > max {
		return out, &FieldError{"data", fmt.Sprintf("%d bytes, at most %d (the server's upload limit)", len(out.Data), max), len(out.Data)}
	}
	switch {
	case out.Source == "":
		return out, &FieldError{"source", "empty: name the document (a path or URI)", ""}
	case len(out.Source) > MaxSourceBytes:
		return out, &FieldError{"source", fmt.Sprintf("%d bytes, at most %d", len(out.Source), MaxSourceBytes), out.Source}
	case !printable(out.Source):
		return out, &FieldError{"source", "not valid UTF-8, or holds control characters", nil}
	case len(out.Title) > MaxTitleBytes:
		return out, &FieldError{"title", fmt.Sprintf("%d bytes, at most %d", len(out.Title), MaxTitleBytes), out.Title}
	case !printable(out.Title):
		return out, &FieldError{"title", "not valid UTF-8, or holds control characters", nil}
	}
	if out.Sensitivity != "" {
		if err := index.CheckSensitivity(out.Sensitivity); err != nil {
			return out, &FieldError{"sensitivity", "want public, internal or restricted", out.Sensitivity}
		}
	}
	if out.Language != "" {
		if err := index.CheckLanguage(out.Language); err != nil {
			return out, &FieldError{"language", err.Error(), out.Language}
		}
	}
	if out.MediaType != "" {
		if _, err := extract.For(out.MediaType); err != nil && !errors.Is(err, extract.ErrNotLinked) {
			return out, &FieldError{"media_type", "no extractor for it; the server knows " + extract.IDs(), out.MediaType}
		}
	}
	return out, nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// readAllowed reads a file under Options.AllowPaths: the path, relative
// to that directory or absolute, must lie in it once symbolic links are
// resolved. It returns the resolved path. Nothing is said about a path
// outside the directory but that it is outside.
func (s *Server) readAllowed(p string, max int64) (string, []byte, error) {
	if s.allowRoot == "" {
		return "", nil, &AccessError{"path: this server ingests no files of its own: start it with --allow-paths DIR, or send the document's bytes"}
	}
	outside := &AccessError{"path: outside the directory the server allows (--allow-paths)"}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.allowRoot, p)
	}
	p = filepath.Clean(p)
	if !within(s.allowRoot, p) {
		return "", nil, outside
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", nil, &FieldError{"path", "no such file under the allowed directory", nil}
	}
	if !within(s.allowRoot, real) {
		return "", nil, outside
	}
	f, err := os.Open(real)
	if err != nil {
		return "", nil, &FieldError{"path", "cannot be read", nil}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return "", nil, &FieldError{"path", "not a regular file (give files one at a time)", nil}
	}
	if fi.Size() > max {
		return "", nil, &FieldError{"path", fmt.Sprintf("%d bytes, at most %d (the server's upload limit)", fi.Size(), max), nil}
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && fi.Size() > 0 {
		return "", nil, &FieldError{"path", "cannot be read", nil}
	}
	return real, data, nil
}

func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// mayIngest refuses a document that would be stored above c's clearance:
// a sensitivity given above it, front matter (of a text format) that sets
// one above it, or a source that names a document above it already
// (replacing it would overwrite what c may not read).
func (s *Server) mayIngest(ctx context.Context, c Caller, in *index.Input) error {
	max := rank(c.Clearance)
	if max < 0 {
		return &AccessError{"unknown clearance"}
	}
	if in.Sensitivity != "" && rank(in.Sensitivity) > max {
		return &AccessError{fmt.Sprintf("sensitivity: %s is above your clearance (%s)", in.Sensitivity, c.Clearance)}
	}
	mt := in.MediaType
	if mt == "" {
		name := in.Name
		if name == "" {
			name = filepath.Base(in.Source)
		}
		mt, _ = extract.Detect(name, in.Data)
	}
	if mt == extract.MediaMarkdown || mt == extract.MediaText {
		doc, err := extract.Extract(ctx, mt, filepath.Base(in.Source), in.Data, extract.Limits{})
		if err == nil && doc.Sensitivity != "" && rank(doc.Sensitivity) > max {
			return &AccessError{fmt.Sprintf("sensitivity: the document's front matter sets %s, above your clearance (%s)", doc.Sensitivity, c.Clearance)}
		}
	}
	level, exists, err := s.level(ctx, blobstore.DocID(in.Source))
	switch {
	case err != nil:
		return err
	case !exists:
		return nil
	case rank(level) < 0 || rank(level) > max:
		return &AccessError{"source: not writable at your clearance; choose another source"}
	}
	return nil
}

// level returns the sensitivity of document id as a reader would meet
// it: the higher of its record's and its row's (derivation may raise a
// level above the record's, never lower it), an unknown level winning
// over both (rank < 0: fail closed). exists is false when neither the
// record nor the row is there.
func (s *Server) level(ctx context.Context, id string) (level string, exists bool, err error) {
	rec, err := s.ix.Blobs().GetRecord(ctx, id)
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
	case err != nil:
		return "", false, err
	default:
		level, exists = rec.Sensitivity, true
	}
	row, held, err := s.ix.DocumentSensitivity(ctx, id)
	switch {
	case err != nil:
		return "", false, err
	case !held:
	case !exists || rank(row) < 0 || rank(level) >= 0 && rank(row) > rank(level):
		level, exists = row, true
	}
	return level, exists, nil
}

// delete makes a delete job for c.
func (s *Server) delete(ctx context.Context, c Caller, in *DeleteInput) (*Job, error) {
	if err := s.mayWrite(c, JobDelete, false); err != nil {
		return nil, err
	}
	switch {
	case len(in.Documents) == 0:
		return nil, &FieldError{"documents", "empty: name the documents to delete", nil}
	case len(in.Documents) > MaxDeleteNames:
		return nil, &FieldError{"documents", fmt.Sprintf("%d names, at most %d", len(in.Documents), MaxDeleteNames), len(in.Documents)}
	}
	for i, name := range in.Documents {
		if name == "" || len(name) > MaxSourceBytes {
			return nil, &FieldError{fmt.Sprintf("documents[%d]", i), fmt.Sprintf("want a doc id or a source of 1 to %d bytes", MaxSourceBytes), name}
		}
	}
	names := append([]string(nil), in.Documents...)
	if err := s.mayDelete(ctx, c, names); err != nil {
		return nil, err
	}
	j := &job{pub: Job{Kind: JobDelete, Caller: c.Name, Progress: JobProgress{Total: len(names)}}, level: c.Clearance}
	j.run = func(ctx context.Context, j *job) (*JobResult, error) {
		if err := s.mayDelete(ctx, c, names); err != nil {
			return nil, err
		}
		ids, err := s.ix.Delete(ctx, names...)
		if err != nil {
			return nil, s.jobFailure(ctx, j, err)
		}
		j.progress(len(names), len(names))
		return &JobResult{Deleted: nonNil(ids)}, nil
	}
	return s.submit(ctx, j, in.Wait)
}

// mayDelete answers names that do not exist and names of documents above
// c's clearance alike: not found.
func (s *Server) mayDelete(ctx context.Context, c Caller, names []string) error {
	var missing []string
	for i, name := range names {
		id := name
		if !blobstore.IsDocID(name) {
			id = blobstore.DocID(name)
		}
		level, exists, err := s.level(ctx, id)
		if err != nil {
			return err
		}
		if !exists || rank(level) < 0 || rank(level) > rank(c.Clearance) {
			missing = append(missing, fmt.Sprintf("documents[%d]", i))
		}
	}
	if len(missing) > 0 {
		return &notFoundError{missing}
	}
	return nil
}

// rebuild makes a rebuild job.
func (s *Server) rebuild(ctx context.Context, c Caller, in *RebuildInput) (*Job, error) {
	if err := s.mayWrite(c, JobRebuild, true); err != nil {
		return nil, err
	}
	opts := index.Options{Chunker: in.Chunker, Analyzer: in.Analyzer}
	if in.Chunker != "" {
		if _, err := chunk.ParseSpec(in.Chunker); err != nil {
			return nil, &FieldError{"chunker", err.Error(), in.Chunker}
		}
	}
	if in.Contextualize != "" {
		v, err := index.ParseContextualize(in.Contextualize)
		if err != nil {
			return nil, &FieldError{"contextualize", err.Error(), in.Contextualize}
		}
		opts.Contextualize = v
	}
	if in.Keep < 0 || in.Keep > MaxKeep {
		return nil, &FieldError{"keep", fmt.Sprintf("want 0 to %d", MaxKeep), in.Keep}
	}
	return s.submitRebuild(ctx, c, JobRebuild, rebuild.Options{Index: opts, AllowFailures: in.AllowFailures, Keep: in.Keep}, in.Wait)
}

// reembed makes a reembed job.
func (s *Server) reembed(ctx context.Context, c Caller, in *ReembedInput) (*Job, error) {
	if err := s.mayWrite(c, JobReembed, true); err != nil {
		return nil, err
	}
	spec, err := embed.ParseSpec(in.Embedder)
	if err != nil || spec.IsZero() {
		msg := "empty"
		if err != nil {
			msg = err.Error()
		}
		return nil, &FieldError{"embedder", msg, in.Embedder}
	}
	if in.Keep < 0 || in.Keep > MaxKeep {
		return nil, &FieldError{"keep", fmt.Sprintf("want 0 to %d", MaxKeep), in.Keep}
	}
	return s.submitRebuild(ctx, c, JobReembed, rebuild.Options{Index: index.Options{Embedder: spec}, Keep: in.Keep}, in.Wait)
}

func (s *Server) submitRebuild(ctx context.Context, c Caller, kind string, opts rebuild.Options, wait bool) (*Job, error) {
	j := &job{pub: Job{Kind: kind, Caller: c.Name}, level: index.Restricted}
	j.run = func(ctx context.Context, j *job) (*JobResult, error) {
		opts.Dir, opts.Blobs, opts.Live, opts.Progress = s.ix.Dir(), s.ix.Blobs(), s.ix, j.progress
		run := rebuild.Run
		if kind == JobReembed {
			run = rebuild.Reembed
		}
		sum, err := run(ctx, opts)
		if err != nil {
			return nil, s.jobFailure(ctx, j, err)
		}
		return &JobResult{Generation: sum.Generation, Previous: sum.Previous, Rebuilt: &RebuildSummary{
			Documents: sum.Documents, Blocks: sum.Blocks, Failed: sum.Failed, Recovered: sum.Recovered,
			CaughtUp: sum.CaughtUp, Elapsed: sum.Elapsed.Milliseconds(),
		}}, nil
	}
	return s.submit(ctx, j, wait)
}

// rollback makes a rollback job.
func (s *Server) rollback(ctx context.Context, c Caller, in *RollbackInput) (*Job, error) {
	if err := s.mayWrite(c, JobRollback, true); err != nil {
		return nil, err
	}
	j := &job{pub: Job{Kind: JobRollback, Caller: c.Name, Progress: JobProgress{Total: 1}}, level: index.Restricted}
	force := in.Force
	j.run = func(ctx context.Context, j *job) (*JobResult, error) {
		from, to, err := s.ix.Rollback(ctx, &index.RollbackOptions{Force: force})
		if err != nil {
			return nil, s.jobFailure(ctx, j, err)
		}
		j.progress(1, 1)
		return &JobResult{Generation: to, Previous: from}, nil
	}
	return s.submit(ctx, j, in.Wait)
}

// compact makes a compaction job.
func (s *Server) compact(ctx context.Context, c Caller, in *CompactInput) (*Job, error) {
	if err := s.mayWrite(c, JobCompact, true); err != nil {
		return nil, err
	}
	j := &job{pub: Job{Kind: JobCompact, Caller: c.Name, Progress: JobProgress{Total: 1}}, level: index.Restricted}
	j.run = func(ctx context.Context, j *job) (*JobResult, error) {
		if err := s.ix.Compact(ctx); err != nil {
			return nil, s.jobFailure(ctx, j, err)
		}
		j.progress(1, 1)
		return &JobResult{Generation: s.ix.Generation()}, nil
	}
	return s.submit(ctx, j, in.Wait)
}

// job returns the job id as c may see it: one it may not see answers as
// a missing one.
func (s *Server) job(c Caller, id string) (*Job, error) {
	if s.jobs == nil {
		return nil, fmt.Errorf("job %s: %w", clip(id), index.ErrNotFound)
	}
	j := s.jobs.get(id)
	if j == nil || !j.visibleTo(c) {
		return nil, fmt.Errorf("job %s: %w", clip(id), index.ErrNotFound)
	}
	out := j.snapshot()
	return &out, nil
}

// listJobs returns the jobs c may see, newest first.
func (s *Server) listJobs(c Caller) *JobsOutput {
	out := &JobsOutput{Jobs: []Job{}}
	if s.jobs == nil {
		return out
	}
	for _, j := range s.jobs.list() {
		if j.visibleTo(c) {
			out.Jobs = append(out.Jobs, j.snapshot())
		}
	}
	return out
}

// clip shortens a value a caller sent for an error message: at most
// MaxEcho bytes, cut at a rune boundary, marked with "…".
func clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	i := MaxEcho
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// MaxEcho is how many bytes of a value a caller sent an error repeats.
const MaxEcho = 200
