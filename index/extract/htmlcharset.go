package extract

// HTML character encodings: a byte order mark, then <meta charset> or
// http-equiv in the head, transcoded to UTF-8 with x/net/html/charset.

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// htmlDecode returns data as UTF-8: transcoded from the encoding its byte
// order mark or <meta> declares, or as it is. note names a transcoding
// ("decoded from windows-1252") for error messages.
func htmlDecode(data []byte) (out []byte, note string, err error) {
	var label string
	bom := true
	switch {
	case bytes.HasPrefix(data, []byte("\uFEFF")):
		return data, "", nil
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		label, data = "utf-16be", data[2:]
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		label, data = "utf-16le", data[2:]
	default:
		bom = false
		label = declaredCharset(data)
		if label == "" {
			return data, "", nil
		}
	}
	enc, encName := charset.Lookup(label)
	switch {
	case enc == nil:
		return data, fmt.Sprintf("declared charset %q is not a known label", label), nil
	case encName == "utf-8":
		return data, "", nil
	case encName == "replacement":
		return nil, "", fmt.Errorf("%w: charset %q is not supported", ErrInvalidUTF8, label)
	case strings.HasPrefix(encName, "utf-16") && !bom:
		// Declared in a <meta>, which UTF-16 text could not hold: the
		// HTML standard reads such a page as UTF-8.
		return data, "", nil
	}
	if strings.HasPrefix(encName, "utf-16") && len(data)%2 == 1 {
		return nil, "", fmt.Errorf("%w: odd number of bytes for %s", ErrInvalidUTF8, encName)
	}
	if encName == "x-user-defined" {
		enc, encName = charset.Lookup("windows-1252") // as the HTML standard says
	}
	out, err = enc.NewDecoder().Bytes(data)
	if err != nil {
		return nil, "", fmt.Errorf("%w: cannot decode as %s: %v", ErrInvalidUTF8, encName, err)
	}
	return out, "decoded from " + encName, nil
}

// declaredCharset returns the charset label of the first <meta charset> or
// <meta http-equiv="Content-Type" content="…; charset=…"> of the head: before
// </head>, <body> or any other tag that starts body content. A label that
// charset.Lookup knows wins over an earlier unknown one, which is returned
// when there is no known one.
func declaredCharset(data []byte) string {
	z := html.NewTokenizer(bytes.NewReader(data))
	unknown := ""
	for {
		switch z.Next() {
		case html.ErrorToken:
			return unknown
		case html.EndTagToken:
			if name, _ := z.TagName(); atom.Lookup(name) == atom.Head {
				return unknown
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch atom.Lookup(name) {
			case atom.Meta:
				if label := metaCharset(z, hasAttr); label != "" {
					if enc, _ := charset.Lookup(label); enc != nil {
						return label
					}
					if unknown == "" {
						unknown = label
					}
				}
			case atom.Html, atom.Head, atom.Title, atom.Link, atom.Style, atom.Script,
				atom.Noscript, atom.Base, atom.Basefont, atom.Bgsound, atom.Template:
			default:
				return unknown
			}
		}
	}
}

// metaCharset returns the charset a <meta> tag declares, or "".
func metaCharset(z *html.Tokenizer, hasAttr bool) string {
	var cs, content string
	pragma := false
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case "charset":
			if cs == "" {
				cs = strings.TrimSpace(string(v))
			}
		case "http-equiv":
			pragma = pragma || strings.EqualFold(strings.TrimSpace(string(v)), "content-type")
		case "content":
			if content == "" {
				content = string(v)
			}
		}
	}
	if cs != "" {
		return cs
	}
	if pragma {
		return contentCharset(content)
	}
	return ""
}

// contentCharset returns the charset parameter of a Content-Type value, as
// the HTML standard's "extracting a character encoding from a meta element"
// reads it, or "".
func contentCharset(s string) string {
	lower := strings.ToLower(s)
	for {
		i := strings.Index(lower, "charset")
		if i < 0 {
			return ""
		}
		s, lower = s[i+len("charset"):], lower[i+len("charset"):]
		rest := strings.TrimLeft(s, " \t\n\f\r")
		if !strings.HasPrefix(rest, "=") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " \t\n\f\r")
		if rest == "" {
			return ""
		}
		if q := rest[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(rest[1:], q)
			if end < 0 {
				return ""
			}
			return strings.TrimSpace(rest[1 : 1+end])
		}
		if end := strings.IndexAny(rest, "; \t\n\f\r"); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
}
