package tests

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// heavy are the modules that only the provider packages may link: ONNX
// Runtime's bindings and the tokenizer (embed/onnx), PDFium and its
// WebAssembly runtime (index/extract/pdf).
var heavy = []string{
	"github.com/yalue/onnxruntime_go",
	"github.com/sugarme/tokenizer",
	"github.com/klippa-app/go-pdfium",
	"github.com/tetratelabs/wazero",
}

// deps lists the packages pkg imports, directly or not (go list -deps,
// with flags such as -test), skipping the test where the go command is not
// on PATH.
func deps(t *testing.T, pkg string, flags ...string) []string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not on PATH: %v", err)
	}
	out, err := exec.Command(goCmd, append(append([]string{"list", "-deps"}, flags...), pkg)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	return strings.Fields(string(out))
}

// heavyIn returns the packages of pkgs that belong to a heavy module.
func heavyIn(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		for _, m := range heavy {
			if p == m || strings.HasPrefix(p, m+"/") {
				out = append(out, p)
			}
		}
	}
	return out
}

// Providers register by name: a program importing index (or rebuild, or
// eval) links neither ONNX Runtime nor the PDF engine; the CLI, which
// imports the provider packages, links both.
func TestLibraryLinksNoHeavyProvider(t *testing.T) {
	for _, pkg := range []string{
		"github.com/escurel/escurel/index",
		"github.com/escurel/escurel/rebuild",
		"github.com/escurel/escurel/eval",
		"github.com/escurel/escurel/embed",
		"github.com/escurel/escurel/rerank",
		"github.com/escurel/escurel/index/extract",
	} {
		if got := heavyIn(deps(t, pkg)); len(got) > 0 {
			t.Errorf("%s links %v; only embed/onnx and index/extract/pdf may", pkg, got)
		}
	}
	// The tests of the unlinked errors must not link the providers they
	// test the absence of.
	for _, pkg := range []string{
		"github.com/escurel/escurel/embed",
		"github.com/escurel/escurel/index/extract",
		"github.com/escurel/escurel/tests/unlinked",
	} {
		if got := heavyIn(deps(t, pkg, "-test")); len(got) > 0 {
			t.Errorf("the tests of %s link %v", pkg, got)
		}
	}
	cli := deps(t, "github.com/escurel/escurel/cmd/escurel")
	for _, want := range []string{"github.com/escurel/escurel/embed/onnx", "github.com/escurel/escurel/index/extract/pdf",
		"github.com/yalue/onnxruntime_go", "github.com/klippa-app/go-pdfium"} {
		if !slices.Contains(cli, want) {
			t.Errorf("cmd/escurel does not link %s", want)
		}
	}
}
