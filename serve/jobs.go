package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/escurel/escurel/index"
)

// Job kinds: the writes a server runs as jobs.
const (
	JobIngest   = "ingest"
	JobDelete   = "delete"
	JobRebuild  = "rebuild"
	JobReembed  = "reembed"
	JobRollback = "rollback"
	JobCompact  = "compact"
	// Kinds of the escurel commands forwarded by the CLI (RunWrite) that
	// have no API route.
	JobGC   = "gc"
	JobSync = "sync"
)

// Job states. A job is queued, then running, then one of the last three.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCanceled  = "canceled"
)

// Defaults of the job queue.
const (
	// DefaultMaxQueue is how many write jobs may wait behind the running
	// one (Options.MaxQueue); past it a new job is refused with 429.
	DefaultMaxQueue = 64
	// DefaultIngestBatch is how many single-document ingest jobs run as
	// one batch at most (Options.IngestBatch): the queue's length, so
	// that a full queue of them is one batch.
	DefaultIngestBatch = 64
	// KeptJobs is how many finished jobs the server remembers for
	// GET /v1/jobs; older ones are forgotten first.
	KeptJobs = 256
)

// Job is a write the server runs in the background, one at a time, in
// the order they came.
type Job struct {
	ID       string      `json:"id" doc:"opaque; GET /v1/jobs/{id}"`
	Kind     string      `json:"kind" enum:"ingest,delete,rebuild,reembed,rollback,compact,gc,sync"`
	State    string      `json:"state" enum:"queued,running,succeeded,failed,canceled"`
	Caller   string      `json:"caller" doc:"the name of the token that made the job"`
	Progress JobProgress `json:"progress"`
	Created  time.Time   `json:"created"`
	Started  *time.Time  `json:"started,omitempty"`
	Finished *time.Time  `json:"finished,omitempty"`
	Result   *JobResult  `json:"result,omitempty" doc:"once succeeded"`
	Error    string      `json:"error,omitempty" doc:"once failed or canceled: why"`
}

// JobProgress counts a job's units of work: documents for ingest, delete,
// rebuild and reembed; 0 of 1 then 1 of 1 for the others.
type JobProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// JobResult is what a succeeded job did; the fields of its kind are set.
type JobResult struct {
	// Documents are the documents an ingest stored, or that failed
	// extraction (status failed, with a reason).
	Documents []IngestedDocument `json:"documents,omitempty"`
	// Deleted are the doc ids a delete removed.
	Deleted []string `json:"deleted,omitempty"`
	// Generation is the live generation after a rebuild, reembed or
	// rollback; Previous the one it replaced.
	Generation string `json:"generation,omitempty"`
	Previous   string `json:"previous,omitempty"`
	// Rebuilt sums up a rebuild or reembed.
	Rebuilt *RebuildSummary `json:"rebuilt,omitempty"`
}

// IngestedDocument is the outcome of one ingested document.
type IngestedDocument struct {
	DocID     string `json:"doc_id"`
	Source    string `json:"source"`
	Title     string `json:"title,omitempty"`
	Status    string `json:"status" enum:"added,replaced,unchanged,failed"`
	Blocks    int    `json:"blocks"`
	MediaType string `json:"media_type"`
	Reason    string `json:"reason,omitempty" doc:"why it failed extraction"`
}

// RebuildSummary sums up a rebuild or reembed.
type RebuildSummary struct {
	Documents int   `json:"documents"`
	Blocks    int   `json:"blocks"`
	Failed    int   `json:"failed" doc:"documents whose bytes still fail extraction"`
	Recovered int   `json:"recovered" doc:"documents that failed before and extract now"`
	CaughtUp  int   `json:"caught_up" doc:"documents written or deleted while it ran, applied before the switch"`
	Elapsed   int64 `json:"elapsed_ms"`
}

// job is a Job with what only the server knows.
type job struct {
	mu  sync.Mutex // guards pub
	pub Job
	// level is the clearance a caller needs to see the job at all: the
	// creator's for an ingest or delete (which touch nothing above it),
	// restricted for the writes that act on everything.
	level string
	run   func(ctx context.Context, j *job) (*JobResult, error)
	// one, for the ingest of one document (POST /v1/ingest, the ingest
	// tool), replaces run: the queue ingests it in one batch with the
	// single-document ingests queued right behind it (jobQueue.work).
	one  *single
	done chan struct{} // closed once the job has finished
}

// single is an ingest job of one document, as the queue runs it in a
// batch with others (group commit).
type single struct {
	source string // the document's source: two of one source never share a batch
	size   int    // its bytes
	// check runs the job's access checks again as it starts (a job queued
	// before it may have changed the document) and returns the document
	// to ingest.
	check func(ctx context.Context) (index.Input, error)
	// finish makes the job's result from the document's outcome in the
	// batch (its Result and document error), or from the batch's error.
	finish func(ctx context.Context, j *job, r index.Result, docErr, err error) (*JobResult, error)
}

