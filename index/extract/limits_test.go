package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sidePartBomb is a DOCX with a tiny body and part name holding open, then
// elt repeated to n bytes, then close.
func sidePartBomb(t *testing.T, part, open, elt, close string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("word/document.xml")
	w.Write([]byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Tiny body.</w:t></w:r></w:p></w:body></w:document>`))
	w, _ = zw.Create(part)
	w.Write([]byte(open))
	chunk := []byte(strings.Repeat(elt, (1<<20)/len(elt)))
	for left := n; left > 0; left -= len(chunk) {
		w.Write(chunk[:min(left, len(chunk))])
	}
	w.Write([]byte(close))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// heapPeak runs f while sampling the Go heap every 5 ms and returns the
// largest HeapAlloc seen, in bytes.
func heapPeak(f func()) uint64 {
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak
}

// Styles and numbering parts that fit the package budget but would take
// gigabytes decoded are refused at their own cap.
func TestDOCXSidePartBombs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ part, open, elt, close string }{
		{"word/styles.xml", `<w:styles xmlns:w="x">`, "<style/>", "</w:styles>"},
		{"word/numbering.xml", `<w:numbering xmlns:w="x">`, "<num/>", "</w:numbering>"},
	} {
		data := sidePartBomb(t, tc.part, tc.open, tc.elt, tc.close, 64<<20)
		runtime.GC()
		var err error
		peak := heapPeak(func() { _, err = Extract(ctx, MediaDOCX, "bomb.docx", data, Limits{}) })
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.part) {
			t.Errorf("%s: %v, want ErrTooLarge naming the part", tc.part, err)
		}
		if peak > 256<<20 {
			t.Errorf("%s: heap peaked at %d MiB", tc.part, peak>>20)
		}
		t.Logf("%s of 64 MiB: %v; heap peak %d MiB", tc.part, err, peak>>20)
	}
}

// Past its time limit a DOCX extraction stops reading: the goroutine that
// Extract abandons does not go on allocating.
func TestDOCXStopsAtTimeLimit(t *testing.T) {
	// A body of 200 MiB of paragraphs: seconds to read.
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("word/document.xml")
	w.Write([]byte(`<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>`))
	chunk := []byte(strings.Repeat("<w:p><w:r><w:t>some words here</w:t></w:r></w:p>", 20000))
	for i := 0; i < (200<<20)/len(chunk); i++ {
		w.Write(chunk)
	}
	w.Write([]byte(`</w:body></w:document>`))
	zw.Close()
	data := b.Bytes()
	before := runtime.NumGoroutine()
	start := time.Now()
	_, err := Extract(context.Background(), MediaDOCX, "long.docx", data, Limits{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines still running 2 s after the time-out (%d before)", n, before)
	}
	t.Logf("timed out after %v", time.Since(start).Round(time.Millisecond))
}

func TestHTMLElementCap(t *testing.T) {
	data := []byte(strings.Repeat("<p>a", htmlMaxNodes/2+1))
	_, err := Extract(context.Background(), MediaHTML, "many.html", data, Limits{})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v, want ErrTooLarge", err)
	}
	// Comments and text runs make nodes too.
	if _, err := Extract(context.Background(), MediaHTML, "comments.html", []byte(strings.Repeat("a<!---->", htmlMaxNodes/2+1)), Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("comments: err = %v, want ErrTooLarge", err)
	}
	d, err := Extract(context.Background(), MediaHTML, "fine.html", []byte(strings.Repeat("<p>a", 1000)), Limits{})
	if err != nil || len(d.Units) != 1000 {
		t.Errorf("1000 paragraphs: %v", err)
	}
}
