package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escurel/escurel/internal/s3test"
)

// startReplica runs escurel serve --replica-of in-process on 127.0.0.1
// with args added and returns its address.
func startReplica(t *testing.T, rdir string, args ...string) string {
	t.Helper()
	addr, _ := startReplicaLog(t, rdir, args...)
	return addr
}

// lockedBuffer is a bytes.Buffer safe for a server's goroutines and a
// test's reads together.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startReplicaLog is startReplica that also returns the server's log.
func startReplicaLog(t *testing.T, rdir string, args ...string) (string, *lockedBuffer) {
	t.Helper()
	stderr := &lockedBuffer{}
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: stderr, Getenv: func(string) string { return "" }}
	addr := make(chan string, 1)
	c := &ServeCommand{m: m, g: globals{indexDir: rdir}, listening: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case a := <-addr:
		return a, stderr
	case err := <-done:
		done <- nil // for the cleanup: it has stopped
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	return "", nil
}

// TestReplicaLogRedactsURL: serve --replica-of logs the URL it follows
// without its secrets (here a password in the endpoint).
func TestReplicaLogRedactsURL(t *testing.T) {
	srv := s3test.Start(t)
	to := srv.Bucket(t, "published", "team/")
	to = strings.Replace(to, "endpoint=http%3A%2F%2F", "endpoint=http%3A%2F%2Fops%3Ahunter2-secret%40", 1)
	if !strings.Contains(to, "hunter2-secret") {
		t.Fatalf("no password in %s", to)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "soup.md"), []byte("# Soup\n\nLentil soup for everyone.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "publish", "--to", to); code != 0 {
		t.Fatalf("publish: %d %s%s", code, out, errOut)
	}
	_, log := startReplicaLog(t, filepath.Join(t.TempDir(), "replica"), "--replica-of", to, "--poll", "50ms")
	time.Sleep(200 * time.Millisecond) // a few polls
	if l := log.String(); !strings.Contains(l, "msg=replica") || strings.Contains(l, "hunter2-secret") {
		t.Fatalf("the replica's log shows the URL's password, or no replica line:\n%s", l)
	}
}

