package embed_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
	"github.com/escurel/escurel/internal/onnxtest"
)

// onnxModel writes the test model and returns its embedder, or skips when
// the ONNX Runtime library is absent (make test fetches it, so CI runs
// these).
func onnxModel(t *testing.T) embed.Embedder {
	t.Helper()
	if err := embed.RuntimeAvailable(); err != nil {
		t.Skipf("ONNX Runtime not available (%v): run `make onnxruntime` and set %s", err, embed.OnnxRuntimeEnv)
	}
	dir := t.TempDir()
	if err := onnxtest.Write(dir); err != nil {
		t.Fatal(err)
	}
	return remote(t, "onnx:test-model?batch=4&path="+dir)
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
	if err := embed.RuntimeAvailable(); err != nil {
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
