package embed_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
)

// fakeProvider is a deterministic provider registered as "fake" by these
// tests, as database/sql's tests register fakedb: its embedders are the
// hash embedder under the spec's model name, and its fingerprint is the
// spec's path padded to 16 hex digits.
type fakeProvider struct{}

type fakeEmbedder struct {
	*embed.Hash
	model string
}

func (f fakeEmbedder) Model() string { return f.model }

func (fakeProvider) New(spec embed.Spec) (embed.Embedder, error) {
	if spec.Dim == 0 {
		return nil, errors.New("fake needs dim")
	}
	return fakeEmbedder{embed.NewHash(spec.Dim), spec.Model}, nil
}

func (fakeProvider) Fingerprint(spec embed.Spec) (string, error) {
	return (spec.Path + strings.Repeat("0", 16))[:16], nil
}

func init() { embed.Register("fake", fakeProvider{}) }

// This package's tests link no provider package: onnx is not linked, and
// New and Fingerprint say which import links it, while its specs still
// parse and round-trip.
func TestONNXNotLinked(t *testing.T) {
	const in = "onnx:bge-small?batch=8&dim=384&path=%2Fmodels%2Fbge&sha256=0123456789abcdef"
	spec, err := embed.ParseSpec(in)
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", in, err)
	}
	want := embed.Spec{Model: "onnx:bge-small", Dim: 384, Path: "/models/bge", Batch: 8, Fingerprint: "0123456789abcdef"}
	if spec != want || spec.String() != in {
		t.Errorf("ParseSpec(%q) = %+v, String %q", in, spec, spec.String())
	}
	const hint = `embed: provider "onnx" is not linked into this program; import _ "github.com/escurel/escurel/embed/onnx"`
	e, err := embed.New(spec)
	if e != nil || !errors.Is(err, embed.ErrNotLinked) || !strings.Contains(err.Error(), hint) {
		t.Errorf("New = %v, %v; want ErrNotLinked saying %s", e, err, hint)
	}
	if fp, err := embed.Fingerprint(spec); fp != "" || !errors.Is(err, embed.ErrNotLinked) || !strings.Contains(err.Error(), hint) {
		t.Errorf("Fingerprint = %q, %v; want ErrNotLinked", fp, err)
	}
	if slices.Contains(embed.Providers(), "onnx") {
		t.Errorf("Providers() = %v lists onnx", embed.Providers())
	}
}

func TestProviders(t *testing.T) {
	if got, want := embed.Providers(), []string{"fake", "hash", "none", "ollama", "openai"}; !slices.Equal(got, want) {
		t.Errorf("Providers() = %v, want %v", got, want)
	}
}

// A provider registered outside the package is reached by its name: its
// specs parse, New builds with it, and Fingerprint asks it.
func TestRegisteredProvider(t *testing.T) {
	spec, err := embed.ParseSpec("fake:m1?dim=8&path=abc&query_prefix=q%3A+")
	if err != nil {
		t.Fatal(err)
	}
	if back, err := embed.ParseSpec(spec.String()); err != nil || back != spec {
		t.Errorf("round trip %q: %v, %v", spec, back, err)
	}
	e, err := embed.New(spec)
	if err != nil || e.Model() != "fake:m1" || e.Dim() != 8 {
		t.Fatalf("New = %v, %v", e, err)
	}
	vs, err := e.Embed(context.Background(), []string{"numbats"})
	if err != nil || len(vs) != 1 || len(vs[0]) != 8 {
		t.Errorf("Embed = %v, %v", vs, err)
	}
	if _, err := embed.New(embed.Spec{Model: "fake:m1"}); err == nil || !strings.Contains(err.Error(), "fake needs dim") {
		t.Errorf("the provider's own error: %v", err)
	}
	if fp, err := embed.Fingerprint(spec); fp != "abc0000000000000" || err != nil {
		t.Errorf("Fingerprint = %q, %v", fp, err)
	}
	// Providers without a Fingerprinter, and the zero spec, have none.
	for _, s := range []embed.Spec{embed.Default, embed.None, {Model: "openai:m"}, {}} {
		if fp, err := embed.Fingerprint(s); fp != "" || err != nil {
			t.Errorf("Fingerprint(%v) = %q, %v", s, fp, err)
		}
	}
	// Names not registered are unknown to ParseSpec; to New (given a Spec
	// directly) too.
	if _, err := embed.ParseSpec("fake2:m"); err == nil || !strings.Contains(err.Error(), "fake:<model>") {
		t.Errorf("ParseSpec(fake2:m) = %v; want unknown, listing fake:<model>", err)
	}
	if _, err := embed.New(embed.Spec{Model: "fake2:m"}); err == nil {
		t.Error("New(fake2:m) succeeded")
	}
}

func TestRegisterPanics(t *testing.T) {
	p := embed.ProviderFunc(func(embed.Spec) (embed.Embedder, error) { return nil, nil })
	for name, reg := range map[string]func(){
		"duplicate":   func() { embed.Register("hash", p) },
		"nil":         func() { embed.Register("x", nil) },
		"empty name":  func() { embed.Register("", p) },
		"colon":       func() { embed.Register("a:b", p) },
		"duplicate 2": func() { embed.Register("fake", p) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			reg()
		}()
	}
}
