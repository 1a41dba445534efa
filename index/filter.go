package index

// The filter expression of SearchOptions.Filter: a small grammar over
// document metadata, parsed once, evaluated against an in-memory table of
// the documents (metastore.go) into the set of blocks every leg may rank.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of a filter expression.
const (
	MaxFilterBytes = 4096 // the longest filter
	maxFilterDepth = 32   // nested parentheses and nots
	maxInValues    = 1024 // values of one in [...]
)

// Filter is a parsed filter expression (ParseFilter). The zero value and
// nil match every document.
//
// Grammar (keywords in any case; keys are matched in lower case):
//
//	filter  = or
//	or      = and { "or" and }
//	and     = unary { "and" unary }
//	unary   = "not" unary | "(" or ")" | test
//	test    = key op value | key "in" "[" value { "," value } "]"
//	        | key "exists" | key
//	op      = "=" | "!=" | "<" | "<=" | ">" | ">=" | "^="
//	value   = "string" | number | true | false | date
//
// A string is in double quotes with Go escapes; a date is 2006-01-02 or an
// RFC 3339 time, bare or quoted (a string in date form is a date, in a
// filter as in metadata). A bare key is key = true. key != v is not
// (key = v): it matches documents without the key. ^= is a string prefix
// (folder ^= "/docs/guide/"); <, <=, >, >= take a number or a date. A list
// value matches when any of its elements does. Values of another type than
// the literal's never match; a key no document has matches nothing.
type Filter struct {
	src  string
	root fnode
}

// String returns the filter as given.
func (f *Filter) String() string {
	if f == nil {
		return ""
	}
	return f.src
}

// FilterError is a filter that does not parse: Column is the 1-based
// byte column where it went wrong.
type FilterError struct {
	Column int
	Msg    string
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("filter: column %d: %s", e.Column, e.Msg)
}

// Value kinds.
const (
	kString uint8 = iota + 1
	kNumber
	kBool
	kDate
)

var kindName = map[uint8]string{kString: "string", kNumber: "number", kBool: "boolean", kDate: "date"}

// fval is a metadata value or a literal: s is the text of a string or a
// date, n a number, t a date in ns since the epoch.
type fval struct {
	kind uint8
	b    bool
	n    float64
	t    int64
	s    string
}

// fnode is a node of a parsed filter.
type fnode struct {
	op   string // "and", "or", "not", "exists", "in", "=", "!=", "<", "<=", ">", ">=", "^="
	kids []fnode
	key  string
	vals []fval
}

// ParseFilter parses a filter expression (see Filter). "" gives nil, which
// matches everything. Errors are *FilterError naming the column: a
// malformed expression, an unknown operator, or a value of a type the
// operator does not take.
func ParseFilter(s string) (*Filter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > MaxFilterBytes {
		return nil, &FilterError{1, fmt.Sprintf("%d bytes, over %d (index.MaxFilterBytes)", len(s), MaxFilterBytes)}
	}
	if !utf8.ValidString(s) {
		return nil, &FilterError{1, "not valid UTF-8"}
	}
	p := &fparser{src: s}
	if err := p.lex(); err != nil {
		return nil, err
	}
	root, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errAt(t, "expected and, or or the end of the filter, got %s", t)
	}
	return &Filter{src: s, root: root}, nil
}

// Tokens.
const (
	tEOF = iota
	tWord
	tString
	tValue // a number or a date, bare
	tPunct
)

type ftoken struct {
	kind int
	text string // as written (a string's unquoted value for tString)
	col  int
}

func (t ftoken) String() string {
	switch t.kind {
	case tEOF:
		return "the end of the filter"
	case tString:
		return strconv.Quote(t.text)
	}
	return fmt.Sprintf("%q", t.text)
}

type fparser struct {
	src  string
	toks []ftoken
	pos  int
}

