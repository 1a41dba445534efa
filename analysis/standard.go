package analysis

import (
	"embed"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/arabic"
	"github.com/blevesearch/snowballstem/danish"
	"github.com/blevesearch/snowballstem/dutch"
	"github.com/blevesearch/snowballstem/english"
	"github.com/blevesearch/snowballstem/finnish"
	"github.com/blevesearch/snowballstem/french"
	"github.com/blevesearch/snowballstem/german"
	"github.com/blevesearch/snowballstem/hungarian"
	"github.com/blevesearch/snowballstem/irish"
	"github.com/blevesearch/snowballstem/italian"
	"github.com/blevesearch/snowballstem/norwegian"
	"github.com/blevesearch/snowballstem/portuguese"
	"github.com/blevesearch/snowballstem/romanian"
	"github.com/blevesearch/snowballstem/russian"
	"github.com/blevesearch/snowballstem/spanish"
	"github.com/blevesearch/snowballstem/swedish"
	"github.com/blevesearch/snowballstem/turkish"
	"github.com/rivo/uniseg"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Standard is the analyzer "standard", version 2: StandardV1 after
// dropping every default-ignorable code point (Unicode's
// Default_Ignorable_Code_Point: the soft hyphen U+00AD, zero-width spaces
// and joiners, the word joiner, variation selectors, U+FEFF, …), which
// render as nothing, so that "co\u00ADoperate" is the word "cooperate".
// It is the default for new indexes; an index built with standard/1 keeps
// analyzing as standard/1 (StandardV1) until rebuilt with
// --analyzer standard.
type Standard struct{}

var _ Analyzer = Standard{}

// ID returns "standard/2".
func (Standard) ID() string { return "standard/2" }

// CheckLanguage accepts the languages listed on StandardV1.
func (Standard) CheckLanguage(lang string) error {
	_, err := lookup(lang)
	return err
}

// Terms appends the terms of text in language lang to dst.
func (Standard) Terms(dst []string, text, lang string) []string {
	if !isASCII(text) { // every default-ignorable code point is non-ASCII
		text = dropIgnorable(text)
	}
	return StandardV1{}.Terms(dst, text, lang)
}

// dropIgnorable returns s without its default-ignorable code points.
func dropIgnorable(s string) string {
	i := strings.IndexFunc(s, defaultIgnorable)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if !defaultIgnorable(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// defaultIgnorable reports whether r has Unicode's derived property
// Default_Ignorable_Code_Point: Other_Default_Ignorable_Code_Point, format
// characters (Cf) and variation selectors, less the interlinear annotation
// characters (U+FFF9–FFFB), the Egyptian hieroglyph format controls
// (U+13430–1343F) and the prepended concatenation marks, which are visible
// or shape their neighbours.
func defaultIgnorable(r rune) bool {
	switch {
	case r < 0xAD:
		return false
	case r >= 0xFFF9 && r <= 0xFFFB, r >= 0x13430 && r <= 0x1343F,
		r >= 0x0600 && r <= 0x0605, r == 0x06DD, r == 0x070F, r == 0x0890, r == 0x0891, r == 0x08E2, r == 0x110BD, r == 0x110CD:
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// StandardV1 is the analyzer "standard", version 1. For a text in language
// lang it:
//
//  1. normalizes the text to NFKC and folds its case (Unicode full case
//     folding, so "Straße" and "STRASSE" meet), and writes ’ as ';
//  2. splits it into words at Unicode word boundaries (UAX #29) and keeps
//     those holding a letter or a digit;
//  3. turns each run of adjacent Han, Hiragana or Katakana characters into
//     its overlapping bigrams (a lone character stays a unigram), since those
//     scripts do not separate words with spaces (as Lucene's CJKBigramFilter);
//  4. removes an elided article (French and Italian: "l'élève" → "élève"),
//     drops words on the language's Snowball stop list, then stems the rest
//     with the language's Snowball stemmer;
//  5. drops terms longer than MaxTermBytes.
//
// Languages (by primary subtag): with stop list and stemmer da, de, en, es,
// fi, fr, hu, it, nl, no (nb, nn), pt, ru, sv; with stemmer only ar, ga, ro,
// tr; without either (steps 1–3 and 5 only) el, ja, ko, zh.
type StandardV1 struct{}

var _ Analyzer = StandardV1{}

// ID returns "standard/1".
func (StandardV1) ID() string { return "standard/1" }

// language is how Standard treats one language.
type language struct {
	stem    func(*snowballstem.Env) bool // nil: no stemming
	stop    map[string]bool              // folded stop words; nil: none
	elision map[string]bool              // elided articles ("l" of "l'élève"); nil: none

	stems      sync.Map     // word → stem, a cache: stemming is a pure function
	cacheBytes atomic.Int64 // heap that stems takes, estimated; bounded by maxStemCacheBytes
	// words pools wordCaches: a goroutine's own cache of what a word
	// becomes (the term, or "" when it is dropped), one plain map lookup
	// instead of the stop list's and the shared stem cache's.
	words sync.Pool
}

// wordCache maps a word to the term it emits ("" for none); at most
// maxLocalWords entries, emptied when a new word finds it full. One
// goroutine uses it at a time (language.words).
type wordCache map[string]string

// add caches t as the term of word w, both cloned (w is a slice of the
// text analyzed, and t may be), and returns t's copy. A full cache is
// emptied first, so that the words of what comes now (another domain's
// vocabulary) are cached, not only the first maxLocalWords seen.
func (c wordCache) add(w, t string) string {
	if len(c) >= maxLocalWords {
		clear(c)
	}
	k := strings.Clone(w)
	if t == w {
		t = k
	} else {
		t = strings.Clone(t)
	}
	c[k] = t
	return t
}

// addKey is add for a term t that shares no bytes with the text
// analyzed: only the word is cloned.
func (c wordCache) addKey(w, t string) string {
	if len(c) >= maxLocalWords {
		clear(c)
	}
	c[strings.Clone(w)] = t
	return t
}

// maxLocalWords bounds each pooled wordCache (about 1.5 MB; there are
// about as many as goroutines analyzing at once).
const maxLocalWords = 20_000

// maxStemCacheBytes bounds each language's stem cache: the Go heap its
// entries take, as stemEntryBytes estimates it (about 55,000 English
// words). Once full, new words are stemmed each time they come; the words
// a text repeats most come early and stay.
const maxStemCacheBytes = 8 << 20

// stemEntryBytes is the heap a cached stem takes besides its word's bytes
// (and its stem's, when the stem is not a prefix of the word): sync.Map's
// entry node, its share of the trie's indirect nodes, and the key and
// value boxed as interfaces. TestStemCacheBytes checks the estimate.
const stemEntryBytes = 144

// stemmed returns the stem of w, from the cache when it can.
func (l *language) stemmed(w string, env *snowballstem.Env) string {
	if s, ok := l.stems.Load(w); ok {
		return s.(string)
	}
	env.SetCurrent(w)
	l.stem(env)
	s := env.Current()
	if l.cacheBytes.Load() < maxStemCacheBytes {
		k := strings.Clone(w)
		size := stemEntryBytes + len(k)
		if strings.HasPrefix(k, s) {
			s = k[:len(s)] // share the word's bytes
		} else {
			size += len(s)
		}
		if _, loaded := l.stems.LoadOrStore(k, s); !loaded {
			l.cacheBytes.Add(int64(size))
		}
	}
	return s
}

// Elided articles removed from the front of a word (Lucene's ElisionFilter
// defaults for French and Italian).
var elisions = map[string][]string{
	"fr": {"l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu"},
	"it": {"c", "l", "all", "dall", "dell", "nell", "sull", "coll", "pell", "gl", "agl", "dagl", "degl", "negl", "sugl", "un", "m", "t", "s", "v", "d"},
}

//go:embed stopwords/*.txt
var stopFiles embed.FS

var (
	langOnce  sync.Once
	languages map[string]*language
)

func loadLanguages() {
	stemmers := map[string]func(*snowballstem.Env) bool{
		"ar": arabic.Stem, "da": danish.Stem, "de": german.Stem, "en": english.Stem, "es": spanish.Stem,
		"fi": finnish.Stem, "fr": french.Stem, "ga": irish.Stem, "hu": hungarian.Stem, "it": italian.Stem,
		"nl": dutch.Stem, "no": norwegian.Stem, "pt": portuguese.Stem, "ro": romanian.Stem, "ru": russian.Stem,
		"sv": swedish.Stem, "tr": turkish.Stem,
	}
	languages = map[string]*language{"el": {}, "ja": {}, "ko": {}, "zh": {}}
	for tag, stem := range stemmers {
		languages[tag] = &language{stem: stem}
	}
	entries, _ := stopFiles.ReadDir("stopwords")
	for _, e := range entries {
		tag := strings.TrimSuffix(e.Name(), ".txt")
		data, _ := stopFiles.ReadFile("stopwords/" + e.Name())
		stop := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			if w, _, _ := strings.Cut(line, "|"); strings.TrimSpace(w) != "" {
				for _, f := range strings.Fields(w) {
					stop[fold(f)] = true
				}
			}
		}
		languages[tag].stop = stop
	}
	for tag, arts := range elisions {
		languages[tag].elision = map[string]bool{}
		for _, a := range arts {
			languages[tag].elision[a] = true
		}
	}
	languages["nb"], languages["nn"] = languages["no"], languages["no"]
}

// Languages returns the language tags Standard and StandardV1 support,
// sorted.
func Languages() []string {
	langOnce.Do(loadLanguages)
	var out []string
	for tag := range languages {
		out = append(out, tag)
	}
	sort.Strings(out)
	return out
}

func lookup(lang string) (*language, error) {
	langOnce.Do(loadLanguages)
	primary, _, _ := strings.Cut(strings.ToLower(lang), "-")
	if l, ok := languages[primary]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("language %q: not supported by analyzer standard; languages: %s", lang, strings.Join(Languages(), ", "))
}

// CheckLanguage accepts the languages listed on StandardV1.
func (StandardV1) CheckLanguage(lang string) error {
	_, err := lookup(lang)
	return err
}

// casers pools case folders: a cases.Caser is not safe for concurrent use.
var casers = sync.Pool{New: func() any { c := cases.Fold(); return &c }}

// fold applies step 1: NFKC, case folding, ’ → '.
func fold(s string) string {
	c := casers.Get().(*cases.Caser)
	s = c.String(norm.NFKC.String(s))
	casers.Put(c)
	return strings.ReplaceAll(s, "\u2019", "'")
}

var envs = sync.Pool{New: func() any { return snowballstem.NewEnv("") }}

// Terms appends the terms of text in language lang to dst. An unsupported
// language (see CheckLanguage) is analyzed without stop list and stemmer.
func (StandardV1) Terms(dst []string, text, lang string) []string {
	l, err := lookup(lang)
	if err != nil {
		l = &language{}
	}
	env := envs.Get().(*snowballstem.Env)
	defer envs.Put(env)
	term := func(w string) string {
		if l.elision != nil {
			if art, rest, ok := strings.Cut(w, "'"); ok && l.elision[art] {
				w = rest
			}
		}
		if l.stop[w] {
			return ""
		}
		if l.stem != nil {
			w = l.stemmed(w, env)
		}
		if len(w) > MaxTermBytes {
			return ""
		}
		return w
	}
	var words wordCache
	if err == nil {
		if c, ok := l.words.Get().(wordCache); ok {
			words = c
		} else {
			words = wordCache{}
		}
		defer l.words.Put(words)
	}
	emit := func(w string) {
		t, ok := words[w]
		if !ok {
			t = term(w)
			if words != nil {
				t = words.add(w, t)
			}
		}
		if t != "" {
			dst = append(dst, t)
		}
	}
	// emitASCII is emit for a word of ASCII text as written: segmentation
	// does not depend on case (ascii.go), so the text is not lower-cased
	// as a whole; the cache maps the word as written to its term, and a
	// word it does not hold is lower-cased alone. A key holding an upper
	// case ASCII letter comes only from here (folding lower-cases them),
	// and a lower-case key means the same word on both paths.
	emitASCII := func(w string) {
		t, ok := words[w]
		if !ok {
			lw := strings.ToLower(w) // no copy when w has no upper case
			t = term(lw)
			if words != nil {
				if lw == w {
					t = words.add(w, t)
				} else {
					// t is lw's or its own bytes, never the text's: only
					// the key needs a copy.
					t = words.addKey(w, t)
				}
			}
		}
		if t != "" {
			dst = append(dst, t)
		}
	}
	if isASCII(text) {
		// For ASCII, NFKC changes nothing, folding is lower-casing and there
		// is no CJK: segment with the equivalent ASCII rules (ascii.go).
		asciiWords(text, emitASCII)
		return dst
	}
	// Mostly ASCII text with a few other characters (a Greek letter, a
	// dash, an accented name): the ASCII pieces take the fast path, the
	// pieces holding other characters the full one (pieces).
	pieces(text, func(piece string, ascii bool) {
		if ascii {
			asciiWords(piece, emitASCII)
		} else {
			unicodeWords(piece, emit)
		}
	})
	return dst
}

// pieces cuts text into pieces that analyze independently, and calls fn
// with each in order, saying whether it is all ASCII. A cut lies only
// before an ASCII character that follows an ASCII space, tab, CR or LF:
// there NFKC has a boundary (an ASCII character is a starter that nothing
// composes with), case folding is per character, UAX #29 breaks (no
// word-joining rule looks across such a space, and none looks past it)
// and no CJK run spans it, so analyzing the pieces gives the terms of the
// whole (TestPiecesMatchWhole). Runs of ASCII between cuts are joined into
// one piece; a piece holding any other character ends at the first cut
// after it.
func pieces(text string, fn func(piece string, ascii bool)) {
	start, lastCut, other := 0, 0, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= utf8.RuneSelf {
			if !other {
				if lastCut > start {
					fn(text[start:lastCut], true)
					start = lastCut
				}
				other = true
			}
			continue
		}
		if i > 0 && cutAfter(text[i-1]) {
			if other {
				fn(text[start:i], false)
				start, other = i, false
			}
			lastCut = i
		}
	}
	if start < len(text) {
		fn(text[start:], !other)
	}
}

// cutAfter reports whether pieces may cut after the ASCII byte c.
func cutAfter(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// unicodeWords calls emit with the terms' words of text in order: steps
// 1–3 of StandardV1 (fold, UAX #29 words holding a letter or digit, CJK
// bigrams) for any text.
func unicodeWords(text string, emit func(string)) {
	var run []string // adjacent CJK characters
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			emit(run[0])
		default:
			for i := 0; i+1 < len(run); i++ {
				emit(run[i] + run[i+1])
			}
		}
		run = run[:0]
	}
	rest := fold(text)
	state := -1
	var word string
	for len(rest) > 0 {
		word, rest, state = uniseg.FirstWordInString(rest, state)
		r, size := utf8.DecodeRuneInString(word)
		if size == len(word) && isCJK(r) {
			run = append(run, word)
			continue
		}
		flush()
		if hasLetterOrDigit(word) {
			emit(word)
		}
	}
	flush()
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

func hasLetterOrDigit(w string) bool {
	for _, r := range w {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}
