package blobstore

// Blob store URLs: opened as escurel reads them, fit to print, and compared
// by what they name.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"gocloud.dev/blob"
)

// redactedValue replaces a secret in a printed URL.
const redactedValue = "xxxxx"

// secretParam reports whether a URL query parameter may carry a secret:
// its name, case-folded, holds one of these words (an access key or its
// secret, a password, a token, a SAS or a request signature). Fails
// closed: a parameter that merely looks like one is hidden too.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "password", "passwd", "pwd", "token", "key", "sig", "credential", "sas", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// queryPair is one key=value pair of a raw URL query, as given (raw)
// and unescaped.
type queryPair struct {
	sep            string // the separator before it: "", "&" or ";"
	rawKey, rawVal string
	key, val       string
	hasValue       bool // an "=" follows the key
}

// splitQuery splits a raw URL query on "&" and ";" (url.Query drops a
// pair holding ";", gocloud's drivers may not) and unescapes each key and
// value. ok is false when an escape does not parse: the query must then
// be treated as a whole.
func splitQuery(raw string) (pairs []queryPair, ok bool) {
	sep := ""
	for raw != "" || sep != "" {
		i := strings.IndexAny(raw, "&;")
		part, next := raw, ""
		if i >= 0 {
			part, next = raw[:i], raw[i:i+1]
			raw = raw[i+1:]
		} else {
			raw = ""
		}
		p := queryPair{sep: sep}
		p.rawKey, p.rawVal, p.hasValue = strings.Cut(part, "=")
		var errK, errV error
		p.key, errK = url.QueryUnescape(p.rawKey)
		p.val, errV = url.QueryUnescape(p.rawVal)
		if errK != nil || errV != nil {
			return nil, false
		}
		pairs = append(pairs, p)
		sep = next
		if next == "" {
			break
		}
	}
	return pairs, true
}

// secrets returns the secrets urlstr holds, each as given and unescaped:
// its user information (name and password), the value of every query
// parameter secretParam names, a bare query key (no value), the user
// information of a query value that has one, and the same of any query
// value that is itself a URL (an endpoint). When the query does not parse
// cleanly every value in it counts as a secret.
func secrets(urlstr string) []string {
	u, err := url.Parse(urlstr)
	if err != nil {
		return nil
	}
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	if u.User != nil {
		p, _ := u.User.Password()
		add(u.User.Username(), p)
	}
	if u.Opaque != "" {
		add(u.Opaque)
	}
	add(u.Fragment, u.RawFragment)
	pairs, ok := splitQuery(u.RawQuery)
	if !ok {
		for _, part := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
			_, v, _ := strings.Cut(part, "=")
			add(v)
		}
		return out
	}
	for _, p := range pairs {
		switch {
		case !p.hasValue:
			add(p.rawKey, p.key)
		case secretParam(p.key):
			add(p.rawVal, p.val)
		case strings.Contains(p.val, "://"):
			add(secrets(p.val)...)
		case strings.Contains(p.val, "@"):
			add(p.val[:strings.LastIndex(p.val, "@")])
		}
	}
	return out
}

// Redact returns urlstr fit to print in a message, a log or a status
// answer. The URL is rebuilt, not scrubbed: its user information (name
// and password) becomes "xxxxx", as does the value of every query
// parameter whose name, unescaped, suggests a secret (key, secret, token,
// password, sig, sas, credential, auth), a bare query key without a
// value, the user information of a query value, and the same parts of a
// query value that is itself a URL (an endpoint), however they are
// escaped. The query is split on "&" and ";"; one with an escape that
// does not parse is printed as "?xxxxx" whole. A fragment, and the
// opaque part of a URL without "//", print as "xxxxx". The rest (scheme,
// host or bucket, path, the other parameters as given) stays, so the
// message still says which store. A string that does not parse as a URL
// is not printed at all: "(not a URL)".
func Redact(urlstr string) string {
	u, err := url.Parse(urlstr)
	if err != nil {
		return "(not a URL)"
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme + ":")
	}
	if u.Opaque != "" {
		b.WriteString(redactedValue)
	} else {
		if u.Scheme != "" || u.Host != "" || u.User != nil {
			b.WriteString("//")
		}
		if u.User != nil && u.User.String() != "" {
			b.WriteString(redactedValue + "@")
		}
		b.WriteString(u.Host)
		b.WriteString(u.EscapedPath())
	}
	if u.ForceQuery || u.RawQuery != "" {
		b.WriteString("?" + redactQuery(u.RawQuery))
	}
	if u.Fragment != "" || u.RawFragment != "" {
		b.WriteString("#" + redactedValue)
	}
	return b.String()
}

// redactQuery returns the raw query q with its secrets replaced (see
// Redact), or "xxxxx" when it does not parse cleanly.
func redactQuery(q string) string {
	pairs, ok := splitQuery(q)
	if !ok {
		return redactedValue
	}
	var b strings.Builder
	for _, p := range pairs {
		b.WriteString(p.sep)
		switch {
		case !p.hasValue:
			if p.rawKey != "" {
				b.WriteString(redactedValue)
			}
			continue
		case secretParam(p.key):
			b.WriteString(p.rawKey + "=" + redactedValue)
		case strings.Contains(p.val, "://"):
			r := Redact(p.val)
			if r == "(not a URL)" {
				r = redactedValue
			}
			b.WriteString(p.rawKey + "=" + url.QueryEscape(r))
		case strings.Contains(p.val, "@"):
			at := strings.LastIndex(p.val, "@")
			b.WriteString(p.rawKey + "=" + url.QueryEscape(redactedValue+p.val[at:]))
		default:
			b.WriteString(p.rawKey + "=" + p.rawVal)
		}
	}
	return b.String()
}

