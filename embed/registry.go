package embed

import (
	"errors"
	"fmt"
	"strings"

	"github.com/escurel/escurel/internal/registry"
)

// Provider builds the embedders of one provider name, the part of a
// Spec's Model before ':'. Register it under that name, in an init
// function, as database/sql drivers are registered.
//
// A Provider may also implement Fingerprinter.
type Provider interface {
	// New returns the embedder for spec, which ParseSpec has accepted and
	// whose Provider() is the name the provider is registered under. It
	// returns (nil, nil) only for the "none" provider. Errors should name
	// the model (spec.Model) and say what to fix.
	New(spec Spec) (Embedder, error)
}

// Fingerprinter is an optional capability of a Provider whose models are
// local files: Fingerprint identifies the files spec names (for onnx, the
// first 16 lower-case hex digits of a SHA-256 over model.onnx and
// tokenizer.json), so that an index can record them at creation and
// refuse other files of the same model name later (Spec.Fingerprint).
// Providers without it have no fingerprint ("").
type Fingerprinter interface {
	// Fingerprint returns 16 lower-case hex digits, "" when spec names no
	// files, or an error when the files cannot be read (wrapping the
	// *fs.PathError).
	Fingerprint(spec Spec) (string, error)
}

// ProviderFunc adapts a function to a Provider without a fingerprint.
type ProviderFunc func(spec Spec) (Embedder, error)

// New calls f(spec).
func (f ProviderFunc) New(spec Spec) (Embedder, error) { return f(spec) }

// ErrNotLinked is the cause of the error New and Fingerprint return for a
// provider that no package registered in this program: one whose package
// was not imported (onnx: import _ "github.com/escurel/escurel/embed/onnx").
// The error may be wrapped; match it with errors.Is.
var ErrNotLinked = errors.New("embed: provider not linked into this program")

// providerImports names the packages of the providers escurel ships
// outside this package, for the error that says what to import.
var providerImports = map[string]string{
	"onnx": "github.com/escurel/escurel/embed/onnx",
}

// providers holds the providers by name.
var providers registry.Registry[Provider]

// Register makes a provider available under name: New and Fingerprint then
// use it for every Spec whose Provider() is name. Call it from an init
// function. It panics if p is nil, if name is empty or contains ':', '/' or
// '?', or if a provider is already registered under name, as sql.Register
// does: two packages claiming one name is a programming error.
func Register(name string, p Provider) {
	if p == nil {
		panic("embed: Register provider is nil")
	}
	if name == "" || strings.ContainsAny(name, ":/?") {
		panic(fmt.Sprintf("embed: Register provider name %q: want a non-empty name without ':', '/' or '?'", name))
	}
	if !providers.Add(name, p) {
		panic("embed: Register called twice for provider " + name)
	}
}

// Providers returns the names of the registered providers, sorted: the
// built-in "hash", "none", "ollama" and "openai", plus those linked in
// by imports (such as "onnx").
func Providers() []string { return providers.Names() }

// lookup returns the provider registered under name, or an error wrapping
// ErrNotLinked that names the package to import.
func lookup(name string) (Provider, error) {
	if p, ok := providers.Get(name); ok {
		return p, nil
	}
	return nil, &notLinkedError{provider: name, importPath: providerImports[name]}
}

// registered reports whether a provider is registered under name.
func registered(name string) bool {
	_, ok := providers.Get(name)
	return ok
}

// notLinkedError says which provider is missing and, for one escurel
// ships, the import that links it.
type notLinkedError struct {
	provider, importPath string
}

func (e *notLinkedError) Error() string {
	if e.importPath != "" {
		return fmt.Sprintf("embed: provider %q is not linked into this program; import _ %q", e.provider, e.importPath)
	}
	return fmt.Sprintf("embed: provider %q is not registered; registered providers: %s", e.provider, strings.Join(Providers(), ", "))
}

// Unwrap returns ErrNotLinked.
func (e *notLinkedError) Unwrap() error { return ErrNotLinked }

// Fingerprint returns the fingerprint of the model files spec names, from
// its provider's Fingerprinter: 16 lower-case hex digits, or "" for a
// provider without one (hash, openai, ollama, none), a spec that names no
// files (an onnx spec without a path) or the zero Spec. An index records it
// in Spec.Fingerprint when it is created; it need not call Fingerprint for
// a spec whose Fingerprint is already set.
//
// Errors: the files cannot be read (for onnx: model.onnx or tokenizer.json
// missing in spec.Path), or the provider is not linked into this program
// (wrapping ErrNotLinked).
func Fingerprint(spec Spec) (string, error) {
	if spec.IsZero() {
		return "", nil
	}
	p, err := lookup(spec.Provider())
	if err != nil {
		return "", err
	}
	f, ok := p.(Fingerprinter)
	if !ok {
		return "", nil
	}
	return f.Fingerprint(spec)
}

// The providers built into this package: light, pure Go.
func init() {
	remote := func(newRemote func(Spec) (*Remote, error)) Provider {
		return ProviderFunc(func(spec Spec) (Embedder, error) {
			r, err := newRemote(spec)
			if err != nil {
				return nil, err // not a nil *Remote in a non-nil Embedder
			}
			return r, nil
		})
	}
	Register("none", ProviderFunc(func(Spec) (Embedder, error) { return nil, nil }))
	Register("hash", ProviderFunc(func(spec Spec) (Embedder, error) { return NewHash(spec.Dim), nil }))
	Register("openai", remote(newOpenAI))
	Register("ollama", remote(newOllama))
}
