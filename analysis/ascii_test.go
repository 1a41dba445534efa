package analysis

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rivo/uniseg"
)

func unisegWords(s string) []string {
	var out []string
	state := -1
	var w string
	for len(s) > 0 {
		w, s, state = uniseg.FirstWordInString(s, state)
		if hasLetterOrDigit(w) {
			out = append(out, w)
		}
	}
	return out
}

func fastWords(s string) []string {
	var out []string
	asciiWords(s, func(w string) { out = append(out, w) })
	return out
}

// TestASCIIWordsMatchUniseg checks the ASCII fast path against UAX #29 on
// fixed cases and on 20,000 random strings over the characters whose word
// break classes matter.
func TestASCIIWordsMatchUniseg(t *testing.T) {
	for _, s := range []string{
		"can't won't e.g. 3.14 1,000,000 item_id _x a_ x:y a.3 3.a a'b' 'a' a..b 1..2 1,a ok;go",
		"The users' Running jobs were running quickly. OAuth2 v1.2.3 foo::bar",
	} {
		if diff := cmp.Diff(unisegWords(s), fastWords(s)); diff != "" {
			t.Errorf("%q (-uniseg +fast):\n%s", s, diff)
		}
	}
	const alphabet = "aZq09_:.',; -!\n\t\"()"
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for i := rng.IntN(24); i >= 0; i-- {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		if diff := cmp.Diff(unisegWords(s), fastWords(s)); diff != "" {
			t.Fatalf("%q (-uniseg +fast):\n%s", s, diff)
		}
	}
}
