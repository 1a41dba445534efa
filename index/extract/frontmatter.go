package extract

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Front matter: what escurel reads, and how it fails closed.
//
// A Markdown or plain-text document may open with front matter: after an
// optional byte order mark and blank lines, a line "---" closed by "---"
// or "..." (YAML), or a line "+++" closed by "+++" (TOML), each line
// ending in LF or CRLF, trailing blanks ignored. Three keys are read,
// matched without regard to case: title, lang and sensitivity. In YAML the
// value is any string scalar (plain, quoted or block); in TOML, a basic
// ("…") or literal ('…') string at the top level, before any [table].
// sensitivity must be public, internal or restricted, exactly (lower case),
// white space around it aside.
//
// A sensitivity that a document declares and escurel cannot read must never
// make the document less restricted than declared, so every near miss
// fails with ErrFrontMatter, naming the line (the index keeps the document
// as failed, at restricted): a value that is not one of the three (wrong
// case, empty, null, a list, a map, a boolean), a repeated key, invalid
// YAML, and a line that declares a sensitivity-like key where it is not
// read: in front matter that is never closed, commented out, nested, at a
// misspelled or synonymous key (sensitivty, sensitivity_level, x-sensitivity,
// classification, confidential, clearance: any value but a public one;
// security, access, visibility, privacy: a value naming a restricted
// level), in a TOML [table], or, in a document without front matter, in
// its first block of lines (fences of four dashes, JSON, an HTML comment,
// "Sensitivity: restricted" as the first line). A sensitivity-like line in
// the body, past the first block, is text. A title or lang key that is
// misspelled is reported in Doc.Warnings.
//
// Every other top-level key whose value is a scalar (YAML string, number,
// boolean, timestamp; TOML string, number, boolean, date) or, in YAML, a
// list of scalars is metadata (Doc.Meta), its key lower-cased; other
// values, and keys that are not metadata keys, are reported in
// Doc.Warnings.

// Sensitivity levels front matter may declare (package index's Public,
// Internal and Restricted).
var sensitivityLevels = map[string]bool{"public": true, "internal": true, "restricted": true}

// frontMatter holds what the front matter says.
type frontMatter struct {
	Title, Lang, Sensitivity string
	Warnings                 []string
	Meta                     map[string]any // see Doc.Meta
}

// metaKey is the form of a metadata key: lower case letters, digits, _, -
// and ., starting with a letter or _.
var metaKey = regexp.MustCompile(`^[a-z_][a-z0-9_.-]*$`)

// builtinKeys are metadata keys escurel sets itself (package index's
// built-in fields); front matter does not set them.
var builtinKeys = map[string]bool{"source": true, "media_type": true, "language": true, "title": true, "ingested_at": true, "folder": true,
	"lang": true, "sensitivity": true}

// addMeta records a front-matter key's value as metadata, or warns why
// it is not: a key escurel sets itself, a key outside metaKey, a value
// that is neither a scalar nor a list of scalars.
func (fm *frontMatter) addMeta(n int, key string, v any, ok bool) {
	name := strings.ToLower(strings.TrimSpace(key))
	switch {
	case builtinKeys[name]:
		return
	case !metaKey.MatchString(name):
		fm.Warnings = append(fm.Warnings, fmt.Sprintf("front matter line %d: key %q is not metadata: a key is letters, digits, _, - and ., starting with a letter or _", n, key))
		return
	case !ok:
		fm.Warnings = append(fm.Warnings, fmt.Sprintf("front matter line %d: key %q is not metadata: its value is not a string, number, boolean, date or list of them", n, key))
		return
	}
	if fm.Meta == nil {
		fm.Meta = map[string]any{}
	}
	fm.Meta[name] = v
}

// yamlScalar returns a YAML scalar as metadata: a string, float64, bool
// or, for a timestamp, its text (a date is a string in date form).
func yamlScalar(n *yaml.Node) (any, bool) {
	if n.Kind != yaml.ScalarNode {
		return nil, false
	}
	switch n.Tag {
	case "!!str", "!!timestamp":
		return n.Value, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, false
		}
		return b, true
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		return f, true
	}
	return nil, false
}

// yamlMeta returns a YAML value as metadata: a scalar, or a list of
// scalars ([]any).
func yamlMeta(n *yaml.Node) (any, bool) {
	if n.Kind != yaml.SequenceNode {
		return yamlScalar(n)
	}
	list := make([]any, 0, len(n.Content))
	for _, c := range n.Content {
		v, ok := yamlScalar(c)
		if !ok {
			return nil, false
		}
		list = append(list, v)
	}
	return list, true
}

