package analysis

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wholeWords is what StandardV1 segmented a text with other than ASCII
// characters into before pieces: the full path over the whole text.
func wholeWords(text string) []string {
	var out []string
	unicodeWords(text, func(w string) { out = append(out, w) })
	return out
}

// pieceWords is the words of text as Terms now finds them: piece by piece.
func pieceWords(text string) []string {
	var out []string
	emit := func(w string) { out = append(out, w) }
	pieces(text, func(p string, ascii bool) {
		if ascii {
			asciiWords(strings.ToLower(p), emit)
		} else {
			unicodeWords(p, emit)
		}
	})
	return out
}

// TestPiecesMatchWhole checks that analyzing a text piece by piece gives
// the words of the whole: on texts made to test the cuts' edges, and on
// every SciFact title and abstract (when the shared data is there).
func TestPiecesMatchWhole(t *testing.T) {
	texts := []string{
		"Ünïcödé text with ASCII words",
		"ASCII then Ünïcödé then ASCII",
		"a \u0301b c",        // a combining mark after a space
		"x \u0301\u0301 y z", // several
		"fullwidth ＡＢＣ and ﬁne ligatures",
		"STRASSE Straße straße",
		"l’élève and l'élève d’Artagnan",
		"漢字 かな カタカナ mixed 漢 字",
		"漢字\n漢字\r\n漢字\t漢字 漢",
		"3.14 x 2,5 β-blockers α.β a:b ü:x",
		"co\u00ADoperate and zero\u200Bwidth",
		"\r\nline\r\nbreaks ü\r\n",
		"trailing ü",
		"ü leading",
		"ü",
		"a  ü  b  ",
		"emoji 👍🏽 and flags 🇫🇷🇩🇪 ok",
		"version v1.2 über-cool Über_cool über's O’Neil",
		"\u0085next line ü\u2028sep b",
		"Ǆemo ǅ ǆ ΣΑΣ σας",
	}
	corpus, err := scifactTexts()
	if errors.Is(err, os.ErrNotExist) {
		t.Logf("SciFact not checked: the shared test data is absent (%v)", err)
	} else if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, corpus...)
	checked := 0
	for _, text := range texts {
		text = dropIgnorable(text)
		if isASCII(text) {
			continue
		}
		checked++
		if diff := cmp.Diff(wholeWords(text), pieceWords(text)); diff != "" {
			t.Fatalf("%q: pieces differ from the whole (-whole +pieces):\n%s", text, diff)
		}
	}
	t.Logf("%d texts with characters other than ASCII checked", checked)
}

// Standard/1 (StandardV1) does not drop default-ignorable code points
// before cutting text into pieces, so pieces must match the whole with
// them left in too: soft hyphens, zero-width spaces and joiners, word
// joiners, variation selectors, the combining grapheme joiner and the
// Mongolian vowel separator beside spaces and non-ASCII letters.
func TestPiecesMatchWholeWithIgnorables(t *testing.T) {
	texts := []string{
		"co\u00ADoperate and zero\u200Bwidth",
		"ü\u00AD b", "ü \u00ADb", "ü\u200D b c", "a \u200Db ü", "ü \u2060x y",
		"x\uFE0F y ü", "ü\u200B x", "\u200B ü a", "ü a\u00AD b\u200C c",
		"漢\u200B 字 a", "ü\u034F b", "über \u180Eb",
	}
	for _, text := range texts {
		if diff := cmp.Diff(wholeWords(text), pieceWords(text)); diff != "" {
			t.Errorf("%q: pieces differ from the whole (-whole +pieces):\n%s", text, diff)
		}
	}
}
