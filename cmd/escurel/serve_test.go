package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// escurel serve answers over HTTP with the tokens file's clearances, and
// on cancellation (SIGINT, SIGTERM) drains, closes the index and releases
// its lock.
func TestServeCommand(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "public.md"), []byte("# Soup\n\nLentil soup for everyone.\n"), 0o644)
	os.WriteFile(filepath.Join(src, "secret.md"), []byte("---\nsensitivity: restricted\n---\n# Memo\n\nLentil zqsecret plans.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(tokens, []byte(`[{"token": "legal-0123456789abcdef", "name": "legal", "clearance": "restricted"}]`), 0o600)

	var stderr bytes.Buffer
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	addr := make(chan string, 1)
	c := &ServeCommand{m: m, g: globals{indexDir: idx}, listening: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, []string{"--listen", "127.0.0.1:0", "--tokens", tokens}) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	search := func(token string) int {
		req, _ := http.NewRequest("POST", base+"/v1/search", strings.NewReader(`{"query": "lentil", "mode": "bm25"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Hits []json.RawMessage }
		json.NewDecoder(resp.Body).Decode(&out)
		return len(out.Hits)
	}
	if n := search(""); n != 1 {
		t.Errorf("public caller: %d hits, want 1", n)
	}
	if n := search("legal-0123456789abcdef"); n != 2 {
		t.Errorf("restricted caller: %d hits, want 2", n)
	}
	// While it serves, commands go through it (remote_test.go has more).
	if out, errOut, code := run(t, nil, "--index", idx, "status"); code != 0 || !strings.Contains(out, "documents") {
		t.Errorf("status while serving: exit %d %s%s", code, out, errOut)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	if out, errOut, code := run(t, nil, "--index", idx, "status"); code != 0 {
		t.Errorf("status after serve: exit %d %s%s", code, out, errOut)
	}
	if log := stderr.String(); !strings.Contains(log, "caller=legal") || !strings.Contains(log, "msg=stopped") {
		t.Errorf("log:\n%s", log)
	}
}

func TestServeUsage(t *testing.T) {
	idx := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(tokens, []byte(`[{"token": "short", "name": "x"}]`), 0o600)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--clearance", "restricted"}, 2, "--clearance applies to --stdio only"},
		{[]string{"serve", "--stdio", "--clearance", "secret"}, 2, "--clearance"},
		{[]string{"serve", "--stdio", "--tokens", tokens}, 2, "--tokens applies to HTTP"},
		{[]string{"serve", "--request-timeout", "0s"}, 2, "--request-timeout"},
		{[]string{"serve", "--stdio", "--stdio-write"}, 2, "--stdio-write needs --stdio and --allow-write"},
		{[]string{"serve", "--allow-paths", "/tmp"}, 2, "--allow-paths needs --allow-write"},
		{[]string{"serve", "--allow-write", "--max-upload", "0"}, 2, "--max-upload"},
		{[]string{"serve", "extra"}, 2, "unexpected argument"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--tokens", tokens}, 1, "shorter than 16"},
		{[]string{"serve", "--listen", "127.0.0.1:0"}, 1, "no index"},
	} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want %d naming %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// A tokens file others can read is served, with a warning naming the fix.
func TestServeWarnsOfReadableTokens(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a.md"), []byte("# A\n\ntext\n"), 0o644)
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	os.WriteFile(tokens, []byte(`[{"token": "legal-0123456789abcdef", "name": "legal"}]`), 0o644)
	os.Chmod(tokens, 0o644) // whatever the umask
	var stderr bytes.Buffer
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	addr := make(chan string, 1)
	c := &ServeCommand{m: m, g: globals{indexDir: idx}, listening: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, []string{"--listen", "127.0.0.1:0", "--tokens", tokens}) }()
	select {
	case <-addr:
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	cancel()
	<-done
	if !strings.Contains(stderr.String(), "readable by others (mode 0644): chmod 600") {
		t.Errorf("no warning:\n%s", stderr.String())
	}
}
