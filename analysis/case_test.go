package analysis

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/blevesearch/snowballstem"
	"github.com/google/go-cmp/cmp"
)

// referenceTerms is what StandardV1.Terms must return for text: the full
// path's words (fold, UAX #29) of the whole text, each through the
// elision, stop list, stemmer and length cap of lang, without any cache.
func referenceTerms(text, lang string) []string {
	l, err := lookup(lang)
	if err != nil {
		l = &language{}
	}
	env := snowballstem.NewEnv("")
	var out []string
	unicodeWords(text, func(w string) {
		if l.elision != nil {
			if art, rest, ok := strings.Cut(w, "'"); ok && l.elision[art] {
				w = rest
			}
		}
		if l.stop[w] {
			return
		}
		if l.stem != nil {
			env.SetCurrent(w)
			l.stem(env)
			w = env.Current()
		}
		if len(w) <= MaxTermBytes {
			out = append(out, w)
		}
	})
	return out
}

// TestTermsMatchReferenceAnyCase checks Terms against referenceTerms on
// texts that write one word in several cases, in ASCII text and in the
// ASCII pieces of other text, twice each (the second time from a warm
// word cache, whose keys are words as written), and on every SciFact
// title and abstract when the shared data is there.
func TestTermsMatchReferenceAnyCase(t *testing.T) {
	texts := []string{
		"The the THE tHe running Running RUNNING runs",
		"Über THE running Straße the Running ü RUNNING",
		"OAuth2 oauth2 OAUTH2 v1.2.3 V1.2.3 Item_ID item_id can't CAN'T",
		"L'Élève l'élève L'ELEVE d'Artagnan D'ARTAGNAN",
		"ÉCOLE école Ecole ECOLE e.g. E.G. x:Y X:y",
		strings.Repeat("Antidisestablishmentarianism", 5) + " " + strings.Repeat("A", 101) + " " + strings.Repeat("a", 100),
	}
	corpus, err := scifactTexts()
	if errors.Is(err, os.ErrNotExist) {
		t.Logf("SciFact not checked: the shared test data is absent (%v)", err)
	} else if err != nil {
		t.Fatal(err)
	}
	check := func(lang string, round int, texts []string) {
		for _, text := range texts {
			want := referenceTerms(text, lang)
			got := StandardV1{}.Terms(nil, text, lang)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s, round %d, %.80q (-reference +Terms):\n%s", lang, round, text, diff)
			}
		}
	}
	for _, lang := range []string{"en", "fr", "de", "xx"} {
		for round := range 2 {
			check(lang, round, texts)
		}
	}
	check("en", 0, corpus) // its words repeat: most come from the cache
}
