package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escurel/escurel/internal/layout"
)

// TestSoakServer is issue 13's soak: a real escurel serve (the binary)
// owns an index while a CLI ingest of 2,000 files and then a CLI reembed
// go through it, and 8 HTTP and 4 MCP clients, all public, search
// throughout. Every search is answered (0 errors), no command meets the
// lock, and no answer holds a word of the restricted documents. Its name
// keeps it out of the race pass (RACE_TESTS): the server under test is a
// child process, which -race would not instrument.
func TestSoakServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the escurel binary and ingests 2,000 files")
	}
	bin := filepath.Join(t.TempDir(), "escurel")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/escurel").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	seed, src := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(seed, "seed.md"), []byte("# Seed\n\nLentil soup to start with.\n"), 0o644)
	for i := 0; i < 2000; i++ {
		text := fmt.Sprintf("# Note %d\n\nLentil note %d about soup, bread and zqword%d.\n", i, i, i%50)
		if i%10 == 0 { // 200 restricted documents
			text = fmt.Sprintf("---\nsensitivity: restricted\n---\n# Secret %d\n\nLentil zqsecret plan %d about soup.\n", i, i)
		}
		os.WriteFile(filepath.Join(src, fmt.Sprintf("n%04d.md", i)), []byte(text), 0o644)
	}
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--index", idx}, args...)...)
		cmd.Env = append(os.Environ(), "ESCUREL_CACHE_DIR=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("ingest", seed); err != nil {
		t.Fatalf("ingest seed: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	server := exec.Command(bin, "--index", idx, "serve", "--listen", "127.0.0.1:0")
	server.Env = append(os.Environ(), "ESCUREL_CACHE_DIR=off")
	var serverLog bytes.Buffer
	server.Stderr = &serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	serverDone := make(chan error, 1)
	go func() { serverDone <- server.Wait() }()
	defer func() {
		server.Process.Signal(os.Interrupt)
		select {
		case <-serverDone:
		case <-time.After(30 * time.Second):
			server.Process.Kill()
		}
	}()
	var url string
	for deadline := time.Now().Add(time.Minute); url == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if data, ok, _ := layout.Server(idx); ok {
			var rec struct{ URL string }
			json.Unmarshal(data, &rec)
			url = rec.URL
		}
	}
	if url == "" {
		t.Fatalf("the server wrote no SERVER record:\n%s", serverLog.String())
	}

	queries := []string{"lentil soup", "zqsecret plan", "bread zqword7", "note about soup", "secret"}
	var searches, failures, leaks atomic.Int64
	var firstFailure atomic.Value
	fail := func(err error) {
		failures.Add(1)
		firstFailure.CompareAndSwap(nil, err.Error())
	}
	check := func(body []byte) {
		if bytes.Contains(body, []byte("zqsecret")) || bytes.Contains(body, []byte("Secret ")) {
			leaks.Add(1)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body, _ := json.Marshal(map[string]any{"query": queries[i%len(queries)], "k": 20})
				resp, err := http.Post(url+"/v1/search", "application/json", bytes.NewReader(body))
				if err != nil {
					fail(err)
					continue
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				searches.Add(1)
				if resp.StatusCode != http.StatusOK {
					fail(fmt.Errorf("HTTP %d: %s", resp.StatusCode, data))
				}
				check(data)
			}
		}()
	}
	for c := 0; c < 4; c++ {
		client := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "0"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatalf("MCP connect: %v", err)
		}
		defer cs.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"query": queries[i%len(queries)], "k": 20}})
				searches.Add(1)
				if err != nil {
					fail(err)
					continue
				}
				data, _ := json.Marshal(res)
				if res.IsError {
					fail(fmt.Errorf("MCP search: %s", data))
				}
				check(data)
			}
		}()
	}

	for _, args := range [][]string{{"ingest", src}, {"reembed", "--embedder", "hash/256"}} {
		before := searches.Load()
		out, err := cli(args...)
		if err != nil || strings.Contains(out, "in use") {
			t.Errorf("escurel %s while serving: %v\n%s", args[0], err, out)
		}
		t.Logf("escurel %s: %d searches answered meanwhile; %s", args[0], searches.Load()-before, strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]))
		if searches.Load() == before {
			t.Errorf("no search was answered during %s", args[0])
		}
	}
	close(stop)
	wg.Wait()
	if out, err := cli("status"); err != nil || !strings.Contains(out, "2001 (0 failed)") || !strings.Contains(out, "hash/256") {
		t.Errorf("status after the soak: %v\n%s", err, out)
	}
	t.Logf("%d searches, %d failed, %d leaks", searches.Load(), failures.Load(), leaks.Load())
	if n := failures.Load(); n > 0 {
		t.Errorf("%d searches failed; first: %v", n, firstFailure.Load())
	}
	if n := leaks.Load(); n > 0 {
		t.Errorf("%d public answers held restricted text", n)
	}
}
