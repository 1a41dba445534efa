package extract

// Shared finishing of an extracted document's structure: bounded titles and
// headings, and headings whose sections hold nothing kept as content.

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/unicode"
)

// MaxHeadingBytes caps the text of a heading and of an extracted title, in
// bytes. Every block of a section repeats its title and headings in its
// context, so without a cap a document that is one long heading (a file
// with old Mac line endings read as one line, a long paragraph over a
// Setext underline) would cost the square of its length.
const MaxHeadingBytes = 512

// ClipHeading returns s cut to at most MaxHeadingBytes bytes, ending with
// "…" when cut: at the last space in the second half of the limit, else at
// a rune boundary.
func ClipHeading(s string) string {
	if len(s) <= MaxHeadingBytes {
		return s
	}
	const ellipsis = "…"
	limit := MaxHeadingBytes - len(ellipsis)
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if i := strings.LastIndexByte(s[:cut], ' '); i >= limit/2 {
		cut = i
	}
	return strings.TrimRight(s[:cut], " ") + ellipsis
}

// finish bounds the title and the headings' texts (ClipHeading) and makes
// each heading whose section holds no content a unit itself, so that its
// words are in some block: a heading's words otherwise reach the index only
// through the context of the blocks under it. A heading's section runs to
// the next heading of its level or higher. Units stay in document order.
func (d *Doc) finish() {
	d.Title = ClipHeading(d.Title)
	for i := range d.Headings {
		d.Headings[i].Text = ClipHeading(d.Headings[i].Text)
	}
	// sectionEnd[i]: where heading i's section ends.
	sectionEnd := make([]int, len(d.Headings))
	var next [8]int // next[l]: start of the nearest heading of level l to the right
	for l := range next {
		next[l] = len(d.Text)
	}
	for i := len(d.Headings) - 1; i >= 0; i-- {
		h := d.Headings[i]
		lv := min(max(h.Level, 1), len(next)-1)
		end := len(d.Text)
		for l := 1; l <= lv; l++ {
			end = min(end, next[l])
		}
		sectionEnd[i] = end
		next[lv] = h.Start
	}
	var add []Unit
	for i, h := range d.Headings {
		// The first unit starting at or after the heading's start.
		j := sort.Search(len(d.Units), func(k int) bool { return d.Units[k].Start >= h.Start })
		if j < len(d.Units) && d.Units[j].Start < sectionEnd[i] {
			continue
		}
		if j > 0 && d.Units[j-1].End > h.Start {
			continue // inside a unit (never, for the extractors that call finish)
		}
		before := len(d.Units)
		d.addUnit(h.Start, h.End)
		if len(d.Units) > before {
			add = append(add, d.Units[before])
			d.Units = d.Units[:before]
		}
	}
	if len(add) == 0 {
		return
	}
	d.Units = append(d.Units, add...)
	sort.SliceStable(d.Units, func(a, b int) bool { return d.Units[a].Start < d.Units[b].Start })
}

// setHeader makes the first line of the last unit, which starts at start
// (a table), its Header.
func (d *Doc) setHeader(start int) {
	if len(d.Units) == 0 || d.Units[len(d.Units)-1].Start != start {
		return
	}
	u := &d.Units[len(d.Units)-1]
	line := d.Text[u.Start:u.End]
	if i := strings.IndexAny(line, "\r\n"); i >= 0 {
		line = line[:i]
	}
	u.Header = strings.TrimRight(line, " \t")
}

// fromUTF16 returns data transcoded to UTF-8 when it starts with a UTF-16
// byte order mark (the mark dropped), else data itself. The text of a
// transcoded document is not its bytes, so the index keeps it, as it does
// for HTML. Unpaired surrogates become U+FFFD; an odd number of bytes is
// an error wrapping ErrInvalidUTF8.
func fromUTF16(data []byte) ([]byte, error) {
	var order unicode.Endianness
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		order = unicode.LittleEndian
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		order = unicode.BigEndian
	default:
		return data, nil
	}
	if len(data)%2 == 1 {
		return nil, fmt.Errorf("%w: UTF-16 (by its byte order mark) with an odd number of bytes (%d)", ErrInvalidUTF8, len(data))
	}
	out, err := unicode.UTF16(order, unicode.ExpectBOM).NewDecoder().Bytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot decode as UTF-16: %v", ErrInvalidUTF8, err)
	}
	return out, nil
}
