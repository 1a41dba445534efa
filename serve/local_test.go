package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/escurel/escurel/serve"
)

const localToken = "local-token-0123456789abcdef"

// The local command path runs a forwarded command only for the local
// token, streams its output as frames and ends with its exit status; no
// /v1 token opens it, however high its clearance.
func TestLocalCommand(t *testing.T) {
	var got atomic.Value
	f := newFixture(t, serve.Options{LocalToken: localToken, LocalCommand: func(ctx context.Context, req *serve.CommandRequest, stdout, stderr io.Writer) int {
		got.Store(req)
		fmt.Fprintln(stdout, "line one")
		fmt.Fprintln(stderr, "a warning")
		fmt.Fprintln(stdout, "line two")
		return 3
	}})
	for _, token := range []string{"", adminToken, "wrong-0123456789abcdef"} {
		code, body := f.do(t, "POST", serve.LocalCommandPath, token, serve.CommandRequest{Args: []string{"status"}})
		if code != http.StatusUnauthorized || !strings.Contains(string(body), "local token") {
			t.Errorf("token %q: %d %s, want 401", token, code, body)
		}
	}
	if got.Load() != nil {
		t.Fatal("the command ran for a caller without the local token")
	}
	code, body := f.do(t, "POST", serve.LocalCommandPath, localToken, serve.CommandRequest{Args: []string{"status"}, Dir: "/x", Env: map[string]string{"ESCUREL_EMBEDDER": "hash/64"}})
	if code != http.StatusOK {
		t.Fatalf("local token: %d %s", code, body)
	}
	var out, errOut strings.Builder
	exit := -1
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var fr serve.CommandFrame
		if err := json.Unmarshal(sc.Bytes(), &fr); err != nil {
			t.Fatalf("frame %q: %v", sc.Text(), err)
		}
		switch {
		case fr.Exit != nil:
			exit = *fr.Exit
		case fr.Stream == "stderr":
			errOut.WriteString(fr.Data)
		default:
			out.WriteString(fr.Data)
		}
	}
	if out.String() != "line one\nline two\n" || errOut.String() != "a warning\n" || exit != 3 {
		t.Errorf("stdout %q, stderr %q, exit %d", out.String(), errOut.String(), exit)
	}
	if req := got.Load().(*serve.CommandRequest); req.Dir != "/x" || req.Env["ESCUREL_EMBEDDER"] != "hash/64" {
		t.Errorf("request as the command saw it: %+v", req)
	}
	// A server without LocalCommand takes no forwarded command.
	g := newFixture(t, serve.Options{})
	if code, _ := g.do(t, "POST", serve.LocalCommandPath, localToken, serve.CommandRequest{Args: []string{"status"}}); code != http.StatusNotFound {
		t.Errorf("no LocalCommand: %d, want 404", code)
	}
}

// Forwarded writes are write jobs: one at a time, listed by GET /v1/jobs
// for restricted callers only, and a server that shuts down cancels the
// one running and refuses the next.
func TestRunWrite(t *testing.T) {
	f := newFixture(t, serve.Options{LocalToken: localToken, LocalCommand: func(context.Context, *serve.CommandRequest, io.Writer, io.Writer) int { return 0 }})
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f.srv.RunWrite(context.Background(), serve.JobIngest, func(context.Context) error {
				n := running.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
				running.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d forwarded writes ran at once, want 1", most.Load())
	}
	want := errors.New("the write failed")
	if err := f.srv.RunWrite(context.Background(), serve.JobCompact, func(context.Context) error { return want }); err != want {
		t.Errorf("RunWrite returned %v, want fn's error", err)
	}
	var list struct{ Jobs []serve.Job }
	f.get(t, "GET", "/v1/jobs", adminToken, nil, &list)
	if len(list.Jobs) != 5 || list.Jobs[0].Kind != serve.JobCompact || list.Jobs[0].State != serve.JobFailed || list.Jobs[0].Caller != "local" {
		t.Errorf("jobs for a restricted caller: %+v", list.Jobs)
	}
	code, body := f.do(t, "GET", "/v1/jobs", internalToken, nil)
	if code == http.StatusOK && strings.Contains(string(body), `"local"`) {
		t.Errorf("an internal caller sees the forwarded jobs: %s", body)
	}

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.srv.RunWrite(context.Background(), serve.JobRebuild, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-started
	f.srv.Close()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("running write after Close: %v, want canceled", err)
	}
	if err := f.srv.RunWrite(context.Background(), serve.JobIngest, func(context.Context) error { return nil }); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("write after Close: %v, want a refusal", err)
	}
}
