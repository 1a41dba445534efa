package extract

import (
	"errors"
	"strings"
	"testing"
)

// frontMatterCases is every front-matter form escurel reads and every near
// miss it refuses (issue 15). want is the sensitivity read; fail, when not
// empty, is what the ErrFrontMatter reason must contain (the line, the key).
// The README's table lists the same cases.
var frontMatterCases = []struct {
	name, src string
	want      string // Doc.Sensitivity when the document is read
	fail      string // a substring of the error when it must fail
}{
	// Read.
	{"yaml", "---\nsensitivity: restricted\n---\nBody.\n", "restricted", ""},
	{"yaml dots end", "---\nsensitivity: internal\n...\nBody.\n", "internal", ""},
	{"yaml crlf", "---\r\nsensitivity: restricted\r\n---\r\nBody.\r\n", "restricted", ""},
	{"yaml bom", "\uFEFF---\nsensitivity: restricted\n---\nBody.\n", "restricted", ""},
	{"yaml after blank lines", "\n \n---\nsensitivity: restricted\n---\nBody.\n", "restricted", ""},
	{"key case", "---\nSensitivity: restricted\n---\nBody.\n", "restricted", ""},
	{"key upper", "---\nSENSITIVITY: restricted\n---\nBody.\n", "restricted", ""},
	{"space before colon", "---\nsensitivity : restricted\n---\nBody.\n", "restricted", ""},
	{"indented key", "---\n  sensitivity: restricted\n---\nBody.\n", "restricted", ""},
	{"tab after colon", "---\nsensitivity:\trestricted\n---\nBody.\n", "restricted", ""},
	{"single quoted", "---\nsensitivity: 'restricted'\n---\nBody.\n", "restricted", ""},
	{"double quoted", "---\nsensitivity: \"restricted\"\n---\nBody.\n", "restricted", ""},
	{"spaces in value", "---\nsensitivity: \"  restricted \"\n---\nBody.\n", "restricted", ""},
	{"trailing comment", "---\nsensitivity: restricted # need to know\n---\nBody.\n", "restricted", ""},
	{"other keys", "---\ntitle: T\ntags: [a, b]\nsensitivity: internal\n---\nBody.\n", "internal", ""},
	{"toml", "+++\ntitle = \"T\"\nsensitivity = \"restricted\"\n+++\nBody.\n", "restricted", ""},
	{"toml literal", "+++\nSensitivity = 'internal'\n+++\nBody.\n", "internal", ""},
	{"none", "---\ntitle: T\n---\nBody.\n", "", ""},
	{"no front matter", "Body.\n", "", ""},
	{"body mention", "# Notes\n\nBody.\n\nsensitivity: restricted\n", "", ""},
	// A bench passage (SciFact-derived) that failed as a near miss.
	{"prose with a colon after a comma", "Cells respond in a dose-dependent, insensitive manner: the dose had no effect.\n", "", ""},
	{"a passage cut mid-sentence", "insensitive manner: for example --RSA is no longer a valid option of certtool.\n", "", ""},
	{"a two-word phrase", "Sensitive data: handle with care.\n", "", ""},
	{"body mention after front matter", "---\ntitle: T\n---\n# Notes\n\nBody.\n\nSensitivity: restricted\n", "", ""},
	{"classification public", "---\nclassification: public\n---\nBody.\n", "", ""},
	{"security prose", "Security: this page explains TLS.\n\nBody.\n", "", ""},

	// Refused: the document fails (and is indexed restricted, see index).
	{"unclosed", "---\nsensitivity: restricted\n\nBody.\n", "", "line 2"},
	{"unclosed key case", "---\nSensitivity: restricted\nBody.\n", "", "line 2"},
	{"unclosed late", "---\ntitle: T\n\n# H\n\ntext\n\nsensitivity: restricted\n", "", "line 8"},
	{"unclosed toml", "+++\nsensitivity = \"restricted\"\nBody.\n", "", "line 2"},
	{"value case", "---\nsensitivity: Restricted\n---\nBody.\n", "", "line 2"},
	{"value unknown", "---\nsensitivity: secret\n---\nBody.\n", "", "line 2"},
	{"value bool", "---\nsensitivity: true\n---\nBody.\n", "", "line 2"},
	{"value empty", "---\nsensitivity:\n---\nBody.\n", "", "line 2"},
	{"value null", "---\nsensitivity: ~\n---\nBody.\n", "", "line 2"},
	{"value flow list", "---\nsensitivity: [restricted]\n---\nBody.\n", "", "line 2"},
	{"value block list", "---\nsensitivity:\n  - restricted\n---\nBody.\n", "", "line 2"},
	{"value map", "---\nsensitivity: {level: restricted}\n---\nBody.\n", "", "line 2"},
	{"duplicate", "---\nsensitivity: public\nsensitivity: restricted\n---\nBody.\n", "", "line 3"},
	{"duplicate by case", "---\nsensitivity: restricted\nSensitivity: public\n---\nBody.\n", "", "line 3"},
	{"tab indent", "---\ntitle: T\n\tsensitivity: restricted\n---\nBody.\n", "", "line 3"},
	{"yaml error", "---\ntitle: [oops\nsensitivity: restricted\n---\nBody.\n", "", "line"},
	{"commented out", "---\ntitle: T\n# sensitivity: restricted\n---\nBody.\n", "", "line 3"},
	{"comment only", "---\n# sensitivity: restricted\n---\nBody.\n", "", "line 2"},
	{"nested", "---\nparams:\n  sensitivity: restricted\n---\nBody.\n", "", "line 3"},
	{"nested flow", "---\nparams: {sensitivity: restricted}\n---\nBody.\n", "", "line 2"},
	{"typo", "---\nsensitivty: restricted\n---\nBody.\n", "", "sensitivty"},
	{"typo 2", "---\nsenstivity: restricted\n---\nBody.\n", "", "senstivity"},
	{"plural", "---\nsensitivities: restricted\n---\nBody.\n", "", "sensitivities"},
	{"suffixed", "---\nsensitivity_level: restricted\n---\nBody.\n", "", "sensitivity_level"},
	{"prefixed", "---\nx-sensitivity: restricted\n---\nBody.\n", "", "x-sensitivity"},
	{"classification", "---\nclassification: restricted\n---\nBody.\n", "", "classification"},
	{"confidential", "---\nconfidential: true\n---\nBody.\n", "", "confidential"},
	{"clearance", "---\nClearance: internal\n---\nBody.\n", "", "Clearance"},
	{"security restricted", "---\nsecurity: restricted\n---\nBody.\n", "", "security"},
	{"toml bare value", "+++\nsensitivity = restricted\n+++\nBody.\n", "", "line 2"},
	{"toml value case", "+++\nsensitivity = \"RESTRICTED\"\n+++\nBody.\n", "", "line 2"},
	{"toml in table", "+++\n[params]\nsensitivity = \"restricted\"\n+++\nBody.\n", "", "line 3"},
	{"toml duplicate", "+++\nsensitivity = \"public\"\nSENSITIVITY = \"restricted\"\n+++\nBody.\n", "", "line 3"},
	{"no fences", "Sensitivity: restricted\n\n# Body\n\nText.\n", "", "line 1"},
	{"no fences second line", "Title: Payroll\nsensitivity: restricted\n\nText.\n", "", "line 2"},
	{"four dashes", "----\nsensitivity: restricted\n----\n\nText.\n", "", "line 2"},
	{"json", "{\n  \"sensitivity\": \"restricted\"\n}\n\nText.\n", "", "line 2"},
	{"html comment", "<!-- sensitivity: restricted -->\n\nText.\n", "", "line 1"},
	{"bold label", "**Sensitivity:** restricted\n\nText.\n", "", "line 1"},
	{"setext fences", "Memo\n---\nsensitivity: restricted\n---\n\nText.\n", "", "line 3"},
}

