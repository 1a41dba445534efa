package main

// The CLI and a running server: while escurel serve holds an index
// directory, it records its address and a local token in DIR/SERVER
// (internal/layout, mode 0600), and every command below that names the
// directory sends its command line there instead of meeting the lock. The
// server runs the same command code on its open index (Main.live) and
// streams back what it prints and its exit status, so the output is the
// output of direct mode by construction; writes serialize with the
// server's own, and searches from every client continue meanwhile.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/layout"
	"github.com/escurel/escurel/serve"
)

// forwarded lists the commands that run in a server holding their index.
// The others either own a process (serve), need no index (version, help)
// or build their own (eval).
var forwarded = map[string]bool{
	"ingest": true, "search": true, "status": true, "expand": true, "delete": true,
	"compact": true, "rebuild": true, "reembed": true, "rollback": true, "verify": true,
	"documents": true, "sync": true, "gc": true, "export": true, "publish": true,
}

// writeKinds maps the forwarded commands that write to the kind of write
// job they run as in the server (serve.Server.RunWrite).
var writeKinds = map[string]string{
	"ingest": serve.JobIngest, "delete": serve.JobDelete, "compact": serve.JobCompact,
	"rebuild": serve.JobRebuild, "reembed": serve.JobReembed, "rollback": serve.JobRollback,
	"gc": serve.JobGC, "sync": serve.JobSync,
}

// forwardedEnv are the variables a forwarded command sees: the client's,
// not the server's.
var forwardedEnv = []string{
	"ESCUREL_INDEX", "ESCUREL_BLOBS", "ESCUREL_EMBEDDER", "ESCUREL_CHUNKER",
	"ESCUREL_EXTRACT_TIMEOUT", "ESCUREL_MAX_UNZIPPED_BYTES", "ESCUREL_INGEST_CONTEXTUALIZE",
	"ESCUREL_RERANK_URL", "ESCUREL_RERANK_API_KEY", "ESCUREL_PUBLISH_TO",
}

// serverRecord is the content of DIR/SERVER.
type serverRecord struct {
	URL   string `json:"url"`   // http://127.0.0.1:PORT
	PID   int    `json:"pid"`   // the server's process
	Dir   string `json:"dir"`   // the index directory it serves, absolute
	Token string `json:"token"` // the local token (serve.Options.LocalToken)
}

// exitStatus is a forwarded command's exit status: the command printed
// its own messages, so Main's caller prints nothing more.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// indexFlag returns the value of the last --index (or -index) flag in
// args, a command's arguments, before any "--"; def when none.
func indexFlag(args []string, def string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "index" {
			continue
		}
		if hasValue {
			def = value
		} else if i+1 < len(args) {
			def = args[i+1]
			i++
		}
	}
	return def
}

// forward runs the command line args (the program's arguments) in the
// server that holds dir, when one does. It reports false, for direct mode,
// when DIR/SERVER is absent, when the process it names does not hold the
// lock (a server that died: the lock is free, or another process holds
// it and direct mode reports that), or when no one answers at its
// address; otherwise true and the command's outcome (exitStatus for a
// non-zero exit the server already reported).
func (m *Main) forward(ctx context.Context, dir string, args []string) (bool, error) {
	data, ok, err := layout.Server(dir)
	if err != nil || !ok {
		return false, err
	}
	var rec serverRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.URL == "" || rec.Token == "" {
		return false, fmt.Errorf("%s: not a server record (%v); remove it if no escurel serve holds %s", filepath.Join(dir, layout.ServerName), err, dir)
	}
	// The record may be stale: a server killed by SIGKILL leaves it, and
	// another process may listen at its port since. Send the token and the
	// command line only while the recorded server holds the lock.
	if d, err := layout.Lock(dir); err == nil {
		d.Unlock() // free: no server (Lock removed its record); direct mode
		return false, nil
	} else if !errors.Is(err, layout.ErrLocked) {
		return false, err
	}
	if pid, ok := layout.LockHolder(dir); !ok || pid != rec.PID {
		return false, nil // another process holds it: direct mode says so
	}
	wd, err := os.Getwd()
	if err != nil {
		return false, err
	}
	req := serve.CommandRequest{Args: args, Dir: wd, Env: map[string]string{}}
	for _, k := range forwardedEnv {
		if v := m.Getenv(k); v != "" {
			req.Env[k] = v
		}
	}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.URL+serve.LocalCommandPath, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	hreq.Header.Set("Authorization", "Bearer "+rec.Token)
	hreq.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}}
	resp, err := client.Do(hreq)
	var nerr *net.OpError
	if errors.As(err, &nerr) && nerr.Op == "dial" {
		return false, nil // no one there: the server died; direct mode finds the lock free
	}
	if err != nil {
		return true, fmt.Errorf("the escurel serve holding %s (process %d, %s): %w", dir, rec.PID, rec.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var problem struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(msg, &problem) == nil && problem.Detail != "" {
			msg = []byte(problem.Detail)
		}
		return true, fmt.Errorf("the escurel serve holding %s (process %d, %s) refused the command: %s", dir, rec.PID, rec.URL, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var f serve.CommandFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return true, fmt.Errorf("the escurel serve holding %s: a response line that is not a frame: %w", dir, err)
		}
		switch {
		case f.Exit != nil:
			if *f.Exit == 0 {
				return true, nil
			}
			return true, exitStatus(*f.Exit)
		case f.Stream == "stderr":
			io.WriteString(m.Stderr, f.Data)
		default:
			io.WriteString(m.Stdout, f.Data)
		}
	}
	err = sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return true, fmt.Errorf("the escurel serve holding %s (process %d) stopped answering before the command ended; its outcome is unknown (escurel status shows the index as it is): %w", dir, rec.PID, err)
}

// newLocalToken returns a random token for serve.Options.LocalToken.
func newLocalToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// runForwarded is the server's serve.CommandFunc: it runs a forwarded
// command line on the open index ix of dir, with the client's working
// directory and environment; its writes run through exclusive, the
// server's write queue.
func runForwarded(ix *index.Index, dir string, exclusive func(ctx context.Context, kind string, fn func(context.Context) error) error) serve.CommandFunc {
	return func(ctx context.Context, req *serve.CommandRequest, stdout, stderr io.Writer) int {
		m := &Main{
			Stdout:    stdout,
			Stderr:    stderr,
			Getenv:    func(k string) string { return req.Env[k] },
			live:      ix,
			liveDir:   dir,
			wd:        req.Dir,
			exclusive: exclusive,
		}
		return exitCode(stderr, m.Run(ctx, req.Args))
	}
}

// abs resolves path against the working directory of the command line:
// the client's, for a forwarded command.
func (m *Main) abs(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	if m.wd != "" {
		return filepath.Join(m.wd, path)
	}
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}

// existing returns path resolved against the command line's working
// directory (abs) when a file or directory is there, else path as it is
// (a URI, or a prefix of a source that names no file).
func (m *Main) existing(path string) string {
	if path == "" || strings.Contains(path, "://") {
		return path
	}
	if _, err := os.Stat(m.abs(path)); err == nil {
		return m.abs(path)
	}
	return path
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