// tomlScalar reads a TOML string, boolean, number or date as metadata.
func tomlScalar(v string) (any, bool) {
	if s, ok := tomlString(v); ok {
		return s, true
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	switch v {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	if f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f, true
	}
	if isDateText(v) {
		return v, true
	}
	return nil, false
}

// isDateText reports whether s is a date (2006-01-02) or an RFC 3339 time.
func isDateText(s string) bool {
	if _, err := time.Parse("2006-01-02", s); err == nil {
		return true
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// line is one line of a document: its number (from 1), its text without
// the line ending, and the offset of the next line.
type line struct {
	n    int
	text string
	next int
}

// lines splits data[off:] into lines; the first is line first.
func lines(data []byte, off, first int) []line {
	var out []line
	for pos, n := off, first; pos < len(data); n++ {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			end, next = pos+end, pos+end+1
		} else {
			end = len(data)
		}
		out = append(out, line{n, strings.TrimSuffix(string(data[pos:end]), "\r"), next})
		pos = next
	}
	return out
}

// parseFrontMatter reads front matter starting at off (past a byte order
// mark). It returns the offset where the body starts: past the closing
// line, or off when there is no front matter. Two "---" lines around
// nothing but YAML comments are Markdown (a heading between thematic
// breaks), not front matter. Errors wrap ErrFrontMatter and name a line.
func parseFrontMatter(data []byte, off int) (frontMatter, int, error) {
	ls := lines(data, off, 1)
	i := 0
	for i < len(ls) && strings.TrimSpace(ls[i].text) == "" {
		i++
	}
	if i == len(ls) {
		return frontMatter{}, off, nil
	}
	open := strings.TrimRight(ls[i].text, " \t")
	if open != "---" && open != "+++" {
		// No front matter: its first block of lines must not look like
		// one.
		j := i
		for j < len(ls) && strings.TrimSpace(ls[j].text) != "" {
			j++
		}
		return frontMatter{}, off, scanDeclarations(ls[i:j], 0, true, "")
	}
	j := i + 1
	for ; j < len(ls); j++ {
		t := strings.TrimRight(ls[j].text, " \t")
		if t == open || (open == "---" && t == "...") {
			break
		}
	}
	if j == len(ls) {
		// Never closed: Markdown, unless it declares a sensitivity.
		return frontMatter{}, off, scanDeclarations(ls[i+1:], 0, false,
			fmt.Sprintf("line %d opens front matter (%s) that is never closed; ", ls[i].n, open))
	}
	block := ls[i+1 : j]
	var fm frontMatter
	var accepted int
	var err error
	isFM := true
	if open == "+++" {
		fm, accepted, err = parseTOML(block)
	} else {
		start := ls[i].next
		end := start
		if len(block) > 0 {
			end = block[len(block)-1].next
		}
		fm, accepted, isFM, err = parseYAML(data[start:end], ls[i].n+1)
	}
	if err != nil {
		return frontMatter{}, off, err
	}
	if err := scanDeclarations(block, accepted, false, ""); err != nil {
		return frontMatter{}, off, err
	}
	if !isFM {
		return frontMatter{}, off, nil
	}
	return fm, ls[j].next, nil
}

// yamlLine finds the line numbers in yaml.v3's error messages.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// parseYAML reads YAML front matter whose first line is line first of the
// file. accepted is the line of the sensitivity key read (0 if none);
// isFM is false when the text holds only comments.
func parseYAML(text []byte, first int) (fm frontMatter, accepted int, isFM bool, err error) {
	var root yaml.Node
	if err := yaml.Unmarshal(text, &root); err != nil {
		msg := yamlLine.ReplaceAllStringFunc(strings.TrimPrefix(err.Error(), "yaml: "), func(s string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(s, "line "))
			return fmt.Sprintf("line %d", n+first-1)
		})
		if !strings.HasPrefix(msg, "line ") {
			msg = fmt.Sprintf("line %d: %s", first, msg)
		}
		return fm, 0, false, fmt.Errorf("%w: %s (YAML)", ErrFrontMatter, msg)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		// Empty front matter, or comments alone (Markdown).
		return fm, 0, len(bytes.TrimSpace(text)) == 0, nil
	}
	m := root.Content[0]
	at := func(n *yaml.Node) int { return n.Line + first - 1 }
	if m.Kind != yaml.MappingNode {
		return fm, 0, false, fmt.Errorf("%w: line %d: front matter is not a mapping of keys (key: value)", ErrFrontMatter, at(m))
	}
	seen := map[string]int{}
	for k := 0; k+1 < len(m.Content); k += 2 {
		key, val := m.Content[k], m.Content[k+1]
		name := strings.ToLower(strings.TrimSpace(key.Value))
		if prev, dup := seen[name]; dup {
			return fm, 0, false, fmt.Errorf("%w: line %d: key %q repeats the key of line %d", ErrFrontMatter, at(key), key.Value, prev)
		}
		seen[name] = at(key)
		str := val.Kind == yaml.ScalarNode && val.Tag == "!!str"
		switch name {
		case "title", "lang":
			if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
				return fm, 0, false, fmt.Errorf("%w: line %d: %s must be text", ErrFrontMatter, at(key), name)
			}
			if name == "title" {
				fm.Title = val.Value
			} else {
				fm.Lang = val.Value
			}
		case "sensitivity":
			v := strings.TrimSpace(val.Value)
			if !str || !sensitivityLevels[v] {
				return fm, 0, false, badSensitivity(at(key), key.Value, yamlShow(val))
			}
			fm.Sensitivity, accepted = v, at(key)
		default:
			fm.Warnings = appendKeyWarning(fm.Warnings, at(key), key.Value)
			v, ok := yamlMeta(val)
			fm.addMeta(at(key), key.Value, v, ok)
		}
	}
	return fm, accepted, true, nil
}

