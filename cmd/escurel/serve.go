package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/internal/hooks"
	"github.com/escurel/escurel/serve"
)

// ServeCommand is "escurel serve": it opens the index once, holding its
// lock, and answers searches over HTTP (the /v1 API, MCP at /mcp,
// /metrics) or, with --stdio, MCP over stdin and stdout, until SIGINT or
// SIGTERM.
type ServeCommand struct {
	m *Main
	g globals
	// listening, when not nil, is called with the address once the server
	// accepts connections (tests listen on port 0).
	listening func(addr string)
}

// Run serves until ctx is done: running requests drain (up to 10 s) while
// the running write job is canceled (nothing of it is kept) and the
// queued ones too, then the index is closed and its lock released.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("serve", &c.g)
	listen := fs.String("listen", c.m.envOr("ESCUREL_LISTEN", "127.0.0.1:7700"), "address to listen on (env ESCUREL_LISTEN); the default answers this machine only")
	tokens := fs.String("tokens", c.m.Getenv("ESCUREL_TOKENS"), "tokens file: a JSON array of {\"token\", \"name\", \"clearance\", \"write\"} (env ESCUREL_TOKENS); without it every caller is public")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin and stdout instead of HTTP (for a desktop agent that starts escurel)")
	clearance := fs.String("clearance", "", "with --stdio: the clearance of the MCP client (default public); over HTTP clearance comes from tokens")
	timeout := fs.Duration("request-timeout", serve.DefaultRequestTimeout, "time limit of one request or tool call")
	allowWrite := fs.Bool("allow-write", false, "serve writes (ingest, delete, rebuild, reembed, rollback, compact) as jobs to tokens with \"write\": true")
	allowPaths := fs.String("allow-paths", "", "with --allow-write: a directory whose files writers of restricted clearance may ingest by path (symbolic links resolved; nothing outside it)")
	maxUpload := fs.Int64("max-upload", serve.DefaultMaxUploadBytes, "with --allow-write: bytes of one ingested document")
	stdioWrite := fs.Bool("stdio-write", false, "with --stdio and --allow-write: the MCP client may write")
	replicaOf := fs.String("replica-of", "", "serve, read-only, the generations published at this URL (escurel publish --to), downloaded into the index directory, which is the replica's own")
	poll := fs.Duration("poll", 5*time.Second, "with --replica-of: how often to look for a newer published generation")
	checkDigest := fs.Bool("check-digest", false, "with --replica-of: compute the digest of every downloaded generation's rows even when its publisher runs this same executable, for which the file's SHA-256 is otherwise trusted (34 s and 2.4 GB per switch at 1M passages)")
	rr := c.m.rerankFlags(fs)
	args, err := c.m.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError("serve: unexpected argument %q", args[0])
	}
	if *clearance != "" && !*stdio {
		return usageError("serve: --clearance applies to --stdio only; over HTTP a caller's clearance comes from its token in --tokens")
	}
	if *clearance == "" {
		*clearance = index.Public
	}
	if err := index.CheckSensitivity(*clearance); err != nil {
		return usageError("serve: --clearance: %v", err)
	}
	reranker, err := rr.reranker()
	if err != nil {
		return usageError("serve: %v", err)
	}
	if *timeout <= 0 {
		return usageError("serve: --request-timeout %s: want a positive duration", *timeout)
	}
	if *stdioWrite && (!*stdio || !*allowWrite) {
		return usageError("serve: --stdio-write needs --stdio and --allow-write")
	}
	if *allowPaths != "" && !*allowWrite {
		return usageError("serve: --allow-paths needs --allow-write")
	}
	if *replicaOf != "" && *allowWrite {
		return usageError("serve: --replica-of serves read-only: drop --allow-write (writes go to the writer, which publishes)")
	}
	if *poll <= 0 {
		return usageError("serve: --poll %s: want a positive duration", *poll)
	}
	if *checkDigest && *replicaOf == "" {
		return usageError("serve: --check-digest needs --replica-of")
	}
	pollSet := false
	fs.Visit(func(f *flag.Flag) { pollSet = pollSet || f.Name == "poll" })
	if pollSet && *replicaOf == "" {
		return usageError("serve: --poll needs --replica-of (a writer's server has nothing to poll)")
	}
	if *maxUpload <= 0 {
		return usageError("serve: --max-upload %d: want a positive number of bytes", *maxUpload)
	}
	opts := &serve.Options{
		Reranker:       reranker,
		RequestTimeout: *timeout,
		AllowWrite:     *allowWrite,
		AllowPaths:     *allowPaths,
		MaxUploadBytes: *maxUpload,
		// The access log goes to stderr: with --stdio, stdout is the
		// protocol's.
		Logger: slog.New(slog.NewTextHandler(c.m.Stderr, nil)),
	}
	if *tokens != "" {
		if *stdio {
			return usageError("serve: --tokens applies to HTTP; with --stdio give --clearance")
		}
		if opts.Tokens, err = serve.LoadTokens(*tokens); err != nil {
			return err
		}
		if fi, err := os.Stat(*tokens); err == nil && fi.Mode().Perm()&0o077 != 0 {
			fmt.Fprintf(c.m.Stderr, "escurel: warning: tokens file %s is readable by others (mode %04o): chmod 600 %s\n", *tokens, fi.Mode().Perm(), *tokens)
		}
	}
	var ln net.Listener
	if !*stdio {
		// Listen before opening the index, so a taken port fails fast.
		if ln, err = net.Listen("tcp", *listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		defer ln.Close()
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() && *tokens == "" {
			fmt.Fprintf(c.m.Stderr, "escurel: warning: listening on %s, beyond this machine, without --tokens: every caller there is public (read-only)\n", ln.Addr())
		}
	}
	var ix *index.Index
	if *replicaOf != "" {
		var closeReplica func()
		if ix, closeReplica, err = c.openReplica(ctx, *replicaOf, *poll, *checkDigest, opts.Logger); err != nil {
			return err
		}
		defer closeReplica()
	} else {
		if ix, err = c.m.openExisting(ctx, c.g); err != nil {
			return err
		}
		defer ix.Close()
	}
	var srv *serve.Server
	if !*stdio {
		// Commands run on this machine go through this server instead of
		// meeting the lock (remote.go): record where it answers.
		dir, err := filepath.Abs(c.g.indexDir)
		if err != nil {
			return err
		}
		if opts.LocalToken, err = newLocalToken(); err != nil {
			return err
		}
		opts.LocalCommand = runForwarded(ix, dir, func(ctx context.Context, kind string, fn func(context.Context) error) error {
			return srv.RunWrite(ctx, kind, fn) // srv is set before Serve takes a request
		})
		addr := *ln.Addr().(*net.TCPAddr)
		if addr.IP.IsUnspecified() {
			addr.IP = net.IPv4(127, 0, 0, 1)
			if ln.Addr().(*net.TCPAddr).IP.To4() == nil {
				addr.IP = net.IPv6loopback
			}
		}
		rec, _ := json.Marshal(serverRecord{URL: "http://" + addr.String(), PID: os.Getpid(), Dir: dir, Token: opts.LocalToken})
		d := hooks.Dir(ix)
		if err := d.SetServer(rec); err != nil {
			return err
		}
		defer d.ClearServer()
	}
	if srv, err = serve.New(ix, opts); err != nil {
		return usageError("serve: --allow-paths: %v", err)
	}
	if *stdio {
		opts.Logger.Info("serving MCP over stdio", "index", c.g.indexDir, "clearance", *clearance, "write", *stdioWrite)
		return srv.ServeStdio(ctx, serve.Caller{Name: "stdio", Clearance: *clearance, Write: *stdioWrite}, os.Stdin, os.Stdout)
	}
	opts.Logger.Info("serving", "addr", "http://"+ln.Addr().String(), "index", c.g.indexDir, "generation", ix.Generation(), "tokens", *tokens != "", "write", *allowWrite)
	if c.listening != nil {
		c.listening(ln.Addr().String())
	}
	start := time.Now()
	err = srv.Serve(ctx, ln)
	opts.Logger.Info("stopped", "uptime", time.Since(start).Round(time.Second))
	return err
}
