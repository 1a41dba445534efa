// Package serve is escurel's server: one process owns an index and
// answers searches over an HTTP JSON API (under /v1, described by the
// OpenAPI document at /v1/openapi.json) and over MCP (streamable HTTP at
// /mcp, or stdio), with Prometheus metrics at /metrics and probes at
// /healthz and /readyz.
//
// A caller is whom its bearer token names in the tokens file (LoadTokens);
// without a token it is Anonymous, public and read-only, and an unknown
// token is refused (401). The clearance comes from the token only: no
// request field and no tool argument sets it, and every read passes it to
// the index, which drops what lies above it (index.SearchOptions.Clearance).
//
// With Options.AllowWrite, callers whose token has write permission may
// also ingest, delete, rebuild, reembed, roll back and compact. Each write
// is a Job: the server runs one at a time, in the order they came, and
// keeps a bounded queue of the others (see Options.MaxQueue). A writer
// touches only documents at or below its clearance; the writes that act
// on every document need restricted clearance.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/rerank"
)

// Defaults of Options.
const (
	DefaultRequestTimeout  = 30 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
)

// Options configure a Server. A nil *Options and zero fields mean the
// defaults.
type Options struct {
	// Tokens maps bearer tokens to callers; nil knows no token, so every
	// caller is Anonymous and any Authorization header is refused.
	Tokens *Tokens
	// Logger receives the access log (one line a request) and errors.
	// Default: slog.Default().
	Logger *slog.Logger
	// RequestTimeout bounds one API request or MCP tool call; past it the
	// request fails with 503 (a tool error over MCP). Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ShutdownTimeout bounds how long Serve waits for running requests
	// once its context is done. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// AllowWrite serves the writes (ingest, delete, rebuild, reembed,
	// rollback, compact) to callers whose token has write permission.
	// Without it every write answers 403 and MCP offers no write tool.
	AllowWrite bool
	// AllowPaths, when not empty, is a directory whose files a writer of
	// restricted clearance may ingest by path (IngestInput.Path); paths
	// outside it, symbolic links resolved, are refused. Empty: no path
	// is read, only uploaded bytes.
	AllowPaths string
	// MaxUploadBytes bounds one ingested document. Default
	// DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// MaxQueue bounds the write jobs waiting behind the running one;
	// past it a write answers 429. Default DefaultMaxQueue.
	MaxQueue int
	// IngestBatch bounds how many single-document ingest jobs waiting in
	// the queue run together, as one batch of the index (one transaction
	// and embedder call; each job keeps its own outcome). Default
	// DefaultIngestBatch; 1 runs each alone.
	IngestBatch int
	// Reranker, when not nil, reorders the hits of a search that asks
	// for it (SearchInput.Rerank); nil refuses such a search.
	Reranker rerank.Reranker
	// LocalToken and LocalCommand, both set, let the escurel CLI of this
	// machine run its commands in the server (LocalCommandPath): a
	// request bearing LocalToken runs LocalCommand. escurel serve records
	// the token in the index directory's SERVER file (mode 0600), so
	// whoever may read the index's files may run commands on it, and no
	// one else.
	LocalToken   string
	LocalCommand CommandFunc
}

// Server answers requests for one open index. It does not own the index:
// the caller opens it before New and closes it after Serve returns. A
// Server is safe for concurrent use.
type Server struct {
	ix      *index.Index
	sv      *service
	opts    Options
	tokens  *Tokens
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	handler http.Handler
	api     huma.API
	mcp     map[Caller]*mcp.Server // by clearance and write (Name empty)
	jobs    *jobQueue              // nil without AllowWrite and LocalCommand
	// allowRoot is Options.AllowPaths, absolute and with symbolic links
	// resolved.
	allowRoot string
	// ready is false once shutdown has begun, so that /readyz sends load
	// balancers elsewhere while running requests drain.
	ready atomic.Bool
	// stopping is cancelled when shutdown begins: forwarded commands
	// (a rebuild, an ingest) stop cleanly instead of running on past it.
	stopping context.Context
	stop     context.CancelFunc
}

