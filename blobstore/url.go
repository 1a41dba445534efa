package blobstore

// Blob store URLs fit to print, and compared by what they name.

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
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

// secrets returns the secrets urlstr holds: the password of its user
// information, the value of every query parameter secretParam names, and
// the same of any query value that is itself a URL (an endpoint).
func secrets(urlstr string) []string {
	u, err := url.Parse(urlstr)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p)
		}
	}
	for k, vs := range u.Query() {
		for _, v := range vs {
			if v == "" {
				continue
			}
			if secretParam(k) {
				out = append(out, v)
			} else if strings.Contains(v, "://") {
				out = append(out, secrets(v)...)
			}
		}
	}
	return out
}

// Redact returns urlstr fit to print in a message, a log or a status
// answer: a password in the user information, and the value of every
// query parameter whose name suggests a secret (key, secret, token,
// password, sig, sas, credential, auth), are replaced by "xxxxx", as are
// those of a query value that is itself a URL (an endpoint). The rest
// (scheme, bucket, prefix, region, endpoint host) stays, so the message
// still says which store. A string that does not parse as a URL is not
// printed at all: "(not a URL)".
func Redact(urlstr string) string {
	if _, err := url.Parse(urlstr); err != nil {
		return "(not a URL)"
	}
	return scrub(urlstr, urlstr)
}

// scrub returns msg with every secret of urlstr (as given, and
// query-escaped or path-escaped, as an error message may quote it)
// replaced by "xxxxx".
func scrub(msg, urlstr string) string {
	s := secrets(urlstr)
	// Longer first, so a secret that contains another goes whole.
	sort.Slice(s, func(i, j int) bool { return len(s[i]) > len(s[j]) })
	for _, v := range s {
		for _, form := range []string{url.QueryEscape(v), url.PathEscape(v), url.QueryEscape(url.QueryEscape(v)), v} {
			msg = strings.ReplaceAll(msg, form, redactedValue)
		}
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
// store: equal scheme, host (case-insensitive), user information, path
// (a trailing slash aside) and query parameters, whatever the order of
// the parameters. An unparsable URL is the same only as the identical
// string.
func SameURL(a, b string) bool {
	if a == b {
		return true
	}
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	return ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host) &&
		ua.User.String() == ub.User.String() &&
		strings.TrimSuffix(ua.Path, "/") == strings.TrimSuffix(ub.Path, "/") &&
		ua.Query().Encode() == ub.Query().Encode()
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
