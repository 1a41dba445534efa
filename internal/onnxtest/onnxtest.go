// Package onnxtest writes a tiny sentence-transformers model directory for
// tests: model.onnx and tokenizer.json, with the input and output names of a
// sentence-transformers export, and an embedding table that the tests can
// check the embedder's output against.
//
// The model adds a token embedding and a position embedding, as BERT's
// first layer does: last_hidden_state[b, t, :] = Table[input_ids[b, t], :]
// + Positions[t, :]. Positions count from the first token of the padded
// batch, so a batch padded on the left shifts a text's positions and
// changes its vector, as it does with a real model. It takes input_ids,
// attention_mask and token_type_ids (int64 [batch, tokens]); the last two do
// not change the output, so pooling over the attention mask is the
// embedder's job, as with a real model. The ONNX protobuf (onnx.proto3, IR version 8, opset 17) is
// written field by field with protowire.
package onnxtest

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
)

// Vocab is the tokenizer's vocabulary, by id: the BERT specials, then
// words and a word piece.
var Vocab = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "cafe", "ocelot", "care", "feed", "the", "a", "long", "text", "with", "many", "words", "##s"}

// Dim is the model's vector dimension.
const Dim = 8

// Table is the embedding table: row i is token i's vector. Every row,
// [PAD] included, is non-zero, so a pooling that counted padding would
// show.
func Table() [][]float32 {
	t := make([][]float32, len(Vocab))
	for i := range t {
		t[i] = make([]float32, Dim)
		for j := range t[i] {
			t[i][j] = float32(math.Sin(float64(i*Dim + j + 1))) // deterministic, varied, never all zero
		}
	}
	return t
}

// MaxPositions is the number of rows of Positions.
const MaxPositions = 64

// Positions is the position embedding table: row t is added to the token at
// position t.
func Positions() [][]float32 {
	t := make([][]float32, MaxPositions)
	for i := range t {
		t[i] = make([]float32, Dim)
		for j := range t[i] {
			t[i][j] = float32(math.Cos(float64(i*Dim+j+1))) / 2
		}
	}
	return t
}

// ID returns a token's id, -1 when it is not in Vocab.
func ID(token string) int {
	for i, v := range Vocab {
		if v == token {
			return i
		}
	}
	return -1
}

// Write writes model.onnx and tokenizer.json into dir.
func Write(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), model(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokenizerJSON(), 0o644)
}

func str(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func msg(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func varint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// valueInfo is a ValueInfoProto of a tensor with elemType (TensorProto
// DataType: 1 float, 7 int64) and dims, a dim being a symbolic name
// (string) or a size (int).
func valueInfo(name string, elemType uint64, dims ...any) []byte {
	var shape []byte
	for _, d := range dims {
		var dim []byte
		switch d := d.(type) {
		case string:
			dim = str(dim, 2, d) // dim_param
		case int:
			dim = varint(dim, 1, uint64(d)) // dim_value
		}
		shape = msg(shape, 1, dim) // TensorShapeProto.dim
	}
	var tensor []byte
	tensor = varint(tensor, 1, elemType) // elem_type
	tensor = msg(tensor, 2, shape)       // shape
	var typ []byte
	typ = msg(typ, 1, tensor) // TypeProto.tensor_type
	var vi []byte
	vi = str(vi, 1, name)
	return msg(vi, 2, typ)
}

// floatTensor is a TensorProto initializer of float rows.
func floatTensor(name string, rows [][]float32) []byte {
	var t []byte
	t = varint(t, 1, uint64(len(rows)))
	t = varint(t, 1, uint64(len(rows[0])))
	t = varint(t, 2, 1) // FLOAT
	var floats []byte
	for _, row := range rows {
		for _, x := range row {
			floats = protowire.AppendFixed32(floats, math.Float32bits(x))
		}
	}
	t = protowire.AppendTag(t, 4, protowire.BytesType) // float_data, packed
	t = protowire.AppendBytes(t, floats)
	return str(t, 8, name)
}

// int64Scalar is a TensorProto initializer of one int64.
func int64Scalar(name string, v int64) []byte {
	var t []byte
	t = varint(t, 2, 7)                                // INT64
	t = protowire.AppendTag(t, 7, protowire.BytesType) // int64_data, packed
	t = protowire.AppendBytes(t, protowire.AppendVarint(nil, uint64(v)))
	return str(t, 8, name)
}

// node is a NodeProto.
func node(op, name string, inputs []string, output string) []byte {
	var n []byte
	for _, in := range inputs {
		n = str(n, 1, in)
	}
	n = str(n, 2, output)
	n = str(n, 3, name)
	return str(n, 4, op)
}

func model() []byte {
	var graph []byte
	for _, n := range [][]byte{
		node("Gather", "tokens", []string{"embeddings", "input_ids"}, "tok"),
		node("Mul", "zeros", []string{"input_ids", "zero"}, "zeros"),
		node("Add", "ones", []string{"zeros", "one"}, "ones"),
		node("CumSum", "count", []string{"ones", "axis"}, "count"),
		node("Sub", "positions", []string{"count", "one"}, "pos"),
		node("Gather", "position_embeddings", []string{"position_table", "pos"}, "pe"),
		node("Add", "sum", []string{"tok", "pe"}, "last_hidden_state"),
	} {
		graph = msg(graph, 1, n)
	}
	graph = str(graph, 2, "escurel-test")
	graph = msg(graph, 5, floatTensor("embeddings", Table()))
	graph = msg(graph, 5, floatTensor("position_table", Positions()))
	graph = msg(graph, 5, int64Scalar("zero", 0))
	graph = msg(graph, 5, int64Scalar("one", 1))
	graph = msg(graph, 5, int64Scalar("axis", 1))
	for _, in := range []string{"input_ids", "attention_mask", "token_type_ids"} {
		graph = msg(graph, 11, valueInfo(in, 7, "batch", "tokens"))
	}
	graph = msg(graph, 12, valueInfo("last_hidden_state", 1, "batch", "tokens", Dim))

	var opset []byte
	opset = str(opset, 1, "")
	opset = varint(opset, 2, 17)

	var m []byte
	m = varint(m, 1, 8) // ir_version
	m = str(m, 2, "escurel onnxtest")
	m = msg(m, 7, graph)
	m = msg(m, 8, opset)
	return m
}

// tokenizerJSON is a BERT WordPiece tokenizer.json as Hugging Face writes
// it for a sentence-transformers model: BertNormalizer with strip_accents
// null and lowercase true, so accents are stripped.
func tokenizerJSON() []byte {
	vocab := map[string]int{}
	var added []map[string]any
	for i, v := range Vocab {
		vocab[v] = i
		if i < 4 {
			added = append(added, map[string]any{"id": i, "content": v, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true})
		}
	}
	special := func(tok string) map[string]any {
		return map[string]any{"id": tok, "ids": []int{ID(tok)}, "tokens": []string{tok}}
	}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer": map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
			"strip_accents": nil, "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{
			"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "[CLS]", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "[SEP]", "type_id": 0}},
			},
			"pair": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "[CLS]", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "[SEP]", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}},
				map[string]any{"SpecialToken": map[string]any{"id": "[SEP]", "type_id": 1}},
			},
			"special_tokens": map[string]any{"[CLS]": special("[CLS]"), "[SEP]": special("[SEP]")},
		},
		"decoder": map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": vocab},
	}
	b, _ := json.MarshalIndent(doc, "", "  ") // maps of plain values always marshal
	return b
}
