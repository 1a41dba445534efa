package serve

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/escurel/escurel/index"
)

// metrics are the server's Prometheus collectors, in a registry of its
// own, so that two servers in one process (tests) do not collide.
type metrics struct {
	registry *prometheus.Registry
	// indexReg holds the index's gauges and the write jobs' counters,
	// served to restricted callers only: counts of the whole index, and
	// of writes to it, tell what lies above a lower clearance.
	indexReg *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	jobs     *prometheus.CounterVec
	queued   prometheus.Gauge
	batches  prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "escurel_requests_total",
			Help: "Requests answered, by route (an HTTP pattern, or mcp/TOOL for an MCP tool call), method, code (HTTP status, or ok/error for a tool) and search mode.",
		}, []string{"route", "method", "code", "mode"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "escurel_request_duration_seconds",
			Help:    "Time to answer a request, by route and search mode.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "mode"}),
	}
	m.jobs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "escurel_jobs_total",
		Help: "Write jobs finished, by kind (ingest, delete, rebuild, reembed, rollback, compact) and outcome (succeeded, failed, canceled).",
	}, []string{"kind", "outcome"})
	m.queued = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "escurel_jobs_queued",
		Help: "Write jobs waiting behind the running one.",
	})
	m.batches = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "escurel_ingest_batch_documents",
		Help:    "Documents in each batch of single-document ingest jobs run together (group commit): 1 when each runs alone.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})
	m.registry.MustRegister(m.requests, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(route, method, code, mode string, d time.Duration) {
	m.requests.WithLabelValues(route, method, code, mode).Inc()
	m.latency.WithLabelValues(route, mode).Observe(d.Seconds())
}

func (m *metrics) jobFinished(kind, outcome string) { m.jobs.WithLabelValues(kind, outcome).Inc() }

func (m *metrics) setQueued(n int) { m.queued.Set(float64(n)) }

func (m *metrics) ingestBatch(docs int) { m.batches.Observe(float64(docs)) }

// watch adds gauges of ix, read at each scrape: documents, blocks, the
// live generation's number and the index file's size.
func (m *metrics) watch(ix *index.Index) {
	m.indexReg = prometheus.NewRegistry()
	// The write jobs too: restricted writes (and the operator's forwarded
	// ones) ticking by tell a lower clearance what happens above it.
	m.indexReg.MustRegister(&indexCollector{ix: ix}, &replicaCollector{ix: ix}, m.jobs, m.queued, m.batches)
}

// indexCollector reads the index's counts when Prometheus scrapes.
type indexCollector struct{ ix *index.Index }

var (
	docsDesc  = prometheus.NewDesc("escurel_documents", "Documents in the live generation, failed ones included.", nil, nil)
	blocksDes = prometheus.NewDesc("escurel_blocks", "Blocks in the live generation.", nil, nil)
	genDesc   = prometheus.NewDesc("escurel_generation", "The number of the live generation (gen-NNNNNN).", nil, nil)
	bytesDesc = prometheus.NewDesc("escurel_index_bytes", "Size of the live generation's index file, in bytes.", nil, nil)
)

func (c *indexCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- docsDesc
	ch <- blocksDes
	ch <- genDesc
	ch <- bytesDesc
}

func (c *indexCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := strconv.Atoi(strings.TrimPrefix(c.ix.Generation(), "gen-")); err == nil {
		ch <- prometheus.MustNewConstMetric(genDesc, prometheus.GaugeValue, float64(n))
	}
	st, err := c.ix.Stats(ctx)
	if err != nil {
		return // closed or shutting down: no sample rather than a wrong one
	}
	ch <- prometheus.MustNewConstMetric(docsDesc, prometheus.GaugeValue, float64(st.Documents))
	ch <- prometheus.MustNewConstMetric(blocksDes, prometheus.GaugeValue, float64(st.Blocks))
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(st.FileBytes))
}

// handler serves the metrics; the index's gauges only to a caller of
// restricted clearance (Prometheus sends a bearer token:
// authorization.credentials in its scrape config).
func (m *metrics) handler() http.Handler {
	base := promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	full := promhttp.HandlerFor(prometheus.Gatherers{m.registry, m.indexReg}, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if callerFrom(r.Context()).Clearance == index.Restricted {
			full.ServeHTTP(w, r)
			return
		}
		base.ServeHTTP(w, r)
	})
}

// requestInfo is what a request's handlers learn for its metrics and
// access log line: the search mode and the caller's name.
type requestInfo struct {
	mode   string
	caller string
	// pattern is the mux pattern that serves the request ("" for none),
	// when routed: looked up once a request (routeOf).
	pattern string
	routed  bool
}

// routeOf returns the mux pattern that serves r, "" for none: the one
// instrument looked up, else looked up now.
func routeOf(mux *http.ServeMux, r *http.Request) string {
	if info := requestInfoFrom(r.Context()); info != nil && info.routed {
		return info.pattern
	}
	_, pattern := mux.Handler(r)
	return pattern
}

type requestInfoKey struct{}

func requestInfoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// setMode records the search mode of the request in ctx, if any.
func setMode(ctx context.Context, mode string) {
	if info := requestInfoFrom(ctx); info != nil {
		info.mode = mode
	}
}

// statusWriter records the status code; Unwrap lets
// http.ResponseController reach Flush for MCP's event streams.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts and times every request by the mux pattern that
// serves it, and writes one access log line: no query text, which may
// itself be confidential.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := s.mux.Handler(r)
		route := pattern
		if route == "" {
			route = "other"
		}
		info := &requestInfo{caller: Anonymous.Name, pattern: pattern, routed: true}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info)))
		d := time.Since(start)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		s.metrics.observe(route, r.Method, strconv.Itoa(sw.code), info.mode, d)
		level := slog.LevelInfo
		if sw.code >= 500 {
			level = slog.LevelError
		}
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
			slog.Int("status", sw.code), slog.Duration("duration", d),
			slog.String("caller", info.caller), slog.String("mode", info.mode),
			slog.String("remote", r.RemoteAddr))
	})
}
