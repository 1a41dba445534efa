package tests

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/serve"
)

// The README's Python example (examples/python/search.py, standard library
// only) runs against a real server: it prints citable hits, a token from
// ESCUREL_TOKEN raises its clearance, and a request the server refuses
// ends it with the problem's detail.
func TestPythonExample(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the README's Python example is not run")
	}
	dir := t.TempDir()
	ctx := context.Background()
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, in := range []index.Input{
		{Source: "/docs/soup.md", Data: []byte("# Lentil soup\n\nRed lentils cook in twenty minutes.\n")},
		{Source: "/docs/zqmemo.md", Sensitivity: index.Restricted, Data: []byte("# Memo\n\nThe lentil zqmemo is restricted.\n")},
	} {
		if _, err := ix.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	tokens, err := serve.ParseTokens([]byte(`[{"token": "legal-token-0123456789", "name": "legal", "clearance": "restricted"}]`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(ix, &serve.Options{Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	run := func(token string, args ...string) (string, error) {
		cmd := exec.Command(python, append([]string{"../examples/python/search.py", "--url", "http://" + ln.Addr().String()}, args...)...)
		cmd.Env = append(os.Environ(), "ESCUREL_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("", "lentil", "--mode", "bm25")
	if err != nil {
		t.Fatalf("search.py: %v\n%s", err, out)
	}
	if !strings.Contains(out, "1. [") || !strings.Contains(out, "/docs/soup.md bytes ") || !strings.Contains(out, "Red lentils cook") {
		t.Errorf("public search prints no citable hit:\n%s", out)
	}
	if strings.Contains(out, "zqmemo") {
		t.Errorf("public search shows the restricted document:\n%s", out)
	}

	out, err = run("legal-token-0123456789", "zqmemo")
	if err != nil {
		t.Fatalf("search.py with a token: %v\n%s", err, out)
	}
	if !strings.Contains(out, "/docs/zqmemo.md") {
		t.Errorf("a restricted token does not find the restricted document:\n%s", out)
	}

	out, err = run("", "lentil", "--k", "5000")
	if err == nil || !strings.Contains(out, "escurel: Unprocessable Entity") || !strings.Contains(out, "body.k") {
		t.Errorf("k 5000: err %v, want the problem printed and a failure exit:\n%s", err, out)
	}
}