func (p *fparser) errAt(t ftoken, format string, args ...any) error {
	return &FilterError{t.col, fmt.Sprintf(format, args...)}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *fparser) lex() error {
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		col := i + 1
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return &FilterError{col, "a string that is never closed"}
			}
			v, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return &FilterError{col, fmt.Sprintf("a malformed string %s", s[i:j+1])}
			}
			p.toks = append(p.toks, ftoken{tString, v, col})
			i = j + 1
		case c >= '0' && c <= '9' || (c == '-' || c == '+') && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '.'):
			j := i + 1
			for j < len(s) && (isWordByte(s[j]) || s[j] == ':' || s[j] == '+') {
				j++
			}
			p.toks = append(p.toks, ftoken{tValue, s[i:j], col})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			p.toks = append(p.toks, ftoken{tWord, s[i:j], col})
			i = j
		case strings.ContainsRune("()[],", rune(c)):
			p.toks = append(p.toks, ftoken{tPunct, s[i : i+1], col})
			i++
		default:
			j := i
			for j < len(s) && strings.IndexByte("=!<>^~*%&|$@#?:;/\\'`{}", s[j]) >= 0 {
				j++
			}
			if j == i {
				r, _ := utf8.DecodeRuneInString(s[i:])
				return &FilterError{col, fmt.Sprintf("unexpected %q", r)}
			}
			p.toks = append(p.toks, ftoken{tPunct, s[i:j], col})
			i = j
		}
	}
	p.toks = append(p.toks, ftoken{tEOF, "", len(s) + 1})
	return nil
}

func (p *fparser) peek() ftoken { return p.toks[p.pos] }
func (p *fparser) next() ftoken {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func isKeyword(t ftoken, kw string) bool { return t.kind == tWord && strings.EqualFold(t.text, kw) }

var keywords = []string{"and", "or", "not", "in", "exists", "true", "false"}

func (p *fparser) or(depth int) (fnode, error) {
	l, err := p.and(depth)
	if err != nil {
		return l, err
	}
	for isKeyword(p.peek(), "or") {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return r, err
		}
		l = fnode{op: "or", kids: []fnode{l, r}}
	}
	return l, nil
}

func (p *fparser) and(depth int) (fnode, error) {
	l, err := p.unary(depth)
	if err != nil {
		return l, err
	}
	for isKeyword(p.peek(), "and") {
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return r, err
		}
		l = fnode{op: "and", kids: []fnode{l, r}}
	}
	return l, nil
}

func (p *fparser) unary(depth int) (fnode, error) {
	t := p.peek()
	if depth >= maxFilterDepth {
		return fnode{}, p.errAt(t, "nested deeper than %d", maxFilterDepth)
	}
	switch {
	case isKeyword(t, "not"):
		p.next()
		k, err := p.unary(depth + 1)
		return fnode{op: "not", kids: []fnode{k}}, err
	case t.kind == tPunct && t.text == "(":
		p.next()
		n, err := p.or(depth + 1)
		if err != nil {
			return n, err
		}
		if c := p.next(); c.kind != tPunct || c.text != ")" {
			return n, p.errAt(c, "expected ) to close the ( of column %d, got %s", t.col, c)
		}
		return n, nil
	}
	return p.test()
}

