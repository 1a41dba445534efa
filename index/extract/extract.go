// Package extract turns a document's raw bytes into text with structure: a
// title, the headings with their byte offsets, and the content units
// (paragraphs, lists, code blocks, tables, …) as byte spans of the text.
//
// For Markdown and plain text the text is the raw bytes themselves, so every
// span indexes the blob directly: text[u.Start:u.End] is verbatim source;
// except for UTF-16 text (by its byte order mark), transcoded to UTF-8:
// then Doc.Text differs from the bytes and must be kept like HTML's.
// For HTML, DOCX and PDF the text is built by the extractor (Doc.Text) and
// the spans index it; the index keeps that text beside the blocks.
// Extraction is deterministic: the same bytes and name give the same Doc.
package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Media types escurel extracts.
const (
	MediaMarkdown = "text/markdown"
	MediaText     = "text/plain"
	MediaHTML     = "text/html"
	MediaPDF      = "application/pdf"
	MediaDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)

// Errors for input that cannot be indexed. They are returned wrapped with
// the detail (an offset, a reason); match them with errors.Is.
var (
	ErrUnsupported = errors.New("unsupported file type")
	ErrEmpty       = errors.New("empty document")
	ErrBinary      = errors.New("binary content")
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	ErrFrontMatter = errors.New("invalid front matter")
	// ErrCorrupt: the bytes are not a readable document of their format
	// (a truncated PDF, a DOCX that is not a zip, malformed XML).
	ErrCorrupt = errors.New("corrupt document")
	// ErrEncrypted: the document needs a password.
	ErrEncrypted = errors.New("encrypted document")
	// ErrTooLarge: decompressing the document would exceed
	// Limits.MaxDecompressedBytes (a zip bomb, or simply a huge DOCX).
	ErrTooLarge = errors.New("document too large")
	// ErrTimeout: extraction ran longer than Limits.Timeout.
	ErrTimeout = errors.New("extraction time limit exceeded")
	// ErrPanic: the extractor panicked; the panic was recovered.
	ErrPanic = errors.New("extractor failed")
	// ErrEngine: the extractor itself cannot run here (the PDF engine did
	// not start). It says nothing about the document: callers should stop,
	// not record the document as failed.
	ErrEngine = errors.New("PDF engine unavailable")
)

// Defaults of Limits.
const (
	DefaultMaxDecompressedBytes = 256 << 20 // 256 MiB
	DefaultTimeout              = time.Minute
)

// Limits bound the resources one extraction may use. The zero value means
// the defaults.
type Limits struct {
	// MaxDecompressedBytes caps the bytes read out of a compressed
	// container (the parts of a DOCX zip), in total. A document that
	// decompresses past it fails with ErrTooLarge. 0 means
	// DefaultMaxDecompressedBytes.
	MaxDecompressedBytes int64
	// Timeout caps the wall time of one extraction; past it the
	// extraction fails with ErrTimeout. 0 means DefaultTimeout.
	Timeout time.Duration
}

// withDefaults returns l with zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxDecompressedBytes <= 0 {
		l.MaxDecompressedBytes = DefaultMaxDecompressedBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

// Doc is an extracted document.
type Doc struct {
	Text     string    // the text all spans index; for Markdown and plain text, the raw bytes
	Title    string    // front-matter title, else the first H1, else the file name without extension
	Language string    // front-matter "lang", or "" when not given
	Headings []Heading // section headings in document order
	Units    []Unit    // content spans in document order, not overlapping, never empty
	// Sensitivity is the front-matter "sensitivity", or "" when not given.
	Sensitivity string
	// Pages is the number of pages of a paged format (PDF), else 0.
	Pages int
}

// Heading is a section heading. Headings inside lists, block quotes or code
// are content, not section headings.
type Heading struct {
	Level int    // 1 to 6
	Text  string // inline text, whitespace collapsed, markup and {#id} attributes removed
	Start int    // byte offset of the heading's first character in Doc.Text
	End   int    // byte offset just past the heading's last line (Setext underline included), trimmed
}

// Unit is a content span: Doc.Text[Start:End] with no leading or trailing
// white space. Page is 1-based, or 0 when the format has no pages.
type Unit struct {
	Start, End int // bytes, End exclusive
	Page       int
	// Header is a table's header row: the unit's first line, verbatim
	// (Markdown and DOCX tables); "" for other units. A chunker that cuts
	// the table carries it into the context of the blocks after the
	// first, which lack it.
	Header string
}

