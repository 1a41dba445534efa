// Package onnx is escurel's "onnx" embedding provider: a sentence-transformers
// model run in-process by ONNX Runtime, named by the spec
// "onnx:<name>?path=<dir>" (see embed.ParseSpec).
//
// Importing it, usually for its side effect alone,
//
//	import _ "github.com/escurel/escurel/embed/onnx"
//
// registers the provider with embed.Register in its init function, as a
// database/sql driver does; embed.New then builds onnx embedders. It links
// github.com/yalue/onnxruntime_go and github.com/sugarme/tokenizer, which
// programs that only use the built-in providers need not carry. The ONNX
// Runtime shared library itself is loaded at run time, from the path in
// the environment variable RuntimeEnv, when the first model is loaded.
package onnx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/pretrained"
	ort "github.com/yalue/onnxruntime_go"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/escurel/escurel/embed"
)

func init() { embed.Register("onnx", provider{}) }

// provider is the "onnx" embed.Provider; it is an embed.Fingerprinter.
type provider struct{}

var (
	_ embed.Provider      = provider{}
	_ embed.Fingerprinter = provider{}
)

// New loads the model spec names (New).
func (provider) New(spec embed.Spec) (embed.Embedder, error) {
	e, err := New(spec)
	if err != nil {
		return nil, err // not a nil *Embedder in a non-nil interface
	}
	return e, nil
}

// Fingerprint identifies the model files in spec.Path (Fingerprint); "" for
// a spec without a path.
func (provider) Fingerprint(spec embed.Spec) (string, error) {
	if spec.Path == "" {
		return "", nil
	}
	return Fingerprint(spec.Path)
}

// RuntimeEnv names the environment variable holding the path of the
// ONNX Runtime shared library (libonnxruntime.so.1, API version 24, ONNX
// Runtime 1.24; `make onnxruntime` fetches it).
const RuntimeEnv = "ESCUREL_ONNXRUNTIME_LIB"

// DefaultMaxTokens is the longest token sequence an onnx model gets when
// its tokenizer.json sets no truncation: BERT's 512 positions.
const DefaultMaxTokens = 512

// Embedder runs a sentence-transformers model in-process with ONNX Runtime
// (github.com/yalue/onnxruntime_go): a model directory holding model.onnx
// and tokenizer.json, named by the spec "onnx:<name>?path=<dir>". It is
// safe for concurrent use; the model runs one batch at a time.
//
// Texts are tokenized with the directory's tokenizer.json
// (github.com/sugarme/tokenizer), padded on the right to the longest text
// of the batch and truncated to its truncation length (DefaultMaxTokens
// when it sets none). A BERT normalizer whose strip_accents is null strips
// accents when it lowercases, as Hugging Face tokenizers do; escurel does
// that itself (NFD, combining marks removed), as sugarme/tokenizer does not.
// The model gets input_ids, attention_mask and, when it takes them,
// token_type_ids, all int64 [batch, tokens]. Its output sentence_embedding
// [batch, dim] is used as it is; otherwise last_hidden_state (or the first
// output) [batch, tokens, dim] is mean-pooled over the attention mask
// (Reimers & Gurevych 2019). Vectors are then scaled to unit length.
type Embedder struct {
	spec      embed.Spec
	tok       *tokenizer.Tokenizer
	strip     bool // strip accents before tokenizing
	maxTokens int

	mu         sync.Mutex // one Run at a time
	session    *ort.DynamicAdvancedSession
	inputs     []string
	pooled     bool // the output is sentence_embedding: no pooling
	outputName string
}

var _ embed.Embedder = (*Embedder)(nil)

var ortInit struct {
	once sync.Once
	err  error
}

