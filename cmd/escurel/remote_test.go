package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/internal/layout"
)

// startServe runs escurel serve on idx in this process until the test
// ends; it returns the server's address.
func startServe(t *testing.T, idx string) string {
	t.Helper()
	var stderr bytes.Buffer
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	addr := make(chan string, 1)
	c := &ServeCommand{m: m, g: globals{indexDir: idx}, listening: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, []string{"--listen", "127.0.0.1:0"}) }()
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
		if _, ok, _ := layout.Server(idx); ok {
			t.Error("SERVER left behind by a server that stopped cleanly")
		}
	})
	select {
	case a := <-addr:
		return a
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	return ""
}

// While escurel serve holds the index, every command that names it runs
// in the server and prints exactly what it prints in direct mode; writes
// go through too, and nothing meets the lock.
func TestCLIThroughServer(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "soup.md"), []byte("# Soup\n\nLentil soup for everyone.\n\n## Spices\n\nCumin and lentils.\n"), 0o644)
	os.WriteFile(filepath.Join(src, "memo.md"), []byte("---\nsensitivity: restricted\n---\n# Memo\n\nLentil zqsecret plans.\n"), 0o644)
	if out, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %d %s%s", code, out, errOut)
	}
	out, _, _ := run(t, nil, "--index", idx, "search", "--json", "cumin")
	var found struct {
		Hits []struct {
			BlockID string `json:"block_id"`
		}
	}
	if err := json.Unmarshal([]byte(out), &found); err != nil || len(found.Hits) == 0 {
		t.Fatalf("search --json: %v %s", err, out)
	}
	block := found.Hits[0].BlockID
	reads := [][]string{
		{"search", "lentil"},
		{"search", "--json", "--explain", "--mode", "hybrid", "lentil"},
		{"search", "--clearance", "restricted", "zqsecret"},
		{"status"},
		{"status", "--json", "--clearance", "restricted"},
		{"expand", block},
		{"expand", "--json", "-n", "1", block},
		{"documents"},
		{"documents", "--json", "--clearance", "restricted"},
		{"verify"},
		{"search", "-k", "0", "lentil"}, // a usage error, as in direct mode
		{"expand", "0123456789abcdef"},  // no such block
		{"expand", "1"},                 // not a block id
	}
	type result struct {
		out, errOut string
		code        int
	}
	direct := map[int]result{}
	for i, args := range reads {
		out, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...)
		direct[i] = result{out, errOut, code}
	}
	startServe(t, idx)
	if _, ok, _ := layout.Server(idx); !ok {
		t.Fatal("no SERVER record while serving")
	}
	for i, args := range reads {
		out, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...)
		if got, want := (result{out, errOut, code}), direct[i]; got != want {
			t.Errorf("%v through the server:\n%+v\nwant, as in direct mode:\n%+v", args, got, want)
		}
	}

	// Writes: an ingest with a relative path (the client's working
	// directory, not the server's), a delete, a rebuild and a re-embed.
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(src); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "tea.md"), []byte("# Tea\n\nLentil tea, zqtea.\n"), 0o644)
	for _, args := range [][]string{
		{"ingest", "tea.md"},
		{"search", "zqtea"},
		{"delete", "soup.md"},
		{"sync", "--dry-run", "."},
		{"rebuild"},
		{"reembed", "--embedder", "hash/128"},
		{"status"},
		{"rollback"},
	} {
		out, errOut, code := run(t, nil, append([]string{"--index", idx}, args...)...)
		if code != 0 || strings.Contains(errOut, "in use") {
			t.Fatalf("%v through the server: exit %d\n%s%s", args, code, out, errOut)
		}
		switch args[0] {
		case "ingest":
			if !strings.Contains(out, "1 added") {
				t.Errorf("ingest tea.md: %s", out)
			}
		case "search":
			if !strings.Contains(out, filepath.Join(src, "tea.md")) {
				t.Errorf("search after ingest through the server: %s", out)
			}
		case "delete":
			if !strings.Contains(out, "deleted 1 document") {
				t.Errorf("delete soup.md (relative): %s", out)
			}
		case "rollback":
			if !strings.HasPrefix(out, "live generation gen-") {
				t.Errorf("rollback through the server: %s", out)
			}
		case "status":
			if !strings.Contains(out, "hash/128") || !strings.Contains(out, "2 (0 failed)") {
				t.Errorf("status after reembed: %s", out)
			}
		}
	}
	// What the server cannot take is refused clearly, not half done.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--embedder", "hash/64", "search", "lentil"}, "--embedder: escurel serve holds"},
	} {
		_, errOut, code := run(t, nil, append([]string{"--index", idx}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want an error naming %q", c.args, code, errOut, c.want)
		}
	}
}

// The server runs only the commands it should, on its own index, however
// the command line reaches it.
func TestServerRefusesForeignCommands(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a.md"), []byte("# A\n\nLentil.\n"), 0o644)
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	startServe(t, idx)
	other := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--beir", src}, "eval does not run through escurel serve"},
		{[]string{"serve"}, "serve does not run through escurel serve"},
		{[]string{"--index", other, "search", "lentil"}, "this escurel serve holds " + idx + ", not " + other},
	} {
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		done, err := m.forward(context.Background(), idx, c.args)
		code := exitCode(&errb, err)
		if !done || code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v forwarded: done %v, exit %d, %q; want a refusal naming %q", c.args, done, code, errb.String(), c.want)
		}
	}
}

// A server record whose process no longer holds the lock is never
// trusted, even when something answers at its address now (a port taken
// by another server): the command runs directly, or meets the lock of
// whoever holds it.
func TestCLIStaleServerRecordPortReused(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a.md"), []byte("# A\n\nLentil.\n"), 0o644)
	for _, idx := range []string{a, b} {
		if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
			t.Fatalf("ingest: %s", errOut)
		}
	}
	addr := startServe(t, b) // b's server, at the port a's dead server had
	rec := `{"url":"http://` + addr + `","pid":999999999,"dir":"` + a + `","token":"stale-token"}`
	os.WriteFile(filepath.Join(a, layout.ServerName), []byte(rec), 0o600)
	out, errOut, code := run(t, nil, "--index", a, "search", "lentil")
	if code != 0 || !strings.Contains(out, "a.md") {
		t.Fatalf("search a with a stale SERVER naming b's port: exit %d %s%s", code, out, errOut)
	}
	if _, ok, _ := layout.Server(a); ok {
		t.Error("the stale SERVER of a survived")
	}
}

// A server record left by a server that died (no one answers there)
// does not stand in the way: the command runs directly, and the lock,
// free, clears the record.
func TestCLIStaleServerRecord(t *testing.T) {
	idx := filepath.Join(t.TempDir(), "idx")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a.md"), []byte("# A\n\nLentil.\n"), 0o644)
	if _, errOut, code := run(t, nil, "--index", idx, "ingest", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	// Port 1 on loopback: nothing listens.
	os.WriteFile(filepath.Join(idx, layout.ServerName), []byte(`{"url":"http://127.0.0.1:1","pid":1,"dir":"`+idx+`","token":"x"}`), 0o600)
	out, errOut, code := run(t, nil, "--index", idx, "search", "lentil")
	if code != 0 || !strings.Contains(out, "a.md") {
		t.Fatalf("search with a stale SERVER: exit %d %s%s", code, out, errOut)
	}
	if _, ok, _ := layout.Server(idx); ok {
		t.Error("the stale SERVER survived a command that took the lock")
	}
}
