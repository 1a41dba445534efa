// Package analysis turns text into the terms the full-text index stores and
// queries look up. Index and query share one analyzer; its ID is recorded in
// the manifest, and an index refuses to open with another.
package analysis

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTermBytes is the longest term kept, in bytes; longer tokens (base64,
// hashes, minified code) are dropped.
const MaxTermBytes = 100

// Analyzer turns text into terms.
type Analyzer interface {
	// ID returns "<name>/<version>", e.g. "simple/1". A change to the terms
	// an analyzer produces for any input is a new version.
	ID() string
	// Terms appends the terms of text to dst, in text order, repeats kept.
	Terms(dst []string, text string) []string
}

// Simple is the analyzer "simple", version 1: a term is a maximal run of
// Unicode letters, digits and combining marks, lower-cased with
// unicode.ToLower; terms longer than MaxTermBytes are dropped. There is no
// stemming and no stop list. Non-ASCII letters are kept, so German, Greek or
// Cyrillic text is searchable; scripts written without spaces (Chinese,
// Japanese) become one term per run.
type Simple struct{}

var _ Analyzer = Simple{}

// ID returns "simple/1".
func (Simple) ID() string { return "simple/1" }

// Terms appends the terms of text to dst.
func (Simple) Terms(dst []string, text string) []string {
	start := -1
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			dst = appendTerm(dst, text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		dst = appendTerm(dst, text[start:])
	}
	return dst
}

func appendTerm(dst []string, tok string) []string {
	if len(tok) > MaxTermBytes {
		return dst
	}
	lower := true
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			lower = false
			break
		}
	}
	if lower {
		return append(dst, tok)
	}
	return append(dst, strings.ToLower(tok))
}

// ByID returns the analyzer with the given ID, or an error listing the ones
// this binary has.
func ByID(id string) (Analyzer, error) {
	if id == (Simple{}).ID() {
		return Simple{}, nil
	}
	return nil, fmt.Errorf("analyzer %q: unknown; analyzers: %s", id, Simple{}.ID())
}

// ByName returns the newest version of the named analyzer ("simple").
func ByName(name string) (Analyzer, error) {
	if name == "simple" {
		return Simple{}, nil
	}
	return nil, fmt.Errorf("analyzer %q: unknown; analyzers: simple", name)
}
