package testdocs

import "strings"

// FrontMatterCase is a Markdown document that declares a sensitivity,
// in a form escurel reads or in a near miss that it must refuse (issue 15).
type FrontMatterCase struct {
	Name string
	// Make returns the document declaring level ("internal" or
	// "restricted") over body.
	Make func(level, body string) string
	// Read: the declaration is read and the document is indexed at
	// level. Otherwise the document fails (kept, with a reason naming the
	// line, at restricted, without blocks).
	Read bool
}

func fenced(head string) func(level, body string) string {
	return func(level, body string) string { return strings.ReplaceAll(head, "L", level) + body }
}

// FrontMatterCases lists every form of the README's front-matter table.
var FrontMatterCases = []FrontMatterCase{
	{"yaml", fenced("---\nsensitivity: L\n---\n"), true},
	{"yaml dots", fenced("---\nsensitivity: L\n...\n"), true},
	{"yaml crlf", func(l, b string) string {
		return strings.ReplaceAll("---\nsensitivity: "+l+"\n---\n"+b, "\n", "\r\n")
	}, true},
	{"bom and blank lines", fenced("\uFEFF\n\n---\nsensitivity: L\n---\n"), true},
	{"key case", fenced("---\nSensitivity: L\n---\n"), true},
	{"key upper", fenced("---\nSENSITIVITY: L\n---\n"), true},
	{"space around colon", fenced("---\nsensitivity :\tL  \n---\n"), true},
	{"quoted", fenced("---\nsensitivity: 'L'\n---\n"), true},
	{"double quoted", fenced("---\nsensitivity: \"L\"\n---\n"), true},
	{"comment after", fenced("---\nsensitivity: L # as the owner said\n---\n"), true},
	{"toml", fenced("+++\nsensitivity = \"L\"\n+++\n"), true},
	{"toml key case", fenced("+++\nSensitivity = 'L'\n+++\n"), true},

	{"unclosed", fenced("---\nsensitivity: L\n\n"), false},
	{"unclosed key case", fenced("---\nSensitivity: L\n"), false},
	{"unclosed toml", fenced("+++\nsensitivity = \"L\"\n\n"), false},
	{"value case", func(l, b string) string { return "---\nsensitivity: " + strings.ToUpper(l[:1]) + l[1:] + "\n---\n" + b }, false},
	{"value list", fenced("---\nsensitivity: [L]\n---\n"), false},
	{"value block list", fenced("---\nsensitivity:\n  - L\n---\n"), false},
	{"duplicate key", fenced("---\nsensitivity: public\nSensitivity: L\n---\n"), false},
	{"tab indent", fenced("---\ntitle: x\n\tsensitivity: L\n---\n"), false},
	{"commented out", fenced("---\ntitle: x\n# sensitivity: L\n---\n"), false},
	{"nested", fenced("---\nparams:\n  sensitivity: L\n---\n"), false},
	{"typo", fenced("---\nsensitivty: L\n---\n"), false},
	{"suffix", fenced("---\nsensitivity_level: L\n---\n"), false},
	{"classification", fenced("---\nclassification: L\n---\n"), false},
	{"toml bare", fenced("+++\nsensitivity = L\n+++\n"), false},
	{"toml table", fenced("+++\n[params]\nsensitivity = \"L\"\n+++\n"), false},
	{"no fences", fenced("Sensitivity: L\n\n"), false},
	{"four dashes", fenced("----\nsensitivity: L\n----\n\n"), false},
	{"json", fenced("{\n  \"sensitivity\": \"L\"\n}\n\n"), false},
	{"html comment", fenced("<!-- sensitivity: L -->\n\n"), false},
}
