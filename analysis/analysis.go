// Package analysis turns text into the terms the full-text index stores and
// queries look up. Index and query share one analyzer; its ID is recorded in
// the manifest, and an index refuses to open with another.
//
// Analyzers:
//   - "standard/2" (Standard, the default): default-ignorable code points
//     (soft hyphens, zero-width characters) dropped, then as standard/1.
//   - "standard/1" (StandardV1): NFKC normalization and Unicode
//     case folding (golang.org/x/text), Unicode word segmentation (UAX #29,
//     github.com/rivo/uniseg), bigrams over runs of Chinese and Japanese
//     characters, then per language the Snowball stop list and stemmer
//     (github.com/blevesearch/snowballstem). Indexes built with it keep it:
//     the manifest records the ID, and ByID finds every version this
//     binary has.
//   - "simple/1" (Simple): lower-cased runs of letters and digits, no
//     stemming, no stop words.
package analysis

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTermBytes is the longest term kept, in bytes; longer tokens (base64,
// hashes, minified code) are dropped.
const MaxTermBytes = 100

// Analyzer turns text into terms.
type Analyzer interface {
	// ID returns "<name>/<version>", e.g. "standard/1". A change to the
	// terms an analyzer produces for any input is a new version.
	ID() string
	// Terms appends the terms of text, written in language lang (a BCP 47
	// tag that CheckLanguage accepts), to dst, in text order, repeats kept.
	Terms(dst []string, text, lang string) []string
	// CheckLanguage returns an error listing the supported languages when
	// lang is not one of them.
	CheckLanguage(lang string) error
}

// Simple is the analyzer "simple", version 1: a term is a maximal run of
// Unicode letters, digits and combining marks, lower-cased with
// unicode.ToLower; terms longer than MaxTermBytes are dropped. There is no
// stemming and no stop list, and the language is ignored.
type Simple struct{}

var _ Analyzer = Simple{}

// ID returns "simple/1".
func (Simple) ID() string { return "simple/1" }

// CheckLanguage accepts every language.
func (Simple) CheckLanguage(string) error { return nil }

// Terms appends the terms of text to dst.
func (Simple) Terms(dst []string, text, _ string) []string {
	start := -1
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			dst = appendLower(dst, text[start:i])
			start = -1
		}
	}
	if start >= 0 {
		dst = appendLower(dst, text[start:])
	}
	return dst
}

func appendLower(dst []string, tok string) []string {
	if len(tok) > MaxTermBytes {
		return dst
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return append(dst, strings.ToLower(tok))
		}
	}
	return append(dst, tok)
}

// analyzers are the analyzers this binary has, every version, the newest
// of a name first (ByName).
var analyzers = []Analyzer{Standard{}, StandardV1{}, Simple{}}

// ByID returns the analyzer with the given ID, or an error listing the ones
// this binary has.
func ByID(id string) (Analyzer, error) {
	for _, a := range analyzers {
		if a.ID() == id {
			return a, nil
		}
	}
	return nil, fmt.Errorf("analyzer %q: unknown; analyzers: %s", id, strings.Join(ids(), ", "))
}

// ByName returns the newest version of the named analyzer ("standard",
// "simple").
func ByName(name string) (Analyzer, error) {
	for _, a := range analyzers {
		if n, _, _ := strings.Cut(a.ID(), "/"); n == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("analyzer %q: unknown; analyzers: %s", name, strings.Join(ids(), ", "))
}

func ids() []string {
	var out []string
	for _, a := range analyzers {
		out = append(out, a.ID())
	}
	sort.Strings(out)
	return out
}
