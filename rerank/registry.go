package rerank

import (
	"errors"
	"fmt"
	"strings"

	"github.com/escurel/escurel/internal/registry"
)

// Provider builds the rerankers of one provider name. Register it under
// that name, in an init function, as database/sql drivers are registered;
// New then builds rerankers with it.
type Provider interface {
	// New returns a reranker configured by opts. Errors should say what
	// to fix (a malformed URL, a missing model).
	New(opts Options) (Reranker, error)
}

// ProviderFunc adapts a function to a Provider.
type ProviderFunc func(opts Options) (Reranker, error)

// New calls f(opts).
func (f ProviderFunc) New(opts Options) (Reranker, error) { return f(opts) }

// ErrNotLinked is the cause of the error New returns for a provider name
// that no package registered in this program. The error may be wrapped;
// match it with errors.Is.
var ErrNotLinked = errors.New("rerank: provider not linked into this program")

// providers holds the providers by name.
var providers registry.Registry[Provider]

// Register makes a provider available to New under name. Call it from an
// init function. It panics if p is nil, name is empty, or a provider is
// already registered under name, as sql.Register does.
func Register(name string, p Provider) {
	if p == nil {
		panic("rerank: Register provider is nil")
	}
	if name == "" {
		panic("rerank: Register provider with an empty name")
	}
	if !providers.Add(name, p) {
		panic("rerank: Register called twice for provider " + name)
	}
}

// Providers returns the names of the registered providers, sorted; "http"
// is built in.
func Providers() []string { return providers.Names() }

// New returns a reranker of the provider registered under name, configured
// by opts: New("http", Options{URL: "http://127.0.0.1:8080/rerank"}) is
// NewHTTP's reranker. A name that is not registered is an error wrapping
// ErrNotLinked that lists the registered ones. New does no I/O for the
// built-in provider.
func New(name string, opts Options) (Reranker, error) {
	p, ok := providers.Get(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not registered; registered providers: %s", ErrNotLinked, name, strings.Join(Providers(), ", "))
	}
	return p.New(opts)
}

func init() {
	Register("http", ProviderFunc(func(opts Options) (Reranker, error) {
		h, err := NewHTTP(opts.URL, opts)
		if err != nil {
			return nil, err // not a nil *HTTP in a non-nil Reranker
		}
		return h, nil
	}))
}