// MediaType returns the media type for a file name by its extension:
// .md and .markdown are Markdown, .txt is plain text, .html, .htm and .xhtml
// are HTML, .pdf is PDF and .docx is DOCX. Other names fail with
// ErrUnsupported. A directory walk reads the files it accepts; Detect then
// looks at their bytes.
func MediaType(name string) (string, error) {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown":
		return MediaMarkdown, nil
	case ".txt":
		return MediaText, nil
	case ".html", ".htm", ".xhtml":
		return MediaHTML, nil
	case ".pdf":
		return MediaPDF, nil
	case ".docx":
		return MediaDOCX, nil
	}
	return "", fmt.Errorf("%w: %q (escurel reads .md, .markdown, .txt, .html, .htm, .xhtml, .pdf and .docx)", ErrUnsupported, path.Ext(name))
}

// Detect returns the media type of data, whose file name is name. The
// content decides where it is unambiguous: a zip holding
// word/document.xml is DOCX, and bytes starting with "%PDF-" (after a byte
// order mark or white space) are PDF, whatever the extension. For a name
// without a text extension (.md, .txt, .html, …), "%PDF-" anywhere in the
// first 1024 bytes, where PDF readers look for it, is PDF too; a Markdown
// page that mentions "%PDF-" stays Markdown. Otherwise the extension
// decides (MediaType), so a .pdf that is not a PDF is detected as PDF and
// fails extraction as corrupt, with the bytes kept.
func Detect(name string, data []byte) (string, error) {
	byName, nameErr := MediaType(name)
	head := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\uFEFF")), " \t\r\n\f")
	textName := byName == MediaMarkdown || byName == MediaText || byName == MediaHTML
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return MediaPDF, nil
	case !textName && bytes.Contains(data[:min(len(data), 1024)], []byte("%PDF-")):
		return MediaPDF, nil
	case bytes.HasPrefix(data, []byte("PK\x03\x04")) && isDOCX(data):
		return MediaDOCX, nil
	}
	return byName, nameErr
}

// Extractor extracts one media type. Its ID, name and version, is stored
// with every document it extracted and in the index manifest, so that an
// index knows which documents a newer extractor would read differently.
type Extractor struct {
	MediaType string
	Name      string // short format name: "markdown", "text", "html", "docx", "pdf"
	// Version counts changes of output: the same bytes extract to the same
	// Doc under one version, and may not under the next.
	Version int
	fn      func(ctx context.Context, name string, data []byte, lim Limits) (*Doc, error)
	// start, when not nil, readies the extractor (starts an engine); it
	// runs before the time limit starts.
	start func() error
	// lateClock: fn starts the time limit itself (beginClock), after
	// waiting for what is not the document's time.
	lateClock bool
}

// ID is "<name>/<version>", e.g. "pdf/1".
func (e *Extractor) ID() string { return fmt.Sprintf("%s/%d", e.Name, e.Version) }

// extractors, by media type.
var extractors = map[string]*Extractor{
	MediaMarkdown: {MediaType: MediaMarkdown, Name: "markdown", Version: 2, fn: func(_ context.Context, name string, data []byte, _ Limits) (*Doc, error) {
		return Markdown(name, data)
	}},
	MediaText: {MediaType: MediaText, Name: "text", Version: 2, fn: func(_ context.Context, name string, data []byte, _ Limits) (*Doc, error) {
		return Text(name, data)
	}},
	MediaHTML: {MediaType: MediaHTML, Name: "html", Version: 2, fn: func(ctx context.Context, name string, data []byte, _ Limits) (*Doc, error) {
		return htmlExtract(ctx, name, data)
	}},
	MediaDOCX: {MediaType: MediaDOCX, Name: "docx", Version: 2, fn: docx},
	MediaPDF:  {MediaType: MediaPDF, Name: "pdf", Version: 1, fn: pdfExtract, start: pdfStart, lateClock: true},
}

// For returns the extractor of a media type, or an error wrapping
// ErrUnsupported.
func For(mediaType string) (*Extractor, error) {
	if e, ok := extractors[mediaType]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("%w: media type %q", ErrUnsupported, mediaType)
}