// New builds a server for ix; it touches no storage and listens on
// nothing (see Serve, Handler). With Options.AllowWrite it starts the
// goroutine that runs write jobs, which Serve's end or Close stops. The
// error is for an Options.AllowPaths that is not a directory.
func New(ix *index.Index, opts *Options) (*Server, error) {
	s := &Server{ix: ix, sv: &service{ix: ix}, metrics: newMetrics(), mux: http.NewServeMux()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	if opts != nil {
		s.opts = *opts
	}
	s.sv.reranker = s.opts.Reranker
	if s.opts.RequestTimeout <= 0 {
		s.opts.RequestTimeout = DefaultRequestTimeout
	}
	if s.opts.ShutdownTimeout <= 0 {
		s.opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.opts.MaxUploadBytes <= 0 {
		s.opts.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if s.opts.MaxQueue <= 0 {
		s.opts.MaxQueue = DefaultMaxQueue
	}
	if s.opts.IngestBatch <= 0 {
		s.opts.IngestBatch = DefaultIngestBatch
	}
	if s.opts.AllowPaths != "" {
		root, err := filepath.Abs(s.opts.AllowPaths)
		if err == nil {
			root, err = filepath.EvalSymlinks(root)
		}
		if fi, serr := os.Stat(root); err == nil && (serr != nil || !fi.IsDir()) {
			err = errors.New("not a directory")
		}
		if err != nil {
			return nil, fmt.Errorf("allowed paths %s: %w", s.opts.AllowPaths, err)
		}
		s.allowRoot = root
	}
	s.tokens = s.opts.Tokens
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.Default()
	}

	config := huma.DefaultConfig("escurel", index.Version)
	config.Info.Description = "Search an escurel index: blocks ranked by BM25F, vectors or both, with what a model needs to cite them. " +
		"Send \"Authorization: Bearer <token>\" for a clearance above public."
	config.CreateHooks = nil // no $schema links in bodies
	config.Formats = map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat}
	config.OpenAPIPath = "/v1/openapi"
	config.DocsPath = ""
	config.SchemasPath = ""
	config.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "a token of the server's tokens file; without one the caller is public"},
	}
	config.Security = []map[string][]string{{}, {"bearer": {}}}
	s.api = humago.New(s.mux, config)
	s.routes(s.api)

	s.mcp = map[Caller]*mcp.Server{}
	for _, c := range []string{index.Public, index.Internal, index.Restricted} {
		for _, w := range []bool{false, true} {
			s.mcp[Caller{Clearance: c, Write: w}] = s.MCPServer(Caller{Clearance: c, Write: w})
		}
	}
	// Stateless: each POST is its own session, built for the caller its
	// token names, so a session never outlives the token that opened it.
	// The write tools read the caller's name from the request.
	s.mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		c := callerFrom(r.Context())
		return s.mcp[Caller{Clearance: c.Clearance, Write: c.Write}]
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: MaxBodyBytes}))

	s.mux.HandleFunc("POST "+LocalCommandPath, s.localCommand)
	s.metrics.watch(ix)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() || s.ix.Generation() == "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "generation": s.ix.Generation()})
	})
	if s.opts.AllowWrite || s.opts.LocalCommand != nil {
		s.jobs = newJobQueue(s.opts.MaxQueue, s.metrics.jobFinished, s.metrics.setQueued, func(q *jobQueue) {
			q.ingest, q.group, q.batched = s.ix.IngestBatch, s.opts.IngestBatch, s.metrics.ingestBatch
		})
	}
	s.handler = s.instrument(s.authenticate(s.timeout(s.problems(s.mux))))
	s.ready.Store(true)
	return s, nil
}

// Close stops the write jobs: new ones are refused, waiting ones are
// canceled, and the running one is canceled and waited for (an ingest's
// transaction rolls back; a rebuild abandons its new generation). Serve
// calls it once its context is done; call it after using Handler alone.
// It does not close the index.
func (s *Server) Close() error {
	s.ready.Store(false)
	s.stop() // forwarded commands end too
	if s.jobs != nil {
		s.jobs.close()
	}
	return nil
}

