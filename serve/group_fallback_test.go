package serve_test

import (
	"fmt"
	"testing"

	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/serve"
)

// A job's outcome does not depend on the jobs queued with it: when a
// batch fails before anything of it is stored (here the embedding model
// times out on one caller's document, which IngestBatch reports for the
// whole batch), each job runs again alone, so the other callers' documents
// are stored and only the failing one's job fails, as one job a batch
// would have it (review 14, which found the batch failing every job).
func TestGroupCommitFailureRunsJobsAlone(t *testing.T) {
	for _, batch := range []int{1, 0} { // 1: each alone (the behaviour before); 0: the default, 64
		t.Run(fmt.Sprintf("IngestBatch=%d", batch), func(t *testing.T) {
			ms := modelserver.Start(t)
			ms.Set(func(s *modelserver.Server) { s.Dim = 32 })
			h := startHeldSpec(t, t.TempDir(), ms, "openai:m?timeout=2s&retries=-1&url="+ms.URL+"/v1",
				serve.Options{AllowWrite: true, IngestBatch: batch})
			f := h.fixture()

			upload := func(source, text string) serve.Job { t.Helper(); return f.queue(t, source, []byte(text)) }
			held, release := f.holdQueue(t, ms)
			// From now on a request with POISON hangs until the client's
			// timeout (2s): a document the model fails on.
			never := make(chan struct{})
			t.Cleanup(func() { close(never) })
			ms.Set(func(s *modelserver.Server) { s.HoldOn = "POISON"; s.Release = never })
			good := upload("/good.md", "# Good\n\nlentil soup with cumin\n")
			poison := upload("/poison.md", "# Poison\n\nPOISON lentil\n")
			close(release)

			if j := f.finished(t, adminToken, held.ID); j.State != serve.JobSucceeded {
				t.Fatalf("held: %+v", j)
			}
			if j := f.finished(t, adminToken, poison.ID); j.State != serve.JobFailed {
				t.Errorf("poison: %+v, want failed", j)
			}
			if j := f.finished(t, adminToken, good.ID); j.State != serve.JobSucceeded {
				t.Errorf("/good.md failed because another caller's document queued with it failed: %s %q", j.State, j.Error)
			}
		})
	}
}
