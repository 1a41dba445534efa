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
//
// Extractors register by media type (Register), as database/sql drivers
// do. Built in, because they are pure Go and light: Markdown, plain text,
// HTML and DOCX. PDF runs PDFium on a WebAssembly runtime and is linked
// in only by importing its package,
//
//	import _ "github.com/escurel/escurel/index/extract/pdf"
//
// Without it, Detect still recognises PDFs (by content and by name), and
// For and Extract fail on them with an error wrapping ErrNotLinked that
// names that import: a PDF never becomes text by default.
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
	// ErrNotLinked: the media type is one escurel reads, but its
	// extractor is not linked into this program (its package was not
	// imported; the error names it). It says nothing about the document.
	ErrNotLinked = errors.New("extractor not linked into this program")
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
	// Sensitivity is the front-matter "sensitivity" (public, internal or
	// restricted), or "" when not given. A declaration that cannot be read
	// fails extraction with ErrFrontMatter instead (frontmatter.go).
	Sensitivity string
	// Warnings report front-matter keys that resemble title or lang and
	// are not read.
	Warnings []string
	// Pages is the number of pages of a paged format (PDF), else 0.
	Pages int
	// Meta is the front matter's other keys (lower case): each value a
	// string (a date is a string in date or RFC 3339 form), float64, bool,
	// or []any of those. nil when there are none.
	Meta map[string]any
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
// Extractors are registered with Register and found with For; Extract runs
// one under limits.
type Extractor struct {
	MediaType string // the media type it extracts, e.g. MediaPDF
	Name      string // short format name: "markdown", "text", "html", "docx", "pdf"
	// Version counts changes of output: the same bytes extract to the same
	// Doc under one version, and may not under the next.
	Version int
	// Func extracts one document: data (not empty) of MediaType, named
	// name, within lim. It must honour ctx (Extract cancels it at the
	// time limit) and return the errors Extract documents. Call Extract,
	// not Func: Extract adds the time limit and turns a panic into
	// ErrPanic.
	Func func(ctx context.Context, name string, data []byte, lim Limits) (*Doc, error)
	// Start, when not nil, readies the extractor (starts an engine); it
	// runs before the time limit starts. An error should wrap ErrEngine.
	Start func() error
	// LateClock: Func starts the time limit itself, with BeginClock,
	// after waiting for what is not the document's time (an engine
	// instance). Without it the limit starts when Func is called.
	LateClock bool
}

// ID is "<name>/<version>", e.g. "pdf/1".
func (e *Extractor) ID() string { return fmt.Sprintf("%s/%d", e.Name, e.Version) }

// extractorImports names the packages of the extractors escurel ships
// outside this package, for the error that says what to import.
var extractorImports = map[string]string{
	MediaPDF: "github.com/escurel/escurel/index/extract/pdf",
}

// registry holds the extractors by media type. mu guards byType; it is
// held only to read or change the map, never while an extractor runs.
var registry struct {
	mu     sync.RWMutex
	byType map[string]*Extractor
}

// Register makes e the extractor of e.MediaType. Call it from an init
// function. It panics, as sql.Register does, if e is nil, has no Func, an
// empty MediaType or Name, a Version below 1, or if an extractor is
// already registered for its media type or under its name.
func Register(e *Extractor) {
	if e == nil || e.Func == nil {
		panic("extract: Register extractor is nil or has no Func")
	}
	if e.MediaType == "" || e.Name == "" || e.Version < 1 {
		panic(fmt.Sprintf("extract: Register %q (%s): want a media type, a name and a version ≥ 1", e.ID(), e.MediaType))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, dup := registry.byType[e.MediaType]; dup {
		panic("extract: Register called twice for media type " + e.MediaType)
	}
	for _, other := range registry.byType {
		if other.Name == e.Name {
			panic("extract: Register called twice for extractor name " + e.Name)
		}
	}
	if registry.byType == nil {
		registry.byType = map[string]*Extractor{}
	}
	registry.byType[e.MediaType] = e
}

// The extractors built into this package.
func init() {
	// markdown/2, text/2: front matter keys without regard to case, TOML
	// front matter, and near misses of a sensitivity fail (issue 15); text
	// reads front matter.
	Register(&Extractor{MediaType: MediaMarkdown, Name: "markdown", Version: 2, Func: func(_ context.Context, name string, data []byte, _ Limits) (*Doc, error) {
		return Markdown(name, data)
	}})
	Register(&Extractor{MediaType: MediaText, Name: "text", Version: 2, Func: func(_ context.Context, name string, data []byte, _ Limits) (*Doc, error) {
		return Text(name, data)
	}})
	Register(&Extractor{MediaType: MediaHTML, Name: "html", Version: 2, Func: func(ctx context.Context, name string, data []byte, _ Limits) (*Doc, error) {
		return htmlExtract(ctx, name, data)
	}})
	Register(&Extractor{MediaType: MediaDOCX, Name: "docx", Version: 2, Func: docx})
}

// For returns the extractor of a media type. Errors: for a type escurel
// reads whose extractor is not linked in (PDF without its package), one
// wrapping ErrNotLinked that names the package to import; for any other
// type, one wrapping ErrUnsupported.
func For(mediaType string) (*Extractor, error) {
	registry.mu.RLock()
	e, ok := registry.byType[mediaType]
	registry.mu.RUnlock()
	if ok {
		return e, nil
	}
	if imp, known := extractorImports[mediaType]; known {
		return nil, fmt.Errorf("extract: %s: %w; import _ %q", mediaType, ErrNotLinked, imp)
	}
	return nil, fmt.Errorf("%w: media type %q", ErrUnsupported, mediaType)
}

// IDs lists the ID of every registered extractor, sorted and space
// separated, e.g. "docx/2 html/2 markdown/2 pdf/2 text/2" (without pdf/2
// when the PDF extractor is not linked in): what the manifest records.
func IDs() string {
	registry.mu.RLock()
	ids := make([]string, 0, len(registry.byType))
	for _, e := range registry.byType {
		ids = append(ids, e.ID())
	}
	registry.mu.RUnlock()
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
// where the problem is; ErrEngine when the extractor cannot run at all,
// or ErrNotLinked when it is not linked into this program (neither is the
// document's fault); or ctx's error when ctx ends first. Empty data is
// ErrEmpty whatever the format.
func Extract(ctx context.Context, mediaType, name string, data []byte, lim Limits) (*Doc, error) {
	e, err := For(mediaType)
	if err != nil {
		return nil, err
	}
	if e.Start != nil {
		if err := e.Start(); err != nil {
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
	if !e.LateClock {
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
		r.doc, r.err = e.Func(ctx, name, data, lim)
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

// BeginClock starts the time limit of the extraction ctx belongs to: an
// extractor with LateClock calls it from its Func once it is ready to work.
// It does nothing on a second call, or for a ctx that did not come from
// Extract.
func BeginClock(ctx context.Context) {
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