// Handler returns the server's HTTP handler: the API, /mcp, /metrics and
// the probes, behind authentication, the access log and the request
// timeout.
func (s *Server) Handler() http.Handler { return s.handler }

// OpenAPI returns the OpenAPI document of the API, as served at
// /v1/openapi.json.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// problems answers what the mux itself answers (an unknown route, a
// wrong method) as RFC 9457 problems, as huma answers everything else,
// and refuses a clearance query parameter: clearance comes from the token.
func (s *Server) problems(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" && r.URL.Query().Has("clearance") {
			writeProblem(w, http.StatusBadRequest, "clearance: not a request parameter; a caller's clearance comes from its bearer token only")
			return
		}
		if routeOf(s.mux, r) == "" {
			// Allow is set by the mux for a wrong method; keep it.
			rec := &problemWriter{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// problemWriter turns the mux's text/plain 404 and 405 into problems.
type problemWriter struct {
	http.ResponseWriter
	replaced bool
}

func (w *problemWriter) WriteHeader(code int) {
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		w.replaced = true
		detail := "no such route: see /v1/openapi.json"
		if code == http.StatusMethodNotAllowed {
			detail = "method not allowed on this route (Allow lists those that are)"
		}
		w.Header().Del("X-Content-Type-Options")
		writeProblem(w.ResponseWriter, code, detail)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *problemWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// timeout bounds each /v1 request by RequestTimeout (MCP tool calls are
// bounded in tool), and sends its answer whole (bufferBody).
func (s *Server) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
		defer cancel()
		bw := newBufferedWriter(w, r.Method != http.MethodHead)
		next.ServeHTTP(bw, r.WithContext(ctx))
		bw.finish() // not after a panic: net/http then drops the connection, as it would without the buffer
	})
}

// Serve answers requests on ln until ctx is done, then stops accepting,
// reports not ready, and waits up to ShutdownTimeout for running requests.
// It closes ln; it does not close the index. The error is nil after a
// clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      s.opts.RequestTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	defer s.startPrewarm()() // s.stop cancels it
	select {
	case err := <-errc:
		s.stop()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.ready.Store(false)
	s.stop()
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	// Stop accepting and drain while the write jobs are canceled: a
	// request waiting for a job (wait=true) then answers with it.
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(sctx) }()
	s.Close()
	err := <-shut
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// ServeStdio serves MCP over stdin and stdout to c (its clearance, and
// whether it may write, which needs Options.AllowWrite too) until ctx is
// done or the client closes its end, then stops the write jobs (Close).
// in and out are the process's stdio in production.
func (s *Server) ServeStdio(ctx context.Context, c Caller, in io.ReadCloser, out io.WriteCloser) error {
	if err := index.CheckSensitivity(c.Clearance); err != nil {
		return err
	}
	defer s.startPrewarm()()
	defer s.Close() // cancels the prewarm first
	ctx = context.WithValue(ctx, callerKey{}, c)
	err := s.MCPServer(c).Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = jsonEncode(w, v)
}

// startPrewarm runs prewarm on its own goroutine and returns a function
// that waits for it to end.
func (s *Server) startPrewarm() (wait func()) {
	done := make(chan struct{})
	go func() { s.prewarm(); close(done) }()
	return func() { <-done }
}

// prewarm reads the hot part of the full-text index into memory
// (Index.Prewarm) while the first requests are served, and logs what it
// did; shutdown cancels it. A failure costs latency only: searches read
// the lists they need themselves, as before.
func (s *Server) prewarm() {
	t0 := time.Now()
	n, err := s.ix.Prewarm(s.stopping)
	if err != nil {
		if s.stopping.Err() == nil {
			s.log.Warn("prewarm the posting cache", "err", err)
		}
		return
	}
	s.log.Info("posting cache prewarmed", "terms", n, "ms", time.Since(t0).Milliseconds())
}
