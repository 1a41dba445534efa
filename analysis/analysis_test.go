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
		if diff := cmp.Diff(want, Simple{}.Terms(nil, in, "en")); diff != "" {
			t.Errorf("Terms(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestStandard(t *testing.T) {
	for _, tc := range []struct {
		lang, text string
		want       []string
	}{
		// English: stop words go, stems meet, possessives and ’ are handled.
		{"en", "The users’ Running jobs were running quickly", []string{"user", "run", "job", "run", "quick"}},
		{"en", "Path parameters with types: item_id is an int.", []string{"path", "paramet", "type", "item_id", "int"}},
		{"en", "version 3.14 of OAuth2", []string{"version", "3.14", "oauth2"}},
		// German: ß folds to ss on both sides, umlauts survive, stop words go.
		{"de", "Die Straße und die STRASSE sind größer", []string{"strass", "strass", "gross"}},
		{"de-CH", "Häuser", []string{"haus"}},
		// French: elision stays one word, accents survive the stemmer.
		{"fr", "Les données et l'élève étaient réunies", []string{"don", "élev", "réun"}},
		{"it", "dell'università", []string{"univers"}},
		// Russian: Cyrillic folds and stems.
		{"ru", "Большие ДАННЫЕ и поиск", []string{"больш", "дан", "поиск"}},
		// Greek: no stemmer, but the text survives, folded.
		{"el", "Η ΑΝΑΖΗΤΗΣΗ κειμένου", []string{"η", "αναζητηση", "κειμένου"}},
		// CJK: bigrams over runs, a lone character stays.
		{"zh", "全文检索 是 好", []string{"全文", "文检", "检索", "是", "好"}},
		{"ja", "東京タワーへ行く", []string{"東京", "タワー", "へ行", "行く"}},
		{"ko", "한국어 검색", []string{"한국어", "검색"}},
		// Fullwidth forms normalize (NFKC).
		{"en", "ＡＢＣ １２３", []string{"abc", "123"}},
		{"en", "", nil},
	} {
		got := Standard{}.Terms(nil, tc.text, tc.lang)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %q (-want +got):\n%s", tc.lang, tc.text, diff)
		}
	}
}

func TestStandardLanguages(t *testing.T) {
	for _, ok := range []string{"en", "de-CH", "pt-BR", "nb", "zh", "el", "ru"} {
		if err := (Standard{}).CheckLanguage(ok); err != nil {
			t.Errorf("CheckLanguage(%q): %v", ok, err)
		}
	}
	err := Standard{}.CheckLanguage("xx")
	if err == nil || !strings.Contains(err.Error(), "de, el, en, es") {
		t.Errorf("CheckLanguage(xx) = %v, want the list of languages", err)
	}
	// Each Snowball stop list loaded.
	for _, tag := range []string{"da", "de", "en", "es", "fi", "fr", "hu", "it", "nl", "no", "pt", "ru", "sv"} {
		l, _ := lookup(tag)
		if len(l.stop) < 90 || l.stem == nil {
			t.Errorf("%s: %d stop words, stemmer %v", tag, len(l.stop), l.stem != nil)
		}
	}
}

func TestLookup(t *testing.T) {
	if a, err := ByID("simple/1"); err != nil || a.ID() != "simple/1" {
		t.Errorf("ByID = %v, %v", a, err)
	}
	if a, err := ByName("standard"); err != nil || a.ID() != "standard/2" {
		t.Errorf("ByName(standard) = %v, %v", a, err)
	}
	if _, err := ByID("simple/2"); err == nil || !strings.Contains(err.Error(), "simple/1, standard/1, standard/2") {
		t.Errorf("ByID(simple/2) err = %v", err)
	}
	if _, err := ByName("english"); err == nil {
		t.Error("ByName(english) succeeded")
	}
}

func BenchmarkStandard(b *testing.B) {
	text := strings.Repeat("Many searchers index documents; retrieval-augmented generation cites verbatim blocks. ", 20)
	b.SetBytes(int64(len(text)))
	var dst []string
	for i := 0; i < b.N; i++ {
		dst = Standard{}.Terms(dst[:0], text, "en")
	}
}

// standard/2 drops default-ignorable code points (soft hyphen, zero-width
// space and joiners, word joiner, BOM, variation selectors), so a word
// with a soft hyphen meets the word without; standard/1 is unchanged, for
// the indexes built with it.
func TestStandardIgnorable(t *testing.T) {
	ins := []string{"co\u00ADoperate", "co\u200Boperate", "co\u200Doperate", "co\u2060operate", "\uFEFFcooperate", "coop\uFE0Ferate"}
	for _, in := range ins {
		var std Standard
		if diff := cmp.Diff(std.Terms(nil, "cooperate", "en"), std.Terms(nil, in, "en")); diff != "" {
			t.Errorf("standard/2 %q (-want +got):\n%s", in, diff)
		}
	}
	v1 := StandardV1{}
	if got := v1.Terms(nil, "co\u00ADoperate", "en"); len(got) != 1 || got[0] == "cooper" {
		t.Errorf("standard/1 changed: %q", got)
	}
	// Visible format characters stay: an Arabic number sign is not
	// ignorable.
	if !strings.Contains(dropIgnorable("\u0600١٢"), "\u0600") {
		t.Error("U+0600 dropped")
	}
	if a, err := ByName("standard"); err != nil || a.ID() != "standard/2" {
		t.Errorf("ByName(standard) = %v, %v", a, err)
	}
	if a, err := ByID("standard/1"); err != nil || a.ID() != "standard/1" {
		t.Errorf("ByID(standard/1) = %v, %v", a, err)
	}
}
