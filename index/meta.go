package index

// Document metadata: front-matter keys, the caller's (Input.Meta), and the
// built-in fields every document has. See filter.go for how searches use it.

import (
	"encoding/json"
	"fmt"
	"math"

	"reflect"

	"github.com/escurel/escurel/blobstore"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Built-in metadata fields: every document has them, and neither front
// matter nor Input.Meta may set them.
const (
	MetaSource     = "source"      // Input.Source
	MetaMediaType  = "media_type"  // e.g. "text/markdown"
	MetaLanguage   = "language"    // BCP 47 tag
	MetaTitle      = "title"       // the document's title
	MetaIngestedAt = "ingested_at" // a date: when this version was ingested
	// MetaFolder is the source up to and including its last "/" (its
	// directory, for prefix filters: folder ^= "/docs/guide/"); "" for a
	// source without one.
	MetaFolder = "folder"
)

// builtinMeta lists the built-in fields, and the reserved keys that are
// not metadata (front-matter lang and sensitivity).
var builtinMeta = map[string]bool{MetaSource: true, MetaMediaType: true, MetaLanguage: true, MetaTitle: true,
	MetaIngestedAt: true, MetaFolder: true, "lang": true, "sensitivity": true}

// metaKeyRE is the form of a metadata key.
var metaKeyRE = regexp.MustCompile(`^[a-z_][a-z0-9_.-]*$`)

// MaxMetaBytes bounds the JSON of one document's Input.Meta.
const MaxMetaBytes = 64 << 10

// CheckMeta returns meta in the form escurel stores (a copy): each value a
// string, float64, bool or []any of those; a time.Time becomes its RFC 3339
// text (a string in date form, 2006-01-02 or RFC 3339, is a date); ints
// become float64. Errors name the key: a key not of lower-case letters,
// digits, _, - and . starting with a letter or _, a built-in key, a value
// of another type (a map, a nested list, NaN), or JSON over MaxMetaBytes.
// nil or empty gives nil.
func CheckMeta(meta map[string]any) (map[string]any, error) {
	if len(meta) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(meta))
	for k, v := range meta {
		switch {
		case builtinMeta[k]:
			return nil, fmt.Errorf("meta key %q: a built-in field (source, media_type, language, title, ingested_at, folder) or reserved key (lang, sensitivity)", k)
		case !metaKeyRE.MatchString(k):
			return nil, fmt.Errorf("meta key %q: want lower-case letters, digits, _, - and ., starting with a letter or _", k)
		}
		n, err := normMeta(v, true)
		if err != nil {
			return nil, fmt.Errorf("meta key %q: %w", k, err)
		}
		out[k] = n
	}
	if b, _ := json.Marshal(out); len(b) > MaxMetaBytes {
		return nil, fmt.Errorf("meta: %d bytes of JSON, over %d (index.MaxMetaBytes)", len(b), MaxMetaBytes)
	}
	return out, nil
}

// normMeta returns a value in stored form; lists only when list is true.
func normMeta(v any, list bool) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return x, nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return normMeta(f, list)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("number %v: want a finite number", x)
		}
		return x, nil
	case float32:
		return normMeta(float64(x), list)
	case nil:
		return nil, fmt.Errorf("no value (null)")
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), nil
	case reflect.Slice, reflect.Array:
		if !list {
			return nil, fmt.Errorf("a list inside a list: want scalars")
		}
		out := make([]any, rv.Len())
		for i := range out {
			e, err := normMeta(rv.Index(i).Interface(), false)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %T: want a string, number, boolean, date or a list of them", v)
}

// ParseMetaArgs reads "key=value" arguments (the CLI's --meta) into
// metadata: a value true or false is a boolean, a number is a number, a
// date (2006-01-02 or RFC 3339) is a date, a value in double quotes is the
// string inside them (Go syntax), anything else is a string. A key given
// more than once is a list. Errors name the argument.
func ParseMetaArgs(args []string) (map[string]any, error) {
	if len(args) == 0 {
		return nil, nil
	}
	out := map[string]any{}

	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("meta %q: want key=value", a)
		}
		k = strings.TrimSpace(k)
		val, err := metaArgValue(v)
		if err != nil {
			return nil, fmt.Errorf("meta %q: %w", a, err)
		}
		switch prev := out[k].(type) {
		case nil:
			out[k] = val

		case []any:
			out[k] = append(prev, val)
		default:
			out[k] = []any{prev, val}
		}
	}
	return CheckMeta(out)
}

func metaArgValue(v string) (any, error) {
	switch {
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("quoted value: %w", err)
		}
		return s, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f, nil
	}
	return v, nil
}

// recordMeta is a record's Meta from stored JSON ("{}" for none).
func recordMeta(s string) blobstore.Meta {
	if s == "{}" {
		return ""
	}
	return blobstore.Meta(s)
}

// givenJSON is the stored JSON of a record's Meta.
func givenJSON(m blobstore.Meta) string {
	if m == "" {
		return "{}"
	}
	return string(m)
}

// metaJSON is the stored JSON of metadata: "{}" for none, keys sorted.
func metaJSON(m map[string]any) string {
	if len(m) == 0 {
		return "{}"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "{}" // CheckMeta's values always marshal
	}
	return string(b)
}

// parseMetaJSON reads metadata stored by metaJSON; nil for none.
func parseMetaJSON(s string) (map[string]any, error) {
	if s == "" || s == "{}" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("metadata %q: %w", s, err)
	}
	return m, nil
}

// mergeMeta returns the document's metadata (front matter) overridden,
// key by key, by the caller's; nil when both are empty.
func mergeMeta(doc, given map[string]any) map[string]any {
	if len(doc) == 0 && len(given) == 0 {
		return nil
	}
	out := make(map[string]any, len(doc)+len(given))
	for k, v := range doc {
		out[k] = v
	}
	for k, v := range given {
		out[k] = v
	}
	return out
}

// folderOf is the built-in folder of a source.
func folderOf(source string) string {
	s := strings.ReplaceAll(source, "\\", "/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i+1]
	}
	return ""
}

// metaKeys returns m's keys, sorted.
func metaKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// storedMeta merges the two stored metadata columns (documents.meta,
// documents.meta_given) as a document's metadata; nil when none.
func storedMeta(meta, given string) (map[string]any, error) {
	fm, err := parseMetaJSON(meta)
	if err != nil {
		return nil, err
	}
	gv, err := parseMetaJSON(given)
	if err != nil {
		return nil, err
	}
	return mergeMeta(fm, gv), nil
}

// MetaJSON is metadata as a JSON object in canonical form (keys sorted),
// so that values holding it compare with ==; "" is none. It marshals as
// the object itself.
type MetaJSON string

// MarshalJSON writes the object (null for none).
func (m MetaJSON) MarshalJSON() ([]byte, error) {
	if m == "" {
		return []byte("null"), nil
	}
	return []byte(m), nil
}

// Map decodes the object; nil for none.
func (m MetaJSON) Map() (map[string]any, error) { return parseMetaJSON(string(m)) }
