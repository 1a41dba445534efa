package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/replica"
)

// openReplica opens, for escurel serve --replica-of, a read replica of
// the generations published at from in the replica's own directory
// c.g.indexDir, and polls from every poll until ctx is done. stop ends
// the polling and closes the replica.
func (c *ServeCommand) openReplica(ctx context.Context, from string, poll time.Duration, checkDigest bool, log *slog.Logger) (ix *index.Index, stop func(), err error) {
	opts, err := c.m.options(c.g)
	if err != nil {
		return nil, nil, err
	}
	r, err := replica.Open(ctx, from, c.g.indexDir, &replica.Options{Poll: poll, Index: opts, Logger: log, CheckDigest: checkDigest})
	if err != nil {
		return nil, nil, err
	}
	info, _ := r.Index().Replica()
	log.Info("replica", "of", blobstore.Redact(from), "generation", info.Generation, "digest", info.Digest, "seq", info.Seq,
		"age", time.Since(info.PublishedAt).Round(time.Second))
	pollCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { r.Run(pollCtx); close(done) }()
	return r.Index(), func() { cancel(); <-done; r.Close() }, nil
}
