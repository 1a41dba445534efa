package analysis

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSimple(t *testing.T) {
	for in, want := range map[string][]string{
		"Path Parameters, with TYPES!":         {"path", "parameters", "with", "types"},
		"response_model=Item; x2 3.14":         {"response", "model", "item", "x2", "3", "14"},
		"Straße GRÜẞE café naïve":              {"straße", "grüße", "café", "naïve"},
		"Ελληνικά κείμενα · Русский ТЕКСТ":     {"ελληνικά", "κείμενα", "русский", "текст"},
		"東京 タワー":                               {"東京", "タワー"},
		"":                                     nil,
		"a " + strings.Repeat("x", 101) + " b": {"a", "b"},
	} {
		if diff := cmp.Diff(want, Simple{}.Terms(nil, in)); diff != "" {
			t.Errorf("Terms(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestLookup(t *testing.T) {
	if a, err := ByID("simple/1"); err != nil || a.ID() != "simple/1" {
		t.Errorf("ByID = %v, %v", a, err)
	}
	if _, err := ByID("simple/2"); err == nil || !strings.Contains(err.Error(), "simple/1") {
		t.Errorf("ByID(simple/2) err = %v", err)
	}
	if _, err := ByName("english"); err == nil {
		t.Error("ByName(english) succeeded")
	}
}