// initRuntime loads the ONNX Runtime library named by RuntimeEnv, once
// per process.
func initRuntime() error {
	ortInit.once.Do(func() {
		lib := os.Getenv(RuntimeEnv)
		if lib == "" {
			ortInit.err = fmt.Errorf("the onnx embedder needs the ONNX Runtime library: set %s to the path of libonnxruntime.so.1 (make onnxruntime fetches it)", RuntimeEnv)
			return
		}
		if _, err := os.Stat(lib); err != nil {
			ortInit.err = fmt.Errorf("%s=%s: %w", RuntimeEnv, lib, err)
			return
		}
		ort.SetSharedLibraryPath(lib)
		if err := ort.InitializeEnvironment(); err != nil {
			ortInit.err = fmt.Errorf("load the ONNX Runtime from %s: %w", lib, err)
		}
	})
	return ortInit.err
}

// Fingerprint identifies the model files of an onnx model directory: the
// first 16 lower-case hex digits of the SHA-256 of model.onnx's and
// tokenizer.json's lengths and bytes. Another model, or another tokenizer,
// of the same dimension gives another fingerprint. It reads both files
// whole; an error names the file that cannot be read (a *fs.PathError,
// possibly wrapped).
func Fingerprint(dir string) (string, error) {
	h := sha256.New()
	for _, name := range []string{"model.onnx", "tokenizer.json"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fi, err := f.Stat()
		if err == nil {
			fmt.Fprintf(h, "%s %d\n", name, fi.Size())
			_, err = io.Copy(h, f)
		}
		f.Close()
		if err != nil {
			return "", fmt.Errorf("fingerprint %s: %w", dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// RuntimeAvailable loads the ONNX Runtime library named by RuntimeEnv,
// once per process, and returns nil if it loaded, else why not (the
// variable unset, the file missing, a library of another API version).
func RuntimeAvailable() error { return initRuntime() }

// New loads the model and tokenizer of an "onnx:<name>" spec from
// spec.Path, loading the ONNX Runtime library first (RuntimeAvailable).
// Errors name the model and say what to fix: no path, model files that
// differ from spec.Fingerprint, no runtime, a tokenizer or model escurel
// cannot use, or a model whose dimension differs from spec.Dim. Most
// callers use embed.New, which calls it.
func New(spec embed.Spec) (*Embedder, error) {
	fail := func(err error) (*Embedder, error) {
		return nil, fmt.Errorf("embedder %s: %w", spec.Model, err)
	}
	if spec.Path == "" {
		return fail(errors.New("give the model directory: onnx:<name>?path=<dir holding model.onnx and tokenizer.json>"))
	}
	fp, err := Fingerprint(spec.Path)
	if err != nil {
		return fail(err)
	}
	if spec.Fingerprint != "" && spec.Fingerprint != fp {
		return fail(fmt.Errorf("the model files in %s (sha256 %s) are not the ones the index was built with (sha256 %s): point path at those, or re-embed with escurel reembed --embedder 'onnx:NAME?path=%s'",
			spec.Path, fp, spec.Fingerprint, spec.Path))
	}
	if err := initRuntime(); err != nil {
		return fail(err)
	}
	e := &Embedder{spec: spec, maxTokens: DefaultMaxTokens}
	tokPath := filepath.Join(spec.Path, "tokenizer.json")
	data, err := os.ReadFile(tokPath)
	if err != nil {
		return fail(err)
	}
	data, e.strip, err = patchTokenizer(data)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", tokPath, err))
	}
	if e.tok, err = loadTokenizer(data); err != nil {
		return fail(fmt.Errorf("%s: %w", tokPath, err))
	}
	if tr := e.tok.GetTruncation(); tr != nil && tr.MaxLength > 0 {
		e.maxTokens = tr.MaxLength
	}
	padID, padToken := 0, "[PAD]"
	if id, ok := e.tok.TokenToId(padToken); ok {
		padID = id
	}
	e.tok.WithPadding(&tokenizer.PaddingParams{Strategy: *tokenizer.NewPaddingStrategy(), Direction: tokenizer.Right,
		PadId: padID, PadToken: padToken})
	e.tok.WithTruncation(&tokenizer.TruncationParams{MaxLength: e.maxTokens, Strategy: tokenizer.LongestFirst})

	modelPath := filepath.Join(spec.Path, "model.onnx")
	ins, outs, err := ort.GetInputOutputInfo(modelPath)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", modelPath, err))
	}
	have := map[string]bool{}
	for _, in := range ins {
		have[in.Name] = true
	}
	for _, name := range []string{"input_ids", "attention_mask"} {
		if !have[name] {
			return fail(fmt.Errorf("%s has no input %q (a sentence-transformers export has input_ids, attention_mask and token_type_ids)", modelPath, name))
		}
	}
	e.inputs = []string{"input_ids", "attention_mask"}
	if have["token_type_ids"] {
		e.inputs = append(e.inputs, "token_type_ids")
	}
	if len(e.inputs) != len(ins) {
		return fail(fmt.Errorf("%s takes inputs %v; escurel gives input_ids, attention_mask and token_type_ids", modelPath, names(ins)))
	}
	var dim int64
	for _, o := range outs {
		if o.Name == "sentence_embedding" {
			e.outputName, e.pooled = o.Name, true
			dim = o.Dimensions[len(o.Dimensions)-1]
		}
	}
	if e.outputName == "" {
		for _, o := range outs {
			if o.Name == "last_hidden_state" || (e.outputName == "" && len(o.Dimensions) == 3) {
				e.outputName = o.Name
				dim = o.Dimensions[len(o.Dimensions)-1]
			}
		}
	}
	if e.outputName == "" {
		return fail(fmt.Errorf("%s has no output sentence_embedding [batch, dim] or last_hidden_state [batch, tokens, dim]; outputs: %v", modelPath, names(outs)))
	}
	if dim > 0 && spec.Dim != 0 && int(dim) != spec.Dim {
		return fail(fmt.Errorf("%s gives %d-dimensional vectors, the spec says dim=%d", modelPath, dim, spec.Dim))
	}
	if dim > 0 {
		e.spec.Dim = int(dim)
	}
	if e.session, err = ort.NewDynamicAdvancedSession(modelPath, e.inputs, []string{e.outputName}, nil); err != nil {
		return fail(fmt.Errorf("%s: %w", modelPath, err))
	}
	return e, nil
}

func names(infos []ort.InputOutputInfo) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Name
	}
	return out
}

