package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escurel/escurel/index"
)

// escurel serve --stdio, as a desktop agent starts it: the go-sdk client
// runs the real binary as a child process and calls every tool, at the
// clearance the operator gave on the command line.
func TestServeStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the escurel binary")
	}
	bin := filepath.Join(t.TempDir(), "escurel")
	build := exec.Command("go", "build", "-o", bin, "../cmd/escurel")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	ix, err := index.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []index.Input{
		{Source: "/docs/soup.md", Sensitivity: index.Public, Data: []byte("# Lentil soup\n\nLentil soup for everyone.\n")},
		{Source: "/docs/budget.md", Sensitivity: index.Internal, Data: []byte("# Budget\n\nThe lentil budget is internal.\n")},
		{Source: "/docs/zqsecret.md", Sensitivity: index.Restricted, Data: []byte("# Memo zqsecret\n\nLentil zqsecret plans.\n")},
	} {
		if _, err := ix.Ingest(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "--index", dir, "serve", "--stdio", "--clearance", "internal")
	cmd.Env = append(os.Environ(), "ESCUREL_CACHE_DIR=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	call := func(name string, args map[string]any, v any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, _ := json.Marshal(res)
		if res.IsError {
			t.Fatalf("%s: %s", name, data)
		}
		if strings.Contains(string(data), "zqsecret") {
			t.Errorf("%s at internal clearance shows the restricted document: %s", name, data)
		}
		if v != nil {
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, v); err != nil {
				t.Fatal(err)
			}
		}
		return string(data)
	}
	var found struct {
		Hits []index.Hit `json:"hits"`
	}
	call("search", map[string]any{"query": "lentil zqsecret", "k": 10}, &found)
	if len(found.Hits) != 2 {
		t.Fatalf("%d hits at internal clearance, want 2 (public and internal): %+v", len(found.Hits), found.Hits)
	}
	call("expand", map[string]any{"block_id": found.Hits[0].BlockID}, nil)
	if out := call("get_document", map[string]any{"doc_id": found.Hits[0].DocID}, nil); !strings.Contains(out, "lentil") && !strings.Contains(out, "Lentil") {
		t.Errorf("get_document: %s", out)
	}
	var docs struct {
		Documents []struct{ Source string } `json:"documents"`
	}
	call("list_documents", nil, &docs)
	if len(docs.Documents) != 2 {
		t.Errorf("list_documents: %+v", docs)
	}
	call("status", nil, nil)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 5 {
		t.Errorf("without --stdio-write: %v, %d tools", err, len(tools.Tools))
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v\n%s", err, stderr.String())
	}
	// The child released the index's lock: it opens again.
	ix, err = index.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("reopen after the server exited: %v\n%s", err, stderr.String())
	}
	ix.Close()

	// With --allow-write and --stdio-write the client has the write
	// tools, at its clearance.
	cmd = exec.Command(bin, "--index", dir, "serve", "--stdio", "--clearance", "internal", "--allow-write", "--stdio-write")
	cmd.Env = append(os.Environ(), "ESCUREL_CACHE_DIR=off")
	cmd.Stderr = &stderr
	cs, err = client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	var job struct {
		State  string `json:"state"`
		Caller string `json:"caller"`
	}
	call("ingest", map[string]any{"source": "/docs/stdio.md", "text": "# Stdio\n\nWritten over stdio: kumquats.\n", "sensitivity": "internal", "wait": true}, &job)
	if job.State != "succeeded" || job.Caller != "stdio" {
		t.Errorf("ingest over stdio: %+v", job)
	}
	call("search", map[string]any{"query": "kumquats", "mode": "bm25"}, &found)
	if len(found.Hits) != 1 {
		t.Errorf("the document ingested over stdio: %+v", found.Hits)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rebuild", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Errorf("rebuild at internal clearance over stdio: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v\n%s", err, stderr.String())
	}
}
