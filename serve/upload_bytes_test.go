package serve_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/serve"
)

// An ingest job queued behind a running write keeps the bytes its request
// uploaded: the HTTP layer reads a request body into a buffer it reuses
// for the next request once the handler returns (huma's pool), so a job
// that kept that slice stored whatever a later request wrote into it,
// under its own source and sensitivity: another caller's document, even
// a restricted one, could be served at a lower clearance.
func TestQueuedIngestKeepsItsBytes(t *testing.T) {
	ctx := context.Background()
	ms := modelserver.Start(t)
	ms.Set(func(s *modelserver.Server) { s.Dim = 32 })
	h := startHeld(t, t.TempDir(), ms, serve.Options{AllowWrite: true})
	f := h.fixture()
	held, release := f.holdQueue(t, ms)
	const n = 20
	data := map[string][]byte{}
	var jobs []serve.Job
	for i := range n {
		src := fmt.Sprintf("/doc%02d.md", i)
		data[src] = []byte(fmt.Sprintf("# Document %d\n\nthe words of document number %d, and only of it\n", i, i))
		jobs = append(jobs, f.queue(t, src, data[src]))
	}
	close(release)
	f.finished(t, adminToken, held.ID)
	for _, j := range jobs {
		if j = f.finished(t, adminToken, j.ID); j.State != serve.JobSucceeded {
			t.Fatalf("job %s: %+v", j.ID, j)
		}
	}
	for src, want := range data {
		rec, err := h.ix.Blobs().GetRecord(ctx, blobstore.DocID(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if rec.BlobID != blobstore.BlobID(want) {
			got, _ := h.ix.Blobs().Get(ctx, rec.BlobID)
			t.Errorf("%s stored %q, want the bytes its request uploaded, %q", src, got, want)
		}
	}
}