// escurel publish, then escurel serve --replica-of on another directory:
// status (forwarded to the replica) and /metrics say what it serves and
// how old it is, writes are refused, and a new publish reaches it.
func TestPublishAndReplicaCLI(t *testing.T) {
	srv := s3test.Start(t)
	to := srv.Bucket(t, "published", "team/")
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "soup.md"), []byte("# Soup\n\nLentil soup for everyone.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	out, errOut, code := run(t, nil, "--index", idx, "publish", "--to", to, "--json")
	if code != 0 {
		t.Fatalf("publish: %d %s%s", code, out, errOut)
	}
	var p1 struct {
		Digest     string `json:"digest"`
		Generation string `json:"generation"`
		Seq        int64  `json:"seq"`
	}
	if err := json.Unmarshal([]byte(out), &p1); err != nil || p1.Seq != 1 {
		t.Fatalf("publish --json: %s (%v)", out, err)
	}
	out, _, _ = run(t, nil, "--index", idx, "verify", "--json")
	if !strings.Contains(out, `"digest":"`+p1.Digest+`"`) {
		t.Fatalf("published digest %s is not verify's: %s", p1.Digest, out)
	}
	if out, _, code := run(t, nil, "--index", idx, "publish", "--to", to); code != 0 || !strings.HasPrefix(out, "unchanged: ") {
		t.Fatalf("republish: %d %s", code, out)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "serve", "--replica-of", to, "--allow-write"); code != 2 || !strings.Contains(errOut, "read-only") {
		t.Fatalf("serve --replica-of --allow-write: %d %s", code, errOut)
	}

	tokens := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(tokens, []byte(`[{"token":"ops-token-0123456789abcdef","name":"ops","clearance":"restricted"}]`), 0o600)
	rdir := filepath.Join(t.TempDir(), "replica")
	addr := startReplica(t, rdir, "--replica-of", to, "--poll", "50ms", "--tokens", tokens)

	out, errOut, code = run(t, nil, "--index", rdir, "status")
	if code != 0 || !strings.Contains(out, "replica of") || !strings.Contains(out, p1.Digest) || !strings.Contains(out, p1.Generation) {
		t.Fatalf("status of the replica: %d %s%s", code, out, errOut)
	}
	if out, _, code := run(t, nil, "--index", rdir, "search", "lentil"); code != 0 || !strings.Contains(out, "soup.md") {
		t.Fatalf("search of the replica: %d %s", code, out)
	}
	os.WriteFile(filepath.Join(src, "bread.md"), []byte("# Bread\n\nSourdough bread with rye.\n"), 0o644)
	if _, errOut, code := run(t, nil, "--index", rdir, "ingest", filepath.Join(src, "bread.md")); code == 0 || !strings.Contains(errOut, "read replica") {
		t.Fatalf("ingest into the replica: %d %s", code, errOut)
	}

	// The writer changes and publishes; the replica follows.
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	out, errOut, code = run(t, nil, "--index", idx, "publish", "--to", to)
	if code != 0 || !strings.Contains(out, "as publish 2") {
		t.Fatalf("publish: %d %s%s", code, out, errOut)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, _ := run(t, nil, "--index", rdir, "search", "sourdough")
		if strings.Contains(out, "bread.md") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not serve publish 2: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _, _ = run(t, nil, "--index", rdir, "status", "--json")
	var st struct {
		Replica *struct {
			Seq        int64   `json:"seq"`
			Digest     string  `json:"digest"`
			AgeSeconds float64 `json:"age_seconds"`
		} `json:"replica"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Replica == nil || st.Replica.Seq != 2 || st.Replica.Digest == p1.Digest || st.Replica.AgeSeconds < 0 {
		t.Fatalf("status --json of the replica: %s (%v)", out, err)
	}

	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer ops-token-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`escurel_replica_info{digest="` + st.Replica.Digest + `"`, "escurel_replica_age_seconds ", "escurel_replica_publish_seq 2", "escurel_replica_check_failing 0"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// TestForwardedPublishReadsPublishTo: escurel publish forwarded to a
// running server takes its URL from the client's ESCUREL_PUBLISH_TO.
func TestForwardedPublishReadsPublishTo(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "soup.md"), []byte("# Soup\n\nLentil soup for everyone.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	startServe(t, idx)
	to := "file://" + t.TempDir()
	out, errOut, code := run(t, map[string]string{"ESCUREL_PUBLISH_TO": to}, "--index", idx, "publish")
	if code != 0 || !strings.Contains(out, "as publish 1") {
		t.Fatalf("forwarded publish with ESCUREL_PUBLISH_TO: %d %s%s", code, out, errOut)
	}
}

// TestReplicaCheckDigestFlag: serve --replica-of computes the digest of the
// downloaded rows only with --check-digest (the publisher's build being
// this one), and --check-digest alone is a usage error.
func TestReplicaCheckDigestFlag(t *testing.T) {
	to := "file://" + t.TempDir()
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "soup.md"), []byte("# Soup\n\nLentil soup for everyone.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "--index", idx, "publish", "--to", to); code != 0 || !strings.Contains(out, "; full-text image ") {
		t.Fatalf("publish: %d %s%s (want the image's size said)", code, out, errOut)
	}
	for _, check := range []bool{false, true} {
		args := []string{"--replica-of", to}
		if check {
			args = append(args, "--check-digest")
		}
		_, log := startReplicaLog(t, filepath.Join(t.TempDir(), "replica"), args...)
		if want := fmt.Sprintf("digest_computed=%v", check); !strings.Contains(log.String(), want) {
			t.Fatalf("serve %v: no %s in the log:\n%s", args, want, log.String())
		}
	}
	if _, errOut, code := run(t, nil, "--index", idx, "serve", "--check-digest"); code != 2 || !strings.Contains(errOut, "--check-digest needs --replica-of") {
		t.Fatalf("serve --check-digest: %d %s", code, errOut)
	}
	if _, errOut, code := run(t, nil, "--index", idx, "serve", "--poll", "2s"); code != 2 || !strings.Contains(errOut, "--poll needs --replica-of") {
		t.Fatalf("serve --poll: %d %s", code, errOut)
	}
}