// loadTokenizer builds the tokenizer, turning a panic of the library on an
// input it does not expect into an error.
func loadTokenizer(data []byte) (tk *tokenizer.Tokenizer, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unsupported tokenizer: %v", r)
		}
	}()
	return pretrained.FromReader(bytes.NewReader(data))
}

// patchTokenizer rewrites what sugarme/tokenizer reads wrongly in a
// tokenizer.json: a BertNormalizer whose strip_accents is null (Hugging
// Face: strip when lowercasing) becomes strip_accents false, and strip
// reports that escurel must strip accents itself.
func patchTokenizer(data []byte) ([]byte, bool, error) {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, err
	}
	strip := false
	var walk func(n any)
	walk = func(n any) {
		m, ok := n.(map[string]any)
		if !ok {
			return
		}
		if m["type"] == "BertNormalizer" {
			lower, _ := m["lowercase"].(bool)
			sa, set := m["strip_accents"].(bool)
			strip = strip || (set && sa) || (!set && lower)
			m["strip_accents"] = false
		}
		if seq, ok := m["normalizers"].([]any); ok {
			for _, c := range seq {
				walk(c)
			}
		}
	}
	walk(doc["normalizer"])
	out, err := json.Marshal(doc)
	return out, strip, err
}

// encode runs the tokenizer, turning a panic of the library into an error.
func (e *Embedder) encode(inputs []tokenizer.EncodeInput) (encs []tokenizer.Encoding, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tokenizer failed: %v", r)
		}
	}()
	return e.tok.EncodeBatch(inputs, true)
}

// Model returns the spec's model id, "onnx:<name>".
func (e *Embedder) Model() string { return e.spec.Model }

