package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/escurel/escurel/index"
)

// LocalCommandPath is where a server with Options.LocalCommand takes the
// command lines of escurel commands run on its machine (see
// CommandRequest). It is not part of the /v1 API: its one caller is the
// escurel CLI, with the local token the server recorded beside the lock.
const LocalCommandPath = "/local/command"

// maxCommandBytes bounds a forwarded command request: above Linux's
// ARG_MAX (2 MiB), so that any command line a shell can run fits.
const maxCommandBytes = 8 << 20

// CommandRequest is an escurel command line forwarded by the CLI to the
// server that holds the index, so that it runs there, on the open index,
// instead of meeting the directory's lock.
type CommandRequest struct {
	// Args is the command line after the program name, global flags
	// included, as the user typed it.
	Args []string `json:"args"`
	// Dir is the client's working directory (absolute): relative paths
	// in Args resolve against it.
	Dir string `json:"dir"`
	// Env holds the client's ESCUREL_* variables; the command sees these
	// and no other environment.
	Env map[string]string `json:"env"`
}

// CommandFunc runs a forwarded command with ctx, writing what the command
// prints to stdout and stderr as it goes, and returns its exit status. ctx
// ends when the client goes away or the server shuts down: the command
// must then stop cleanly (an aborted rebuild leaves the live generation as
// it was).
type CommandFunc func(ctx context.Context, req *CommandRequest, stdout, stderr io.Writer) int

// CommandFrame is one line (JSON) of the response of LocalCommandPath, an
// application/x-ndjson stream: output frames ({"stream": "stdout" or
// "stderr", "data": …}) as the command prints, then one frame with the
// exit status ({"exit": N}). A stream without the exit frame was cut: the
// client must report the command's outcome as unknown.
type CommandFrame struct {
	Stream string `json:"stream,omitempty"`
	Data   string `json:"data,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
}

// frameWriter writes what a command prints to one stream as frames,
// flushed at once, so that the client shows progress as it happens.
type frameWriter struct {
	mu     *sync.Mutex
	enc    *json.Encoder
	rc     *http.ResponseController
	stream string
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.enc.Encode(CommandFrame{Stream: w.stream, Data: string(p)}); err != nil {
		return 0, err
	}
	w.rc.Flush()
	return len(p), nil
}

// localCommand serves LocalCommandPath: it checks the local token, then
// runs the command, streaming its output. authenticate lets the path
// through; the token here is the only one that opens it.
func (s *Server) localCommand(w http.ResponseWriter, r *http.Request) {
	if s.opts.LocalCommand == nil || s.opts.LocalToken == "" {
		writeProblem(w, http.StatusNotFound, "this server takes no forwarded commands")
		return
	}
	// Only this machine's CLI forwards commands: whatever --listen says,
	// a peer beyond loopback is not answered, token or not.
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err != nil || !net.ParseIP(host).IsLoopback() {
		writeProblem(w, http.StatusForbidden, "forwarded commands are taken from this machine only")
		return
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.opts.LocalToken)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="escurel-local"`)
		writeProblem(w, http.StatusUnauthorized, "forwarded commands need the local token of the index directory's SERVER file")
		return
	}
	if info := requestInfoFrom(r.Context()); info != nil {
		info.caller = "local"
	}
	var req CommandRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCommandBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeProblem(w, http.StatusBadRequest, "want a JSON command request {\"args\", \"dir\", \"env\"}: "+err.Error())
		return
	}
	if len(req.Args) == 0 {
		writeProblem(w, http.StatusUnprocessableEntity, "args: empty, want a command line")
		return
	}
	// A rebuild outlives any write deadline: the command ends when it
	// ends, the client gone, or the server shutting down.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.stopping, cancel)
	defer stop()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	stdout := &frameWriter{mu: &mu, enc: enc, rc: rc, stream: "stdout"}
	stderr := &frameWriter{mu: &mu, enc: enc, rc: rc, stream: "stderr"}
	// The access log has the line of this request; the command line is
	// not logged (it may hold a query).
	code := s.opts.LocalCommand(ctx, &req, stdout, stderr)
	mu.Lock()
	defer mu.Unlock()
	_ = enc.Encode(CommandFrame{Exit: &code})
	rc.Flush()
}

// RunWrite runs fn as a write job of kind (one of the Job kinds) for the
// forwarded command of an escurel CLI: queued behind the server's other
// writes, one running at a time, and listed by GET /v1/jobs to restricted
// callers as made by caller "local". It returns once fn has run, with
// fn's error; an error wrapping the queue's refusal when the queue is
// full or the server is shutting down; ctx's error when ctx ends while
// the job waits. fn's context ends with ctx or when the server shuts down.
// Without LocalCommand or AllowWrite the server has no queue and fn runs
// at once.
func (s *Server) RunWrite(ctx context.Context, kind string, fn func(context.Context) error) error {
	if s.jobs == nil {
		return fn(ctx)
	}
	j := &job{pub: Job{Kind: kind, Caller: "local", Progress: JobProgress{Total: 1}}, level: index.Restricted}
	var ferr error
	j.run = func(qctx context.Context, j *job) (*JobResult, error) {
		if ferr = ctx.Err(); ferr != nil {
			return nil, ferr // the client went away while it waited
		}
		rctx, cancel := context.WithCancel(qctx)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		ferr = fn(rctx)
		if ferr == nil {
			j.progress(1, 1)
		}
		return &JobResult{}, ferr
	}
	if _, err := s.submit(ctx, j, false); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	<-j.done // once it ran, or was canceled waiting; ctx's end reaches fn
	if ferr != nil {
		return ferr
	}
	if snap := j.snapshot(); snap.State == JobCanceled {
		return fmt.Errorf("%s: %s", kind, snap.Error) // the server shut down before it ran
	}
	return nil
}
