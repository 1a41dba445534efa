package chunk

import (
	"strings"

	"github.com/rivo/uniseg"

	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/span"
)

// parentChild is the small-to-big chunker. Parents are the blocks the
// default chunker makes with ParentMaxBytes: heading sections, split where
// longer. Children are the blocks the default chunker makes with MaxBytes
// from the content units inside one parent, so a child never crosses its
// parent. Every child's Window is its parent's span.
type parentChild struct{ child, parent int }

func (c parentChild) Chunk(doc *extract.Doc) []Block {
	var out []Block
	sub := *doc
	sub.Headings = nil // a child's path is set below, from one cursor
	paths := pathCursor{headings: doc.Headings}
	lo := 0 // the first unit that may overlap the parent
	for pi, p := range Split(doc, c.parent) {
		sub.Units = nil
		first, last := -1, -1
		for lo < len(doc.Units) && doc.Units[lo].End <= p.Start {
			lo++
		}
		for ui := lo; ui < len(doc.Units) && doc.Units[ui].Start < p.End; ui++ {
			u := doc.Units[ui]
			s, e := max(u.Start, p.Start), min(u.End, p.End)
			if s >= e {
				continue
			}
			sub.Units = append(sub.Units, extract.Unit{Start: s, End: e, Page: u.Page, Header: u.Header})
			if first < 0 {
				first = ui
			}
			last = ui
		}
		heading := ""
		if len(p.HeadingPath) > 0 {
			heading = p.HeadingPath[len(p.HeadingPath)-1]
		}
		for _, ch := range Split(&sub, c.child) {
			ch.HeadingPath = paths.at(ch.Start)
			ch.Window, ch.Units, ch.Parent, ch.Heading = [2]int{p.Start, p.End}, [2]int{first, last + 1}, pi, heading
			out = append(out, ch)
		}
	}
	return out
}

// sentenceWindow makes one block per sentence (Unicode sentence boundaries,
// UAX #29, github.com/rivo/uniseg) of each content unit, a sentence longer
// than MaxBytes cut as the default chunker cuts a long unit. Line breaks
// inside a unit are read as spaces (UAX #29 ends a sentence at every line
// break, which would cut hard-wrapped prose mid-sentence), and a fenced
// code block is one unit, not sentences. A block's Window spans the Window
// sentences before it and after it that share its section and page (a
// window never crosses a heading).
type sentenceWindow struct{ max, window int }

func (c sentenceWindow) Chunk(doc *extract.Doc) []Block {
	type sentence struct {
		start, end, unit, section, page int
		header                          string
	}
	var sents []sentence
	section := 0
	paths := pathCursor{headings: doc.Headings}
	for ui, u := range doc.Units {
		for section < len(doc.Headings) && doc.Headings[section].Start <= u.Start {
			section++
		}
		text := doc.Text[u.Start:u.End]
		if strings.HasPrefix(text, "```") || strings.HasPrefix(text, "~~~") {
			for _, p := range pieces(doc.Text, u.Start, u.End, c.max) {
				sents = append(sents, sentence{p[0], p[1], ui, section, u.Page, continued(doc.Text, u, p[0])})
			}
			continue
		}
		// The same bytes with line breaks as spaces: offsets stay valid.
		flat := strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, text)
		rest, state, off := flat, -1, u.Start
		for len(rest) > 0 {
			var sent string
			sent, rest, state = uniseg.FirstSentenceInString(rest, state)
			s, e := span.Trim(doc.Text, off, off+len(sent))
			off += len(sent)
			if s >= e {
				continue
			}
			for _, p := range pieces(doc.Text, s, e, c.max) {
				sents = append(sents, sentence{p[0], p[1], ui, section, u.Page, continued(doc.Text, u, p[0])})
			}
		}
	}
	out := make([]Block, len(sents))
	for i, st := range sents {
		lo, hi := i, i
		for lo > 0 && i-lo < c.window && sents[lo-1].section == st.section && sents[lo-1].page == st.page {
			lo--
		}
		for hi < len(sents)-1 && hi-i < c.window && sents[hi+1].section == st.section && sents[hi+1].page == st.page {
			hi++
		}
		b := Block{Start: st.start, End: st.end, Page: st.page, HeadingPath: paths.at(st.start),
			Window: [2]int{sents[lo].start, sents[hi].end}, Units: [2]int{sents[lo].unit, sents[hi].unit + 1}, Parent: -1, TableHeader: st.header}
		if len(b.HeadingPath) > 0 {
			b.Heading = b.HeadingPath[len(b.HeadingPath)-1]
		}
		out[i] = b
	}
	return out
}