// Dim returns the model's vector dimension.
func (e *Embedder) Dim() int { return e.spec.Dim }

var accents = runes.Remove(runes.In(unicode.Mn))

// Embed returns one unit vector per text, in order, running the model on
// batches of Spec.Batch texts (default embed.DefaultBatch). It checks ctx
// between batches; a running batch is not interrupted.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := e.spec.Batch
	if batch <= 0 {
		batch = embed.DefaultBatch
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vs, err := e.embedBatch(texts[start:min(start+batch, len(texts))])
		if err != nil {
			return nil, fmt.Errorf("embedder %s: %w", e.spec.Model, err)
		}
		out = append(out, vs...)
	}
	return out, nil
}

func (e *Embedder) embedBatch(texts []string) ([][]float32, error) {
	inputs := make([]tokenizer.EncodeInput, len(texts))
	for i, t := range texts {
		if e.strip {
			t, _, _ = transform.String(transform.Chain(norm.NFD, accents, norm.NFC), t)
		}
		if strings.TrimSpace(t) == "" {
			t = " "
		}
		inputs[i] = tokenizer.NewSingleEncodeInput(tokenizer.NewInputSequence(t))
	}
	encs, err := e.encode(inputs)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	n, l := len(encs), 0
	for _, enc := range encs {
		l = max(l, len(enc.Ids))
	}
	ids, mask, types := make([]int64, n*l), make([]int64, n*l), make([]int64, n*l)
	for i, enc := range encs {
		if len(enc.Ids) != l || len(enc.AttentionMask) != l {
			return nil, fmt.Errorf("tokenize: encoding %d has %d tokens, the batch %d", i, len(enc.Ids), l)
		}
		for j := range l {
			ids[i*l+j] = int64(enc.Ids[j])
			mask[i*l+j] = int64(enc.AttentionMask[j])
			if j < len(enc.TypeIds) {
				types[i*l+j] = int64(enc.TypeIds[j])
			}
		}
	}
	shape := ort.NewShape(int64(n), int64(l))
	var values []ort.Value
	defer func() {
		for _, v := range values {
			v.Destroy()
		}
	}()
	for _, data := range [][]int64{ids, mask, types}[:len(e.inputs)] {
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, err
		}
		values = append(values, t)
	}
	outputs := []ort.Value{nil}
	e.mu.Lock()
	err = e.session.Run(values, outputs)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer outputs[0].Destroy()
	t, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("output %s is not a float32 tensor", e.outputName)
	}
	data, shp := t.GetData(), t.GetShape()
	vecs := make([][]float32, n)
	switch {
	case e.pooled && len(shp) == 2 && shp[0] == int64(n):
		d := int(shp[1])
		for i := range vecs {
			vecs[i] = append([]float32(nil), data[i*d:(i+1)*d]...)
		}
	case !e.pooled && len(shp) == 3 && shp[0] == int64(n) && shp[1] == int64(l):
		d := int(shp[2])
		for i := range vecs {
			v := make([]float64, d)
			count := 0.0
			for j := range l {
				if mask[i*l+j] == 0 {
					continue
				}
				count++
				row := data[(i*l+j)*d : (i*l+j+1)*d]
				for k, x := range row {
					v[k] += float64(x)
				}
			}
			vecs[i] = make([]float32, d)
			for k := range v {
				vecs[i][k] = float32(v[k] / max(count, 1))
			}
		}
	default:
		return nil, fmt.Errorf("output %s has shape %v for a batch of %d×%d tokens", e.outputName, shp, n, l)
	}
	for i := range vecs {
		if e.spec.Dim != 0 && len(vecs[i]) != e.spec.Dim {
			return nil, fmt.Errorf("a %d-dimensional vector, the spec says dim=%d", len(vecs[i]), e.spec.Dim)
		}
		if vecs[i], err = embed.Normalize(vecs[i]); err != nil {
			return nil, err
		}
	}
	return vecs, nil
}