// yamlShow returns a value as the reason quotes it.
func yamlShow(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return "no value"
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		return strconv.Quote(n.Value)
	case n.Kind == yaml.ScalarNode:
		return n.Value + " (" + strings.TrimPrefix(n.Tag, "!!") + ")"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	}
	return "a mapping"
}

func badSensitivity(n int, key, shown string) error {
	return fmt.Errorf("%w: line %d: %s is %s: want public, internal or restricted, in lower case (failing closed: the document is not indexed)",
		ErrFrontMatter, n, key, shown)
}

// parseTOML reads the top-level keys of TOML front matter; other lines
// are not checked (only the sensitivity-like ones, by scanDeclarations).
func parseTOML(block []line) (fm frontMatter, accepted int, err error) {
	table := ""
	seen := map[string]int{}
	for _, l := range block {
		t := strings.TrimSpace(l.text)
		switch {
		case t == "" || t[0] == '#':
			continue
		case t[0] == '[':
			table = t
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || table != "" {
			continue
		}
		key := strings.TrimSpace(k)
		if uq, ok := tomlString(key); ok {
			key = uq
		}
		name := strings.ToLower(key)
		if prev, dup := seen[name]; dup {
			return fm, 0, fmt.Errorf("%w: line %d: key %q repeats the key of line %d", ErrFrontMatter, l.n, key, prev)
		}
		seen[name] = l.n
		s, isStr := tomlString(strings.TrimSpace(v))
		switch name {
		case "title":
			if isStr {
				fm.Title = s
			}
		case "lang":
			if isStr {
				fm.Lang = s
			}
		case "sensitivity":
			s = strings.TrimSpace(s)
			if !isStr || !sensitivityLevels[s] {
				shown := strings.TrimSpace(v)
				if isStr {
					shown = strconv.Quote(s)
				}
				return fm, 0, badSensitivity(l.n, key, shown)
			}
			fm.Sensitivity, accepted = s, l.n
		default:
			fm.Warnings = appendKeyWarning(fm.Warnings, l.n, key)
			v, ok := tomlScalar(strings.TrimSpace(v))
			fm.addMeta(l.n, key, v, ok)
		}
	}
	return fm, accepted, nil
}

// tomlString reads a TOML basic string without escapes or a literal
// string, followed by nothing but a comment.
func tomlString(v string) (string, bool) {
	if len(v) < 2 || (v[0] != '"' && v[0] != '\'') {
		return "", false
	}
	end := strings.IndexByte(v[1:], v[0])
	if end < 0 {
		return "", false
	}
	s, rest := v[1:1+end], strings.TrimSpace(v[2+end:])
	if (v[0] == '"' && strings.ContainsRune(s, '\\')) || (rest != "" && rest[0] != '#') {
		return "", false
	}
	return s, true
}

// appendKeyWarning reports a key that resembles title or lang.
func appendKeyWarning(ws []string, n int, key string) []string {
	norm := letters(key)
	switch {
	case norm == "language" || norm == "languages" || norm == "locale" || norm == "lng" || norm == "langauge",
		norm != "title" && editDistance(norm, "title") <= 1:
		want := "lang"
		if editDistance(norm, "title") <= 1 {
			want = "title"
		}
		return append(ws, fmt.Sprintf("front matter line %d: key %q is not read; did you mean %s?", n, key, want))
	}
	return ws
}

// scanDeclarations fails on the first line of ls, other than line skip,
// that declares a sensitivity-like key (see the package's front-matter
// rules). prefix starts the reason. In prose (the first block of a
// document without front matter) a key starts a line, or follows "{", or
// follows "," in a line that opens with "{" (JSON): the middle of a
// sentence ("…, in an insensitive manner: …") declares nothing.
func scanDeclarations(ls []line, skip int, prose bool, prefix string) error {
	for _, l := range ls {
		if l.n == skip {
			continue
		}
		for _, pos := range keyPositions(l.text) {
			if prose && pos > 0 && l.text[pos-1] == ',' && !strings.HasPrefix(strings.TrimSpace(l.text), "{") {
				continue
			}
			key, val, ok := declaration(l.text[pos:])
			if !ok || prose && strings.Contains(key, " ") && !slices.Contains(strongKeys, letters(key)) {
				continue // in prose, two words are a phrase unless they name a sensitivity ("security level")
			}
			if why := sensitivityLike(key, val); why != "" {
				return fmt.Errorf("%w: %sline %d: %s (failing closed: the document is not indexed; escurel reads sensitivity: public, internal or restricted, as a top-level front-matter key)",
					ErrFrontMatter, prefix, l.n, why)
			}
		}
	}
	return nil
}

// keyPositions returns where a key may start in a line: at its start, and
// after each "{" and "," (YAML flow mappings, JSON).
func keyPositions(s string) []int {
	pos := []int{0}
	for i := 0; i < len(s); i++ {
		if s[i] == '{' || s[i] == ',' {
			pos = append(pos, i+1)
		}
	}
	return pos
}

// declaration reads "key: value" or "key = value" at the start of s,
// past markup (comment signs, list and quote markers, emphasis, an HTML
// comment's opening) and quotes around the key.
func declaration(s string) (key, val string, ok bool) {
	s = strings.TrimLeft(s, " \t#*->_<!`[|/;")
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		s = s[1:]
	}
	end := 0
	for end < len(s) && end < 64 {
		c := rune(s[end])
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_' || c == '-' || c == '.' || c == ' ') {
			break
		}
		end++
	}
	key = strings.TrimSpace(s[:end])
	if strings.Count(key, " ") > 1 {
		return "", "", false // prose, not a key
	}
	rest := strings.TrimLeft(s[end:], "\"'*_` \t")
	if key == "" || rest == "" || (rest[0] != ':' && rest[0] != '=') {
		return "", "", false
	}
	val = strings.TrimSpace(rest[1:])
	val = strings.TrimSpace(strings.TrimSuffix(val, "-->"))
	val = strings.Trim(val, "\"'{}[], \t*_`")
	return key, val, true
}