func (p *fparser) test() (fnode, error) {
	t := p.next()
	if t.kind != tWord {
		return fnode{}, p.errAt(t, "expected a key, not, or (, got %s", t)
	}
	for _, kw := range keywords {
		if isKeyword(t, kw) {
			return fnode{}, p.errAt(t, "expected a key, got the keyword %s", strings.ToLower(t.text))
		}
	}
	key := strings.ToLower(t.text)
	o := p.peek()
	switch {
	case isKeyword(o, "exists"):
		p.next()
		return fnode{op: "exists", key: key}, nil
	case isKeyword(o, "in"):
		p.next()
		if b := p.next(); b.kind != tPunct || b.text != "[" {
			return fnode{}, p.errAt(b, "expected [ after in, got %s", b)
		}
		n := fnode{op: "in", key: key}
		for {
			v, err := p.value()
			if err != nil {
				return n, err
			}
			if len(n.vals) == maxInValues {
				return n, p.errAt(o, "in takes at most %d values", maxInValues)
			}
			n.vals = append(n.vals, v)
			c := p.next()
			if c.kind == tPunct && c.text == "]" {
				return n, nil
			}
			if c.kind != tPunct || c.text != "," {
				return n, p.errAt(c, "expected , or ] in the list of in (column %d), got %s", o.col, c)
			}
		}
	case o.kind == tPunct && o.text != "(" && o.text != ")" && o.text != "[" && o.text != "]" && o.text != ",":
		p.next()
		switch o.text {
		case "=", "!=", "<", "<=", ">", ">=", "^=":
		case "==":
			return fnode{}, p.errAt(o, "unknown operator \"==\": equality is =")
		default:
			return fnode{}, p.errAt(o, "unknown operator %q: want =, !=, <, <=, >, >=, ^=, in or exists", o.text)
		}
		vt := p.peek()
		v, err := p.value()
		if err != nil {
			return fnode{}, err
		}
		switch o.text {
		case "^=":
			if v.kind != kString && !(v.kind == kDate && vt.kind == tString) {
				return fnode{}, p.errAt(vt, "operator ^= takes a string, got a %s", kindName[v.kind])
			}
			v.kind = kString
		case "<", "<=", ">", ">=":
			if v.kind != kNumber && v.kind != kDate {
				return fnode{}, p.errAt(vt, "operator %s takes a number or a date, got a %s", o.text, kindName[v.kind])
			}
		}
		return fnode{op: o.text, key: key, vals: []fval{v}}, nil
	}
	// A bare key: key = true.
	return fnode{op: "=", key: key, vals: []fval{{kind: kBool, b: true}}}, nil
}

func (p *fparser) value() (fval, error) {
	t := p.next()
	switch {
	case t.kind == tString:
		if d, ok := parseDate(t.text); ok {
			return fval{kind: kDate, t: d, s: t.text}, nil
		}
		return fval{kind: kString, s: t.text}, nil
	case isKeyword(t, "true"), isKeyword(t, "false"):
		return fval{kind: kBool, b: strings.EqualFold(t.text, "true")}, nil
	case t.kind == tValue:
		if d, ok := parseDate(t.text); ok {
			return fval{kind: kDate, t: d, s: t.text}, nil
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fval{}, p.errAt(t, "malformed value %q: want a number, a date (2006-01-02 or RFC 3339), true, false or a \"string\"", t.text)
		}
		return fval{kind: kNumber, n: f}, nil
	case t.kind == tWord:
		return fval{}, p.errAt(t, "expected a value, got %s (a string is in double quotes)", t)
	}
	return fval{}, p.errAt(t, "expected a value, got %s", t)
}

// parseDate reads a date (2006-01-02, midnight UTC) or an RFC 3339 time,
// in ns since the epoch.
func parseDate(s string) (int64, bool) {
	if len(s) < 10 || s[4] != '-' {
		return 0, false
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.UnixNano(), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), true
	}
	return 0, false
}

// metaValue returns a stored metadata scalar as an fval.
func metaValue(v any) (fval, bool) {
	switch x := v.(type) {
	case string:
		if d, ok := parseDate(x); ok {
			return fval{kind: kDate, t: d, s: x}, true
		}
		return fval{kind: kString, s: x}, true
	case float64:
		return fval{kind: kNumber, n: x}, true
	case bool:
		return fval{kind: kBool, b: x}, true
	}
	return fval{}, false
}

// matches reports whether value v satisfies op with literal l.
func matches(op string, v, l fval) bool {
	if op == "^=" {
		return (v.kind == kString || v.kind == kDate) && strings.HasPrefix(v.s, l.s)
	}
	if v.kind != l.kind {
		return false
	}
	var c int
	switch v.kind {
	case kString:
		c = strings.Compare(v.s, l.s)
	case kBool:
		if v.b != l.b {
			c = 1
		}
	case kNumber:
		c = cmpOrdered(v.n, l.n)
	case kDate:
		c = cmpOrdered(v.t, l.t)
	}
	switch op {
	case "=", "in":
		return c == 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

func cmpOrdered[T float64 | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
