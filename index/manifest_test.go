package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/escurel/escurel/embed"
)

// builtWith creates an index with opts and returns its directory.
func builtWith(t *testing.T, opts Options) string {
	t.Helper()
	dir := t.TempDir()
	opts.BlobURL = "mem://"
	ix, err := Open(context.Background(), dir, &opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Ingest(context.Background(), Input{Source: "/a.md", Data: []byte("# A\n\ntext\n")}); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	return dir
}

// refused opens dir with opts and checks the refusal names both values and
// the fixing command.
func refused(t *testing.T, dir string, opts Options, setting string, mentions ...string) {
	t.Helper()
	opts.BlobURL = "mem://"
	ix, err := Open(context.Background(), dir, &opts)
	if err == nil {
		ix.Close()
		t.Fatalf("open with %+v succeeded, want a refusal", opts)
	}
	var me *MismatchError
	if !errors.Is(err, ErrManifestMismatch) || !errors.As(err, &me) || me.Setting != setting {
		t.Fatalf("err = %v, want a MismatchError for %s", err, setting)
	}
	for _, m := range mentions {
		if strings.HasPrefix(m, "escurel rebuild --") {
			// The data the CLI turns into its advice.
			if fix := fmt.Sprintf("escurel rebuild --%s '%s'", strings.ToLower(me.Option), me.Want); fix != m {
				t.Errorf("the fix reads %q, want %q", fix, m)
			}
			continue
		}
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}

func TestRefuseOtherEmbedder(t *testing.T) {
	dir := builtWith(t, Options{})
	refused(t, dir, Options{Embedder: embed.None}, "embedder", `"hash/384"`, `"none"`, "escurel rebuild --embedder 'none'")
}

func TestRefuseOtherEmbedderDimension(t *testing.T) {
	dir := builtWith(t, Options{Embedder: embed.Spec{Model: "hash", Dim: 384}})
	refused(t, dir, Options{Embedder: embed.Spec{Model: "hash", Dim: 256}}, "embedder dimension", `"384"`, `"256"`, "escurel rebuild --embedder 'hash/256'")
}

func TestRefuseOtherChunker(t *testing.T) {
	dir := builtWith(t, Options{})
	refused(t, dir, Options{Chunker: "default(max_bytes=800)"}, "chunker",
		`"default(max_bytes=1500)"`, `"default(max_bytes=800)"`, "escurel rebuild --chunker 'default(max_bytes=800)'")
}

func TestRefuseOtherAnalyzer(t *testing.T) {
	// This binary has one analyzer, so the index pretends to come from a
	// build whose analyzer was simple/0.
	dir := builtWith(t, Options{})
	ix, err := Open(context.Background(), dir, &Options{BlobURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.cur.Load().db.Exec(`UPDATE manifest SET analyzer = 'simple/0'`); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	refused(t, dir, Options{Analyzer: "simple"}, "analyzer", `"simple/0"`, `"simple/1"`, "escurel rebuild --analyzer 'simple/1'")
	// Unconfigured, the open still fails: this binary cannot analyze like
	// simple/0 did.
	if _, err := Open(context.Background(), dir, &Options{BlobURL: "mem://"}); err == nil || !strings.Contains(err.Error(), "escurel rebuild") {
		t.Fatalf("open of a simple/0 index without settings: err = %v", err)
	}
}

func TestRefuseOtherContextualize(t *testing.T) {
	dir := builtWith(t, Options{})
	refused(t, dir, Options{Contextualize: ContextOff}, "contextualize", `"structural"`, `"off"`, "escurel rebuild --contextualize 'off'")
}

// Unset options adopt the manifest's values; equal ones are accepted.
func TestOpenAdoptsManifest(t *testing.T) {
	dir := builtWith(t, Options{Chunker: "default(max_bytes=800)", Contextualize: ContextOff, Embedder: embed.None})
	for _, opts := range []Options{{}, {Chunker: "default(max_bytes=800)", Contextualize: ContextOff, Embedder: embed.None, Analyzer: "standard/2"}} {
		opts.BlobURL = "mem://"
		ix, err := Open(context.Background(), dir, &opts)
		if err != nil {
			t.Fatal(err)
		}
		if ix.cur.Load().chunker.MaxBytes != 800 || ix.cur.Load().context != ContextOff || ix.cur.Load().embedder != nil {
			t.Errorf("settings not adopted: %+v %q %v", ix.cur.Load().chunker, ix.cur.Load().context, ix.cur.Load().embedder)
		}
		ix.Close()
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{Contextualize: "on"}, {Chunker: "semantic"}, {Analyzer: "english"}, {Embedder: embed.Spec{Model: "openai", Dim: 3}},
	} {
		opts.BlobURL = "mem://"
		if ix, err := Open(context.Background(), t.TempDir(), &opts); err == nil {
			ix.Close()
			t.Errorf("Open(%+v) succeeded", opts)
		}
	}
}
