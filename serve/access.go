package serve

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/escurel/escurel/index"
)

// Caller is who makes a request, as its bearer token says: a name for the
// access log, the highest sensitivity it may read, and whether it may
// write. A request without a token is Anonymous.
type Caller struct {
	Name      string `json:"name"`
	Clearance string `json:"clearance"` // index.Public, index.Internal or index.Restricted
	Write     bool   `json:"write"`
}

// Anonymous is the caller of a request without a bearer token: public
// clearance, read-only.
var Anonymous = Caller{Name: "anonymous", Clearance: index.Public}

// Tokens maps bearer tokens to callers. The zero value knows no token, so
// every caller is Anonymous. Tokens is read-only once built and safe for
// concurrent use.
type Tokens struct {
	// byHash is keyed by the SHA-256 of a token, so that a lookup's time
	// does not depend on how much of a guess matches a real token.
	byHash map[[32]byte]Caller
}

// tokenEntry is one entry of a tokens file.
type tokenEntry struct {
	Token     string `json:"token"`
	Name      string `json:"name"`
	Clearance string `json:"clearance"`
	Write     bool   `json:"write"`
}

// LoadTokens reads a tokens file: a JSON array of objects with "token"
// (the bearer token, at least 16 bytes), "name" (for the access log),
// "clearance" (public, internal or restricted; default public) and "write"
// (default false):
//
//	[{"token": "…", "name": "support-bot", "clearance": "internal"}]
//
// A token listed twice, an empty name or an unknown clearance is an error
// naming the entry. The file should be readable by the server's user only;
// LoadTokens does not check its mode.
func LoadTokens(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	t, err := ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return t, nil
}

// ParseTokens parses the contents of a tokens file (see LoadTokens).
func ParseTokens(data []byte) (*Tokens, error) {
	var entries []tokenEntry
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("want a JSON array of {\"token\", \"name\", \"clearance\", \"write\"}: %w", err)
	}
	t := &Tokens{byHash: make(map[[32]byte]Caller, len(entries))}
	for i, e := range entries {
		if len(e.Token) < 16 {
			return nil, fmt.Errorf("entry %d (%q): token shorter than 16 bytes", i, e.Name)
		}
		if e.Name == "" {
			return nil, fmt.Errorf("entry %d: no name", i)
		}
		if e.Clearance == "" {
			e.Clearance = index.Public
		}
		if err := index.CheckSensitivity(e.Clearance); err != nil {
			return nil, fmt.Errorf("entry %d (%q): clearance: %w", i, e.Name, err)
		}
		h := sha256.Sum256([]byte(e.Token))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("entry %d (%q): token listed twice", i, e.Name)
		}
		t.byHash[h] = Caller{Name: e.Name, Clearance: e.Clearance, Write: e.Write}
	}
	return t, nil
}

// Lookup returns the caller a token names, and false for an unknown one.
// A nil *Tokens knows no token.
func (t *Tokens) Lookup(token string) (Caller, bool) {
	if t == nil {
		return Caller{}, false
	}
	c, ok := t.byHash[sha256.Sum256([]byte(token))]
	return c, ok
}

type callerKey struct{}

// callerFrom returns the caller that the authentication middleware put in
// ctx; Anonymous when none did.
func callerFrom(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Anonymous
}

// authenticate resolves the request's bearer token: no Authorization
// header makes the caller Anonymous; a token the file does not list, or
// a header that is not "Bearer <token>", is answered 401 and never reaches
// next. The clearance comes from here only, never from the request's body
// or query.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := Anonymous
		if r.URL.Path == LocalCommandPath {
			next.ServeHTTP(w, r) // its own token, checked there
			return
		}
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, token, ok := strings.Cut(h, " ")
			var known bool
			if ok && strings.EqualFold(scheme, "Bearer") {
				c, known = s.tokens.Lookup(strings.TrimSpace(token))
			}
			if !known {
				w.Header().Set("WWW-Authenticate", `Bearer realm="escurel"`)
				writeProblem(w, http.StatusUnauthorized, "unknown bearer token: send \"Authorization: Bearer <token>\" with a token of the server's tokens file, or no Authorization header to search as a public caller")
				return
			}
		}
		if info := requestInfoFrom(r.Context()); info != nil {
			info.caller = c.Name
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// writeProblem writes an RFC 9457 problem, the shape huma gives its own
// errors, for answers given before huma sees the request.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	jsonEncode(w, map[string]any{
		"title":  http.StatusText(status),
		"status": status,
		"detail": detail,
	})
}
