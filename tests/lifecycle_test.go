package tests

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/rebuild"
)

// A live rebuild whose context is cancelled the moment CURRENT moves must
// not delete the generation CURRENT names: the process switches to it (a
// publish is not undone), and the next Open finds it. It used to return
// "context canceled", remove gen-000002 and leave CURRENT naming nothing.
func TestLiveRebuildCancelledAfterPublish(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layout.AfterPublish = func(dir, gen string) {
		if dir == e.dir {
			cancel()
		}
	}
	defer func() { layout.AfterPublish = nil }()
	sum, err := rebuild.Run(ctx, rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix})
	layout.AfterPublish = nil
	if ctx.Err() == nil {
		t.Fatal("the hook did not run: no publish happened")
	}
	cur, ok, cerr := layout.Current(e.dir)
	if cerr != nil || !ok {
		t.Fatalf("after the cancelled rebuild (err %v), CURRENT is broken: %v", err, cerr)
	}
	if err != nil || cur != sum.Generation {
		t.Fatalf("rebuild: %v; CURRENT %s, made %s: a publish must stand", err, cur, sum.Generation)
	}
	if g := e.ix.Generation(); g != cur {
		t.Errorf("the process serves %s, CURRENT names %s", g, cur)
	}
	if hits := e.search("connection timeout", 5); len(hits) == 0 {
		t.Error("no hits after the switch")
	}
	e.reopen()
	if g := e.ix.Generation(); g != cur {
		t.Errorf("reopened on %s, want %s", g, cur)
	}
	e.digest()
}

// A BM25 search never waits for another caller's model call, and a
// generation switch never waits for a running search: with a hybrid search
// held inside its query embedding, a whole live rebuild (switch included)
// and a BM25 search complete; the held search then finishes on the
// generation it started on, which stays open until it leaves. It used to
// hold the generation lock across the model call, so the switch waited for
// it and every search after the switch waited for the switch.
func TestSearchesNeverWaitForOthersModelCalls(t *testing.T) {
	e, srv, release := heldModelEnv(t)
	old := e.ix.Generation()
	type outcome struct {
		hits []index.Hit
		err  error
	}
	held := make(chan outcome, 1)
	go func() {
		hits, err := e.ix.Search(context.Background(), "HOLDME connection timeout", &index.SearchOptions{K: 3, Mode: index.ModeHybrid})
		held <- outcome{hits, err}
	}()
	waitFor(t, "the held query to reach the model server", func() bool { return holding(srv) })
	done := make(chan error, 1)
	go func() {
		_, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix})
		if err == nil {
			_, err = e.ix.Search(context.Background(), "connection timeout", &index.SearchOptions{K: 3, Mode: index.ModeBM25})
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		close(release)
		t.Fatal("the rebuild's switch or a BM25 search waited for another search's model call")
	}
	if e.ix.Generation() == old {
		t.Fatal("the rebuild did not switch the live index")
	}
	select {
	case o := <-held:
		t.Fatalf("the held search returned before its model call was released: %v", o.err)
	default:
	}
	close(release)
	o := <-held
	if o.err != nil || len(o.hits) == 0 {
		t.Fatalf("the held search, on the generation it started on: %d hits, %v", len(o.hits), o.err)
	}
}

// heldModelEnv is a seeded index whose embedder is a model server that
// holds every request with HOLDME in its input until release is closed.
func heldModelEnv(t *testing.T) (e *env, srv *modelserver.Server, release chan struct{}) {
	t.Helper()
	srv = modelserver.Start(t)
	release = make(chan struct{})
	srv.Set(func(s *modelserver.Server) { s.Dim = 32; s.HoldOn = "HOLDME"; s.Release = release })
	spec, err := embed.ParseSpec("openai:m?timeout=60s&url=" + srv.URL + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	e = newEnv(t, index.Options{Embedder: spec})
	seed(e)
	return e, srv, release
}

// holding reports whether the model server holds a request (its input
// contains HOLDME).
func holding(srv *modelserver.Server) bool {
	for _, r := range srv.Requests() {
		for _, in := range r.Input {
			if strings.Contains(in, "HOLDME") {
				return true
			}
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Manifest may be called while an ingest records a new way to reach the
// model (a url given at reopen): under -race this was a data race, the
// ingest assigning the manifest while holding only a read lock.
func TestManifestDuringRecordReach(t *testing.T) {
	srv1, srv2 := modelserver.Start(t), modelserver.Start(t)
	for _, s := range []*modelserver.Server{srv1, srv2} {
		s.Set(func(s *modelserver.Server) { s.Dim = 16 })
	}
	spec := func(srv *modelserver.Server) embed.Spec {
		sp, err := embed.ParseSpec("openai:m?url=" + srv.URL + "/v1")
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	e := newEnv(t, index.Options{Embedder: spec(srv1)})
	e.ingest("/a.md", "# A\n\nalpha\n")
	e.opts = index.Options{Embedder: spec(srv2)}
	e.reopen()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = e.ix.Manifest().EmbedderSpec
			}
		}
	}()
	for i := range 5 {
		e.ingest(fmt.Sprintf("/b%d.md", i), fmt.Sprintf("# B\n\nbeta %d\n", i))
	}
	close(stop)
	wg.Wait()
	if got := e.ix.Manifest().EmbedderSpec; !strings.Contains(got, url.QueryEscape(srv2.URL)) {
		t.Errorf("the manifest records %s, want the url that worked: %s", got, srv2.URL)
	}
}

// Calls on a closed index fail with ErrClosed, never a panic or a
// closed database's error; a second Close is nil.
func TestClosedIndex(t *testing.T) {
	e := newEnv(t, index.Options{})
	seed(e)
	if err := e.ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ix.Search(context.Background(), "x", nil); !errors.Is(err, index.ErrClosed) {
		t.Errorf("search: %v", err)
	}
	if _, err := e.ix.Ingest(context.Background(), index.Input{Source: "/x.md", Data: []byte("x")}); !errors.Is(err, index.ErrClosed) {
		t.Errorf("ingest: %v", err)
	}
	if err := e.ix.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	e.open()
}

// An index built before escurel refused near misses of a sensitivity key
// served such a document as public. Upgrading must not keep the leak: a
// re-ingest of the same file replaces the served version with the failed,
// restricted one, and a rebuild from the old (public) record derives
// restricted rows, which verify accepts (a row may be more restricted than
// its record, never less).
func TestRefusedFrontMatterReplacesServedVersion(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		failed     int
	}{
		{"read now", "---\nSensitivity: restricted\n---\n\n# Plan\n\nthe secret lentil plan\n", 0},
		{"refused", "---\nsensitivity: restricted\n\n# Plan\n\nthe secret lentil plan\n", 1}, // never closed
	} {
		for _, via := range []string{"ingest", "rebuild"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) { refusedFrontMatter(t, via, tc.data, tc.failed) })
		}
	}
}

