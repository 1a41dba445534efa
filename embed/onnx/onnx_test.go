package onnx_test

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/embed/onnx"
	"github.com/escurel/escurel/internal/onnxtest"
)

// model parses spec and builds its embedder through embed.New, as the index
// does: the provider is the one this package registered.
func model(t *testing.T, spec string) embed.Embedder {
	t.Helper()
	s, err := embed.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	e, err := embed.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// onnxModel writes the test model and returns its embedder, or skips when
// the ONNX Runtime library is absent (make test fetches it, so CI runs
// these).
func onnxModel(t *testing.T) embed.Embedder {
	t.Helper()
	if err := onnx.RuntimeAvailable(); err != nil {
		t.Skipf("ONNX Runtime not available (%v): run `make onnxruntime` and set %s", err, onnx.RuntimeEnv)
	}
	dir := t.TempDir()
	if err := onnxtest.Write(dir); err != nil {
		t.Fatal(err)
	}
	return model(t, "onnx:test-model?batch=4&path="+dir)
}

// expected is the mean over tokens of their table row plus their position
// row, scaled to unit length: what mean pooling over the attention mask
// must give when the padding is on the right.
func expected(tokens ...string) []float32 {
	table, pos := onnxtest.Table(), onnxtest.Positions()
	v := make([]float32, onnxtest.Dim)
	for t, tok := range tokens {
		for j, x := range table[onnxtest.ID(tok)] {
			v[j] += (x + pos[t][j]) / float32(len(tokens))
		}
	}
	v, _ = embed.Normalize(v)
	return v
}

func near(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-5 {
			return false
		}
	}
	return true
}

func TestONNXMeanPooling(t *testing.T) {
	e := onnxModel(t)
	if e.Dim() != onnxtest.Dim || e.Model() != "onnx:test-model" {
		t.Fatalf("model %s dim %d", e.Model(), e.Dim())
	}
	ctx := context.Background()
	texts := []string{"Ocelot care", "the long text with many words", "café", "Cafés", "ocelot", "feed the ocelot"}
	got, err := e.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{
		expected("[CLS]", "ocelot", "care", "[SEP]"),
		expected("[CLS]", "the", "long", "text", "with", "many", "words", "[SEP]"),
		expected("[CLS]", "cafe", "[SEP]"),        // accents stripped, as the tokenizer's null strip_accents asks
		expected("[CLS]", "cafe", "##s", "[SEP]"), // lower-cased, word pieces
		expected("[CLS]", "ocelot", "[SEP]"),
		expected("[CLS]", "feed", "the", "ocelot", "[SEP]"),
	}
	for i := range texts {
		if !near(got[i], want[i]) {
			t.Errorf("%q: %v, want %v", texts[i], got[i], want[i])
		}
	}
	// A text alone and in a batch with a longer one: the same vector (right
	// padding, masked out of the mean).
	alone, err := e.Embed(ctx, []string{"ocelot"})
	if err != nil {
		t.Fatal(err)
	}
	if !near(alone[0], got[4]) {
		t.Errorf("padding changed the vector: %v alone, %v in a batch", alone[0], got[4])
	}
	// An unknown word is [UNK], not an error; an empty text embeds.
	if _, err := e.Embed(ctx, []string{"zyzzyva", ""}); err != nil {
		t.Error(err)
	}
}

func TestONNXBadModelDirectory(t *testing.T) {
	if err := onnx.RuntimeAvailable(); err != nil {
		t.Skipf("ONNX Runtime not available (%v)", err)
	}
	spec, _ := embed.ParseSpec("onnx:m?path=" + t.TempDir())
	if _, err := embed.New(spec); err == nil || !strings.Contains(err.Error(), "model.onnx") {
		t.Errorf("empty directory: %v", err)
	}
	spec, _ = embed.ParseSpec("onnx:m")
	if _, err := embed.New(spec); err == nil || !strings.Contains(err.Error(), "path=") {
		t.Errorf("no path: %v", err)
	}
}

// The fingerprint names the files: embed.Fingerprint reaches this
// package's through the registry, and changes with either file; a spec
// without a path has none, and a directory without the files is an error.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	if err := onnxtest.Write(dir); err != nil {
		t.Fatal(err)
	}
	spec, err := embed.ParseSpec("onnx:m?path=" + dir)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := embed.Fingerprint(spec)
	if err != nil || len(fp) != 16 {
		t.Fatalf("Fingerprint = %q, %v", fp, err)
	}
	if direct, err := onnx.Fingerprint(dir); direct != fp || err != nil {
		t.Errorf("onnx.Fingerprint = %q, %v; embed.Fingerprint %q", direct, err, fp)
	}
	// The spec with the fingerprint round-trips.
	spec.Fingerprint = fp
	if back, err := embed.ParseSpec(spec.String()); err != nil || back != spec {
		t.Errorf("ParseSpec(%q) = %v, %v", spec, back, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if other, err := embed.Fingerprint(spec); err != nil || other == fp {
		t.Errorf("another tokenizer: fingerprint %q, %v; want one other than %q", other, err, fp)
	}
	if fp, err := embed.Fingerprint(embed.Spec{Model: "onnx:m"}); fp != "" || err != nil {
		t.Errorf("no path: %q, %v", fp, err)
	}
	if _, err := embed.Fingerprint(embed.Spec{Model: "onnx:m", Path: t.TempDir()}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty directory: %v, want fs.ErrNotExist", err)
	}
}

// Importing the package registers the provider once; registering it again
// panics, as sql.Register does.
func TestRegistered(t *testing.T) {
	if !slices.Contains(embed.Providers(), "onnx") {
		t.Fatalf("Providers() = %v, want onnx", embed.Providers())
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Register of onnx did not panic")
		}
	}()
	embed.Register("onnx", embed.ProviderFunc(func(embed.Spec) (embed.Embedder, error) { return nil, nil }))
}