// hexEscape matches a percent escape, to match escapes case-insensitively.
var hexEscape = regexp.MustCompile(`%[0-9A-Fa-f]{2}`)

// scrub returns msg (an error text from gocloud, which may quote urlstr
// in any form) with every secret of urlstr replaced by "xxxxx": each as
// given in the URL, unescaped, query-escaped, path-escaped and
// double-escaped, percent escapes matched in either case.
func scrub(msg, urlstr string) string {
	s := secrets(urlstr)
	var forms []string
	for _, v := range s {
		forms = append(forms, v, url.QueryEscape(v), url.PathEscape(v), url.QueryEscape(url.QueryEscape(v)))
	}
	// Longer first, so a secret that contains another goes whole.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	for _, f := range forms {
		if f == "" {
			continue
		}
		pat := regexp.QuoteMeta(f)
		pat = hexEscape.ReplaceAllStringFunc(pat, func(e string) string { return "(?i:" + e + ")" })
		msg = regexp.MustCompile(pat).ReplaceAllLiteralString(msg, redactedValue)
	}
	return msg
}

// urlError is an error whose message had a URL's secrets scrubbed; it
// still wraps the original for errors.Is and errors.As.
type urlError struct {
	msg string
	err error
}

func (e *urlError) Error() string { return e.msg }
func (e *urlError) Unwrap() error { return e.err }

// scrubError returns err with urlstr's secrets scrubbed from its message.
func scrubError(err error, urlstr string) error {
	if err == nil {
		return nil
	}
	msg := scrub(err.Error(), urlstr)
	if msg == err.Error() {
		return err
	}
	return &urlError{msg: msg, err: err}
}

// SameURL reports whether the blob store URLs a and b name the same
// store, as OpenBucket opens them (a path after an object store's bucket
// is its prefix=, file:// URLs get their default parameters): equal
// scheme, host (case-insensitive), user information, path (a trailing
// slash aside) and query parameters, whatever their order. A URL that
// does not open (unparsable, a path and prefix= both, a bad escape or a
// ";" in its query) is the same only as the identical string.
func SameURL(a, b string) bool {
	if a == b {
		return true
	}
	ua, errA := bucketURL(a)
	ub, errB := bucketURL(b)
	if errA != nil || errB != nil {
		return false
	}
	qa, okA := queryValues(a, ua)
	qb, okB := queryValues(b, ub)
	if !okA || !okB {
		return false
	}
	return ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host) &&
		ua.User.String() == ub.User.String() &&
		strings.TrimSuffix(ua.Path, "/") == strings.TrimSuffix(ub.Path, "/") &&
		qa.Encode() == qb.Encode()
}

// queryValues returns the query parameters of u (urlstr after bucketURL);
// ok is false when urlstr's own query holds a ";" or a bad escape (which
// url.Query would drop silently).
func queryValues(urlstr string, u *url.URL) (url.Values, bool) {
	if o, err := url.Parse(urlstr); err != nil || strings.Contains(o.RawQuery, ";") {
		return nil, false
	}
	pairs, ok := splitQuery(u.RawQuery)
	if !ok {
		return nil, false
	}
	q := url.Values{}
	for _, p := range pairs {
		if p.rawKey != "" || p.hasValue {
			q.Add(p.key, p.val)
		}
	}
	return q, true
}

// parseError is url.Parse's error without the URL it quotes (which may
// hold a secret).
func parseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// pathAsPrefix returns u with the path of an object store URL moved into
// gocloud's prefix parameter (a directory: it ends in "/"). file:// and
// mem:// URLs, and those without a path, are returned as they are.
func pathAsPrefix(u *url.URL) (*url.URL, error) {
	if u.Scheme == "file" || u.Scheme == "mem" || strings.Trim(u.Path, "/") == "" {
		return u, nil
	}
	q := u.Query()
	if q.Has("prefix") {
		return nil, fmt.Errorf("both a path (%s) and prefix=%s: give the key prefix one way", u.Path, q.Get("prefix"))
	}
	c := *u
	q.Set("prefix", strings.Trim(u.Path, "/")+"/")
	c.Path, c.RawPath, c.RawQuery = "", "", q.Encode()
	return &c, nil
}

// OpenBucket opens the gocloud bucket at urlstr as escurel's commands read
// bucket URLs (the blob store, publish targets, replicas). For an object
// store (s3://, gs://, azblob://, …) a path after the bucket is a key
// prefix: s3://bucket/team/docs?region=… is s3://bucket?prefix=team/docs/&region=…
// (gocloud's drivers would ignore the path and write at the bucket's
// root); giving both a path and prefix= is an error. For file:// URLs the
// directory is created when missing and the query parameters create_dir,
// no_tmp_dir (temporary files beside their final name, so the rename never
// crosses devices) and metadata=skip (no sidecar attribute files) are added
// unless present, and dir_file_mode=0700: the bucket is private to its
// owner, directories 0700 and objects 0600 (an object may hold a
// restricted document's bytes). Errors name the URL without its secrets
// (Redact), and never the secrets themselves.
func OpenBucket(ctx context.Context, urlstr string) (*blob.Bucket, error) {
	u, err := bucketURL(urlstr)
	if err != nil {
		return nil, fmt.Errorf("open bucket: %w", err)
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", Redact(urlstr), scrubError(err, urlstr))
	}
	return b, nil
}

// bucketURL is urlstr as gocloud opens it (see OpenBucket).
func bucketURL(urlstr string) (*url.URL, error) {
	u, err := url.Parse(urlstr)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", parseError(err))
	}
	if u, err = pathAsPrefix(u); err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(urlstr), err)
	}
	if u.Scheme == "file" {
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "1", "no_tmp_dir": "1", "metadata": "skip", "dir_file_mode": "0700"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
	}
	return u, nil
}