func TestFrontMatterForms(t *testing.T) {
	for _, tc := range frontMatterCases {
		for _, ext := range []string{".md", ".txt"} {
			name := "doc" + ext
			var d *Doc
			var err error
			if ext == ".md" {
				d, err = Markdown(name, []byte(tc.src))
			} else {
				d, err = Text(name, []byte(tc.src))
			}
			if tc.fail != "" {
				if !errors.Is(err, ErrFrontMatter) || !strings.Contains(err.Error(), tc.fail) {
					t.Errorf("%s (%s): err %v, want ErrFrontMatter naming %q", tc.name, ext, err, tc.fail)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s (%s): %v", tc.name, ext, err)
				continue
			}
			if d.Sensitivity != tc.want {
				t.Errorf("%s (%s): sensitivity %q, want %q", tc.name, ext, d.Sensitivity, tc.want)
			}
			for _, u := range d.Units {
				if tc.want != "" && strings.Contains(d.Text[u.Start:u.End], "sensitivity") {
					t.Errorf("%s (%s): front matter in a unit: %q", tc.name, ext, d.Text[u.Start:u.End])
				}
			}
		}
	}
}

// Title and lang keys are matched without regard to case too; a key that
// resembles one of them is reported as a warning.
func TestFrontMatterOtherKeys(t *testing.T) {
	d, err := Markdown("a.md", []byte("---\nTitle: Big\nLANG: de\n---\nText.\n"))
	if err != nil || d.Title != "Big" || d.Language != "de" || len(d.Warnings) != 0 {
		t.Fatalf("%+v %v", d, err)
	}
	d, err = Markdown("a.md", []byte("---\ntitel: Big\nlanguage: de\n---\nText.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(d.Warnings, "; "); !strings.Contains(w, `line 2: key "titel"`) || !strings.Contains(w, `line 3: key "language"`) {
		t.Errorf("warnings %q", d.Warnings)
	}
}