// snapshot returns a copy of the job's public state.
func (j *job) snapshot() Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.pub
	if out.Result != nil {
		r := *out.Result
		out.Result = &r
	}
	return out
}

// progress records how far the job is.
func (j *job) progress(done, total int) {
	j.mu.Lock()
	j.pub.Progress = JobProgress{Done: done, Total: total}
	j.mu.Unlock()
}

// raise makes the job visible only at clearance or above, when that is
// higher than its level now.
func (j *job) raise(clearance string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rank(clearance) > rank(j.level) {
		j.level = clearance
	}
}

func (j *job) visibleTo(c Caller) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := rank(j.level)
	return r >= 0 && rank(c.Clearance) >= r
}

// Errors of enqueue.
var (
	errQueueFull    = errors.New("job queue full")
	errShuttingDown = errors.New("the server is shutting down")
)

// jobQueue runs write jobs one at a time, in FIFO order, in one goroutine;
// at most max wait. It remembers the last KeptJobs finished ones.
//
// Ingests of one document are run in batches (group commit, as
// PostgreSQL's commit_delay or Lucene's one commit for many updates): the
// one at the head of the queue and those queued right behind it, up to
// group jobs and maxGroupBytes, go to the index as one IngestBatch, one
// transaction with one embedder call and one fsync of each kind, each job
// with its own outcome. Nothing waits to fill a batch: it holds the
// ingests that arrived while the previous write ran, so under a steady
// stream of small writes the batches grow with the load. A batch stops
// before a second job for a source already in it (that job runs in the
// next batch and sees the first's result, as in FIFO order) and before
// any other kind of job.
type jobQueue struct {
	max    int
	finish func(kind, state string) // metrics
	length func(n int)              // metrics: jobs waiting
	// ingest runs a batch of single-document ingests (Index.IngestBatch),
	// group bounds its jobs (1: one a batch), batched counts it (metrics).
	ingest  func(ctx context.Context, ins []index.Input) ([]index.Result, []error, error)
	group   int
	batched func(docs int)

	mu      sync.Mutex
	byID    map[string]*job
	kept    []*job // every job remembered, oldest first
	waiting []*job
	closed  bool
	wake    chan struct{}

	ctx    context.Context // canceled by close: the running job stops
	cancel context.CancelFunc
	exited chan struct{} // closed when the worker returns
}

// maxGroupBytes bounds the documents' bytes in one batch of single-document
// ingests: the index's own bound on a batch of files (32 MiB).
const maxGroupBytes = 32 << 20

// newJobQueue starts the queue's worker; q.ingest, q.group and q.batched
// are set by setup before it starts.
func newJobQueue(max int, finish func(kind, state string), length func(int), setup func(q *jobQueue)) *jobQueue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &jobQueue{max: max, finish: finish, length: length, group: 1, batched: func(int) {}, byID: map[string]*job{},
		wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, exited: make(chan struct{})}
	if setup != nil {
		setup(q)
	}
	go q.work()
	return q
}

// enqueue adds j behind the waiting jobs; errQueueFull when max wait
// already, errShuttingDown once closed.
func (q *jobQueue) enqueue(j *job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errShuttingDown
	}
	if len(q.waiting) >= q.max {
		return errQueueFull
	}
	var id [8]byte
	rand.Read(id[:])
	j.pub.ID = hex.EncodeToString(id[:])
	j.pub.State = JobQueued
	j.pub.Created = time.Now().UTC()
	j.done = make(chan struct{})
	q.byID[j.pub.ID] = j
	q.kept = append(q.kept, j)
	q.waiting = append(q.waiting, j)
	q.length(len(q.waiting))
	q.forget()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// forget drops the oldest finished jobs past KeptJobs. q.mu is held.
func (q *jobQueue) forget() {
	for len(q.kept) > KeptJobs {
		i := 0
		for i < len(q.kept) && !finished(q.kept[i]) {
			i++
		}
		if i == len(q.kept) {
			return // all running or waiting (bounded by max+1)
		}
		delete(q.byID, q.kept[i].pub.ID)
		q.kept = append(q.kept[:i], q.kept[i+1:]...)
	}
}

func finished(j *job) bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// get returns the job with id, if the queue remembers it.
func (q *jobQueue) get(id string) *job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.byID[id]
}

// list returns the jobs remembered, newest first.
func (q *jobQueue) list() []*job {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]*job, 0, len(q.kept))
	for i := len(q.kept) - 1; i >= 0; i-- {
		out = append(out, q.kept[i])
	}
	return out
}

