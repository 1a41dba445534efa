package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// maxResponseBytes bounds a server's answer (a batch of 4096 vectors of
// 4096 floats printed in JSON is about 300 MiB; defaults are far smaller).
const maxResponseBytes = 512 << 20

// Client posts JSON to an HTTP model server with a per-request timeout and
// retries. It is shared by the HTTP embedders and the HTTP reranker
// (package rerank).
type Client struct {
	// Name prefixes errors: "embedder openai:x", "reranker http://...".
	Name string
	// Key, when not empty, is sent as "Authorization: Bearer <Key>".
	Key string
	// Timeout bounds each attempt. Default DefaultTimeout.
	Timeout time.Duration
	// Retries is how often an attempt answered 429 or 5xx, or failing on
	// the network or by timeout, is retried; -1 means none. Default (0)
	// DefaultRetries.
	Retries int
	// HTTP is the client used. Default http.DefaultClient.
	HTTP *http.Client
	// sleep waits between attempts; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// StatusError is an answer other than 2xx from a model server.
type StatusError struct {
	URL    string // the endpoint posted to
	Status int    // the HTTP status code, e.g. 429
	Body   string // the start of the answer's body
}

// Error says "POST <url>: <status> <text>: <body>".
func (e *StatusError) Error() string {
	return fmt.Sprintf("POST %s: %d %s: %s", e.URL, e.Status, http.StatusText(e.Status), e.Body)
}

// retryable reports whether an answer with this status may succeed later.
func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// Post sends in as JSON to url and decodes the answer into out. An answer
// 429 or 5xx, a network error and an attempt's timeout are retried up to
// Retries times, after the server's Retry-After (seconds or an HTTP date,
// at most a minute) or else an exponential backoff from 250 ms, doubling,
// up to 8 s. ctx bounds the whole, retries included.
func (c *Client) Post(ctx context.Context, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	retries := c.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	sleep := c.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	backoff := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		wait, err := c.attempt(ctx, url, body, out)
		if err == nil {
			return nil
		}
		if wait < 0 || attempt >= retries || ctx.Err() != nil {
			if attempt > 0 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if wait == 0 {
			wait = backoff
			backoff = min(2*backoff, 8*time.Second)
		}
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
}

// attempt makes one request. wait < 0: the error is final; wait > 0: the
// server asked to retry after wait; wait = 0 with an error: retry after the
// backoff.
func (c *Client) attempt(ctx context.Context, url string, body []byte, out any) (wait time.Duration, err error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("POST %s: no answer within %v", url, timeout)
		}
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		return 0, fmt.Errorf("POST %s: read the answer: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		serr := &StatusError{URL: url, Status: resp.StatusCode, Body: snippet(data)}
		if !retryable(resp.StatusCode) {
			return -1, serr
		}
		return retryAfter(resp.Header.Get("Retry-After"), time.Now()), serr
	}
	if len(data) > maxResponseBytes {
		return -1, fmt.Errorf("POST %s: answer over %d bytes", url, maxResponseBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return -1, fmt.Errorf("POST %s: decode the answer: %w (%s)", url, err, snippet(data))
	}
	return 0, nil
}

// retryAfter parses a Retry-After header (RFC 9110 §10.2.3): delay seconds
// or an HTTP date. It returns 0 when absent or unreadable, and at most a
// minute.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	} else {
		return 0
	}
	if d <= 0 {
		return time.Millisecond // "now": retry at once, but not as a backoff
	}
	return min(d, time.Minute)
}

func snippet(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apiKey reads the key from the environment variable env. required: an
// unset or empty variable is an error.
func apiKey(model, env string, required bool) (string, error) {
	if env == "" {
		return "", nil
	}
	k := os.Getenv(env)
	if k == "" && required {
		return "", fmt.Errorf("embedder %s: key_env=%s but the environment variable %s is empty", model, env, env)
	}
	return k, nil
}
