package extract

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFrontMatterMeta: every other scalar key, and lists of scalars, are
// metadata; built-in keys are not; other values warn.
func TestFrontMatterMeta(t *testing.T) {
	yml := "---\ntitle: T\nProduct: api\nversion: 2\ndraft: false\nreleased: 2024-03-01\ntags: [a, b]\nsource: x\nnested: {a: 1}\n---\n# H\n\ntext\n"
	d, err := Extract(context.Background(), MediaMarkdown, "a.md", []byte(yml), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"product": "api", "version": 2.0, "draft": false, "released": "2024-03-01", "tags": []any{"a", "b"}}
	if diff := cmp.Diff(want, d.Meta); diff != "" {
		t.Errorf("YAML meta (-want +got):\n%s", diff)
	}
	if !strings.Contains(strings.Join(d.Warnings, "\n"), `"nested" is not metadata`) {
		t.Errorf("warnings %q: want one for the nested mapping", d.Warnings)
	}
	toml := "+++\ntitle = \"T\"\nproduct = \"api\"\nversion = 2.5\ndraft = true\nreleased = 2024-03-01\n+++\ntext\n"
	d, err = Extract(context.Background(), MediaText, "a.txt", []byte(toml), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"product": "api", "version": 2.5, "draft": true, "released": "2024-03-01"}
	if diff := cmp.Diff(want, d.Meta); diff != "" {
		t.Errorf("TOML meta (-want +got):\n%s", diff)
	}
}
