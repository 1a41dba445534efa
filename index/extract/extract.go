// Package extract turns a document's raw bytes into text with structure: a
// title, the headings with their byte offsets, and the content units
// (paragraphs, lists, code blocks, tables, …) as byte spans of the text.
//
// For Markdown and plain text the text is the raw bytes themselves, so every
// span indexes the blob directly: text[u.Start:u.End] is verbatim source.
// Extraction is deterministic: the same bytes and name give the same Doc.
package extract

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Media types escurel extracts.
const (
	MediaMarkdown = "text/markdown"
	MediaText     = "text/plain"
)

// Errors for input that cannot be indexed. They are returned wrapped with
// the detail (an offset, a reason); match them with errors.Is.
var (
	ErrUnsupported = errors.New("unsupported file type")
	ErrEmpty       = errors.New("empty document")
	ErrBinary      = errors.New("binary content")
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	ErrFrontMatter = errors.New("invalid front matter")
)

// Doc is an extracted document.
type Doc struct {
	Text     string    // the text all spans index; for Markdown and plain text, the raw bytes
	Title    string    // front-matter title, else the first H1, else the file name without extension
	Language string    // front-matter "lang", or "" when not given
	Headings []Heading // section headings in document order
	Units    []Unit    // content spans in document order, not overlapping, never empty
	// Sensitivity is the front-matter "sensitivity", or "" when not given.
	Sensitivity string
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
}

// MediaType returns the media type for a file name by its extension:
// .md and .markdown are Markdown, .txt is plain text. Other names fail with
// ErrUnsupported.
func MediaType(name string) (string, error) {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown":
		return MediaMarkdown, nil
	case ".txt":
		return MediaText, nil
	}
	return "", fmt.Errorf("%w: %q (escurel reads .md, .markdown and .txt)", ErrUnsupported, path.Ext(name))
}

// Extract extracts data of the given media type. name is the document's file
// name (or last path segment); it supplies the title when the content has
// none. Errors wrap ErrUnsupported, ErrEmpty, ErrBinary, ErrInvalidUTF8 or
// ErrFrontMatter and say where the problem is.
func Extract(mediaType, name string, data []byte) (*Doc, error) {
	switch mediaType {
	case MediaMarkdown:
		return Markdown(name, data)
	case MediaText:
		return Text(name, data)
	}
	return nil, fmt.Errorf("%w: media type %q", ErrUnsupported, mediaType)
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

// baseTitle is the file name without its extension.
func baseTitle(name string) string {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	return strings.TrimSuffix(base, path.Ext(base))
}