func refusedFrontMatter(t *testing.T, via, leaky string, wantFailed int) {
	{
		{
			e := newEnv(t, index.Options{})
			// Stand in for the old extractor: the same file, ingested as
			// public with its front matter read as text.
			e.ingest("/plan.md", "# Plan\n\nthe secret lentil plan\n")
			rec := mustRecord(t, e, blobstoreDocID("/plan.md"))
			if rec.Sensitivity != index.Public {
				t.Fatalf("setup: %s", rec.Sensitivity)
			}
			switch via {
			case "ingest":
				_, err := e.ix.Ingest(context.Background(), index.Input{Source: "/plan.md", Data: []byte(leaky)})
				if (err != nil) != (wantFailed > 0) {
					t.Fatalf("re-ingest: %v", err)
				}
			case "rebuild":
				// The old record (public) with the new bytes: what an index
				// built by the old extractor holds.
				blobID, err := e.ix.Blobs().Put(context.Background(), []byte(leaky))
				if err != nil {
					t.Fatal(err)
				}
				old := *rec
				old.BlobID = blobID
				if err := e.ix.Blobs().PutRecord(context.Background(), &old); err != nil {
					t.Fatal(err)
				}
				if _, err := rebuild.Run(context.Background(), rebuild.Options{Dir: e.dir, Blobs: e.ix.Blobs(), Live: e.ix, AllowFailures: true}); err != nil {
					t.Fatalf("rebuild: %v", err)
				}
				v, err := e.ix.Verify(context.Background(), nil)
				if err != nil || !v.OK() {
					t.Fatalf("verify: %+v %v", v, err)
				}
			}
			for _, mode := range []string{index.ModeBM25, index.ModeDense, index.ModeHybrid} {
				hits, err := e.ix.Search(context.Background(), "secret lentil plan", &index.SearchOptions{Mode: mode, Clearance: index.Internal})
				if err != nil || len(hits) != 0 {
					t.Errorf("%s: %d hits below restricted clearance (%v)", mode, len(hits), err)
				}
			}
			failed, err := e.ix.Failed(context.Background(), index.Restricted)
			if err != nil || len(failed) != wantFailed {
				t.Fatalf("failed documents: %+v %v", failed, err)
			}
			if hits, err := e.ix.Search(context.Background(), "secret lentil plan", &index.SearchOptions{Clearance: index.Restricted}); wantFailed == 0 && (err != nil || len(hits) == 0) {
				t.Errorf("at restricted clearance the document read now is not found: %v", err)
			}
		}
	}
}

func blobstoreDocID(source string) string { return blobstore.DocID(source) }

// An ingest holds no lock across its model call: while one ingest waits
// for the embedder, a delete and another ingest (of other documents)
// complete, and a concurrent ingest of the same document is applied in
// order, neither lost.
func TestWritersNeverWaitForAnIngestsModelCall(t *testing.T) {
	e, srv, release := heldModelEnv(t)
	held := make(chan error, 1)
	go func() {
		_, err := e.ix.Ingest(context.Background(), index.Input{Source: "/held.md", Data: []byte("# Held\n\nHOLDME while the model thinks\n")})
		held <- err
	}()
	waitFor(t, "the held ingest to reach the model server", func() bool { return holding(srv) })
	done := make(chan error, 1)
	go func() {
		if _, err := e.ix.Delete(context.Background(), "/docs/notes.txt"); err != nil {
			done <- err
			return
		}
		_, err := e.ix.Ingest(context.Background(), index.Input{Source: "/other.md", Data: []byte("# Other\n\nunrelated words\n")})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		close(release)
		t.Fatal("a delete or another ingest waited for an ingest's model call")
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	bm25 := func(q string) []index.Hit {
		hits, err := e.ix.Search(context.Background(), q, &index.SearchOptions{Mode: index.ModeBM25})
		if err != nil {
			t.Fatal(err)
		}
		return hits
	}
	for q, want := range map[string]string{"HOLDME": "/held.md", "unrelated": "/other.md"} {
		if hits := bm25(q); len(hits) != 1 || hits[0].Source != want {
			t.Errorf("%s: %d hits, want %s alone", q, len(hits), want)
		}
	}
	if hits := bm25("plain notes paragraph"); len(hits) != 0 {
		t.Errorf("the deleted document is back: %s", hits[0].Source)
	}
	e.digest()
}