// IDs lists the ID of every extractor, sorted and space separated, e.g.
// "docx/2 html/2 markdown/2 pdf/1 text/2": what the manifest records.
func IDs() string {
	ids := make([]string, 0, len(extractors))
	for _, e := range extractors {
		ids = append(ids, e.ID())
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

// Extract extracts data of the given media type. name is the document's file
// name (or last path segment); it supplies the title when the content has
// none.
//
// The extraction runs under lim: past lim.Timeout it fails with
// ErrTimeout, and a panic inside an extractor is recovered and returned as
// ErrPanic, so that one bad document never takes the process down. Errors
// wrap ErrUnsupported, ErrEmpty, ErrBinary, ErrInvalidUTF8, ErrFrontMatter,
// ErrCorrupt, ErrEncrypted, ErrTooLarge, ErrTimeout or ErrPanic and say
// where the problem is; ErrEngine when the extractor cannot run at all
// (not the document's fault); or ctx's error when ctx ends first. Empty
// data is ErrEmpty whatever the format.
func Extract(ctx context.Context, mediaType, name string, data []byte, lim Limits) (*Doc, error) {
	e, err := For(mediaType)
	if err != nil {
		return nil, err
	}
	if e.start != nil {
		if err := e.start(); err != nil {
			return nil, err
		}
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: 0 bytes", ErrEmpty)
	}
	lim = lim.withDefaults()
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &clock{limit: lim.Timeout, cancel: cancel}
	defer c.stop()
	ctx = context.WithValue(ctx, clockKey{}, c)
	if !e.lateClock {
		c.begin()
	}
	type result struct {
		doc *Doc
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned extraction never blocks
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{nil, fmt.Errorf("%w: %s extractor panicked: %v", ErrPanic, e.ID(), p)}
			}
			done <- r
		}()
		r.doc, r.err = e.fn(ctx, name, data, lim)
	}()
	select {
	case r := <-done:
		switch {
		case errors.Is(r.err, ErrPanic):
			return nil, r.err
		case r.err != nil && parent.Err() != nil:
			return nil, parent.Err()
		case c.over():
			// Past the limit, finished or not: one outcome for one
			// document, however the race between the two went.
			return nil, timeoutError(lim)
		}
		return r.doc, r.err
	case <-ctx.Done():
		if err := parent.Err(); err != nil {
			return nil, err
		}
		return nil, timeoutError(lim)
	}
}

// clock times one extraction: it starts when the extraction begins (for
// the PDF extractor, once it holds an engine instance: waiting for one is
// not the document's time) and, past the limit, cancels the extraction's
// context.
type clock struct {
	limit  time.Duration
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	start  time.Time
	timer  *time.Timer
}

type clockKey struct{}

// begin starts c, once.
func (c *clock) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer == nil {
		c.start = time.Now()
		c.timer = time.AfterFunc(c.limit, func() { c.cancel(ErrTimeout) })
	}
}

// over reports whether the limit has passed since c began.
func (c *clock) over() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timer != nil && time.Since(c.start) > c.limit
}

func (c *clock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
}

// beginClock starts the time limit of the extraction ctx belongs to; an
// extractor with lateClock calls it once it is ready to work.
func beginClock(ctx context.Context) {
	if c, ok := ctx.Value(clockKey{}).(*clock); ok {
		c.begin()
	}
}

func timeoutError(lim Limits) error {
	return fmt.Errorf("%w (%s)", ErrTimeout, lim.Timeout)
}

// checkText rejects bytes that are not text: empty or white space only, a NUL
// byte (binary), or invalid UTF-8. It returns the offset of the first byte
// after a UTF-8 byte order mark, if any.
func checkText(data []byte) (int, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return 0, fmt.Errorf("%w: no text (%d bytes)", ErrEmpty, len(data))
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return 0, fmt.Errorf("%w: NUL byte at offset %d", ErrBinary, i)
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return 0, fmt.Errorf("%w: bad byte 0x%02x at offset %d", ErrInvalidUTF8, data[i], i)
	}
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		return 3, nil
	}
	return 0, nil
}

// BaseTitle is the title of last resort: the file name without its
// directory and extension ("dir/report.pdf" → "report").
func BaseTitle(name string) string { return baseTitle(name) }

// baseTitle is the file name without its extension.
func baseTitle(name string) string {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	return strings.TrimSuffix(base, path.Ext(base))
}