func (q *jobQueue) work() {
	defer close(q.exited)
	for {
		q.mu.Lock()
		for len(q.waiting) == 0 && !q.closed {
			q.mu.Unlock()
			select {
			case <-q.wake:
			case <-q.ctx.Done():
			}
			q.mu.Lock()
		}
		if q.closed {
			q.mu.Unlock()
			return
		}
		n := q.batchLen()
		group := append([]*job(nil), q.waiting[:n]...)
		q.waiting = q.waiting[n:]
		q.length(len(q.waiting))
		q.mu.Unlock()
		if group[0].one != nil {
			q.runBatch(group)
		} else {
			q.runJob(group[0])
		}
	}
}

// batchLen returns how many of the waiting jobs, from the head, run next
// together: the head alone, or the single-document ingests at the head,
// up to q.group jobs and maxGroupBytes (the head always), stopping before
// a second job for a source already taken. q.mu is held.
func (q *jobQueue) batchLen() int {
	head := q.waiting[0].one
	if head == nil {
		return 1
	}
	seen := map[string]bool{head.source: true}
	n, size := 1, head.size
	for ; n < len(q.waiting) && n < q.group; n++ {
		o := q.waiting[n].one
		if o == nil || seen[o.source] || size+o.size > maxGroupBytes {
			break
		}
		seen[o.source] = true
		size += o.size
	}
	return n
}

// start marks j running.
func (j *job) start(now time.Time) {
	j.mu.Lock()
	j.pub.State, j.pub.Started = JobRunning, &now
	j.mu.Unlock()
}

// outcome is the state a job that returned err ends in, and the error it
// shows.
func (q *jobQueue) outcome(err error) (string, error) {
	switch {
	case err != nil && q.ctx.Err() != nil:
		// Canceled by the shutdown, whatever the error says: a DuckDB
		// query interrupted by the cancellation answers its own error
		// ("INTERRUPT Error"), not context.Canceled.
		return JobCanceled, errors.New("canceled: the server shut down while it ran; nothing of it was kept")
	case err != nil:
		return JobFailed, err
	}
	return JobSucceeded, nil
}

func (q *jobQueue) runJob(j *job) {
	j.start(time.Now().UTC())
	res, err := j.run(q.ctx, j)
	state, err := q.outcome(err)
	q.end(j, state, res, err)
}

// runBatch runs single-document ingests as one batch: each job's checks,
// then one IngestBatch of the documents that passed them, then each job's
// result from its document's outcome. A job whose checks fail ends alone.
// An error of the batch before anything was stored (a model error, a
// storage error) may come from one job's document: the jobs then run
// again one by one (each its checks again), so each ends as it would have
// alone; an error after the commit (index.Committed) ends every job of
// the batch, as it would have ended each.
func (q *jobQueue) runBatch(group []*job) {
	now := time.Now().UTC()
	for _, j := range group {
		j.start(now)
	}
	var ins []index.Input
	var in []*job
	for _, j := range group {
		input, err := j.one.check(q.ctx)
		if err != nil {
			state, err := q.outcome(err)
			q.end(j, state, nil, err)
			continue
		}
		ins = append(ins, input)
		in = append(in, j)
	}
	if len(in) == 0 {
		return
	}
	res, errs, err := q.ingest(q.ctx, ins)
	q.batched(len(ins))
	if err != nil && len(in) > 1 && !index.Committed(err) && q.ctx.Err() == nil {
		// Nothing of the batch was stored, and the error may be one
		// document's (a model that fails on it, a derivation error):
		// each job runs alone, as it would have in a batch of its own,
		// so that no caller's job fails for another's document.
		for _, j := range in {
			q.runBatch([]*job{j})
		}
		return
	}
	for i, j := range in {
		var r index.Result
		var docErr error
		if err == nil {
			r, docErr = res[i], errs[i]
		}
		out, jerr := j.one.finish(q.ctx, j, r, docErr, err)
		state, jerr := q.outcome(jerr)
		q.end(j, state, out, jerr)
	}
}

// end finishes j.
func (q *jobQueue) end(j *job, state string, res *JobResult, err error) {
	now := time.Now().UTC()
	j.mu.Lock()
	j.pub.State, j.pub.Finished = state, &now
	if err != nil {
		j.pub.Error = err.Error()
	} else {
		j.pub.Result = res
	}
	j.mu.Unlock()
	close(j.done)
	q.finish(j.pub.Kind, state)
}

// close refuses new jobs, cancels the waiting ones and the running one,
// and returns once the running one has returned.
func (q *jobQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		<-q.exited
		return
	}
	q.closed = true
	waiting := q.waiting
	q.waiting = nil
	q.length(0)
	q.mu.Unlock()
	for _, j := range waiting {
		q.end(j, JobCanceled, nil, errors.New("canceled: the server shut down before it ran"))
	}
	q.cancel()
	<-q.exited
}
