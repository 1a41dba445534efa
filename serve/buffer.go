package serve

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
)

// maxBuffered is the largest answer bufferedWriter holds whole; past it
// the answer streams, chunked, as net/http sends it by default.
const maxBuffered = 1 << 20

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// bufferedWriter holds an answer until its handler returns, then sends
// it with its Content-Length in one write: net/http would otherwise send
// a JSON body of more than 2 KiB (a search's hits) chunked, in several
// writes and a terminating chunk, each one more wake-up of the client.
// Past maxBuffered bytes it sends what it holds and streams the rest.
type bufferedWriter struct {
	w    http.ResponseWriter
	buf  *bytes.Buffer
	code int
	// streaming is set once the header has gone to w: writes pass
	// through.
	streaming bool
	// length: set Content-Length (not for HEAD, whose body is not sent).
	length bool
}

func newBufferedWriter(w http.ResponseWriter, length bool) *bufferedWriter {
	return &bufferedWriter{w: w, buf: bodyBuffers.Get().(*bytes.Buffer), length: length}
}

// Header is the answer's header, sent by finish (or by the write past
// maxBuffered).
func (b *bufferedWriter) Header() http.Header { return b.w.Header() }

// WriteHeader records the status; the first one counts.
func (b *bufferedWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

// Write holds p, or streams it past maxBuffered.
func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	if b.streaming {
		return b.w.Write(p)
	}
	if b.buf.Len()+len(p) <= maxBuffered {
		return b.buf.Write(p)
	}
	b.streaming = true
	b.w.WriteHeader(b.code)
	if _, err := b.w.Write(b.buf.Bytes()); err != nil {
		return 0, err
	}
	b.buf.Reset()
	return b.w.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (b *bufferedWriter) Unwrap() http.ResponseWriter { return b.w }

// finish sends the held answer: the status, Content-Length (unless the
// status has no body) and the body in one write; then gives the buffer
// back.
func (b *bufferedWriter) finish() {
	defer func() {
		if b.buf.Cap() <= maxBuffered {
			b.buf.Reset()
			bodyBuffers.Put(b.buf)
		}
		b.buf = nil
	}()
	if b.streaming {
		return
	}
	if b.code == 0 {
		b.code = http.StatusOK
	}
	if b.length && b.code != http.StatusNoContent && b.code != http.StatusNotModified && b.code >= 200 {
		b.w.Header().Set("Content-Length", strconv.Itoa(b.buf.Len()))
	}
	b.w.WriteHeader(b.code)
	if b.buf.Len() > 0 {
		b.w.Write(b.buf.Bytes())
	}
}