// Keys that name a sensitivity in other vocabularies: strong ones fail
// with any value but a public one; weak ones (common words) only with a
// value that names a restricted level.
var (
	strongKeys = []string{"classification", "classified", "confidential", "clearance", "secrecy", "protectivemarking", "securitylevel", "accesslevel"}
	weakKeys   = map[string]bool{"security": true, "access": true, "visibility": true, "privacy": true, "restricted": true,
		"restriction": true, "restrictions": true, "tlp": true, "audience": true, "distribution": true}
	publicValues     = map[string]bool{"": true, "public": true, "none": true, "unclassified": true, "open": true, "false": true, "no": true, "tlp:white": true, "tlp:clear": true}
	restrictiveWords = []string{"restricted", "internal", "confidential", "secret", "private", "classified", "sensitive", "need to know", "red", "amber", "true", "yes", "staff"}
)

// sensitivityLike says why a key with its value is a sensitivity that
// escurel does not read, or "" when it is not one.
func sensitivityLike(key, val string) string {
	norm, lv := letters(key), strings.ToLower(val)
	switch {
	case norm == "sensitivity":
		return fmt.Sprintf("key %q declares a sensitivity where it is not read", key)
	case strings.Contains(norm, "sensitiv") && !strings.HasPrefix(norm, "insensitiv") || editDistance(norm, "sensitivity") <= 2:
		return fmt.Sprintf("key %q resembles sensitivity and is not read", key)
	case weakKeys[norm]:
		for _, w := range restrictiveWords {
			if containsWord(lv, w) {
				return fmt.Sprintf("key %q says %q, a sensitivity escurel does not read", key, val)
			}
		}
		return ""
	}
	for _, s := range strongKeys {
		if strings.Contains(norm, s) && !publicValues[lv] {
			return fmt.Sprintf("key %q says %q, a sensitivity escurel does not read", key, val)
		}
	}
	return ""
}

// containsWord reports whether w occurs in s between non-letters.
func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		a, b := i+j, i+j+len(w)
		if (a == 0 || !isLetter(s[a-1])) && (b == len(s) || !isLetter(s[b])) {
			return true
		}
		i = a + 1
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// letters returns s lower-cased with everything but letters removed.
func letters(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and transpositions of
// adjacent bytes ("titel" is 1 from "title").
func editDistance(a, b string) int {
	if a == b {
		return 0
	}
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(a)][len(b)]
}
