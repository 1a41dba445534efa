package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/escurel/escurel/index"
	"github.com/escurel/escurel/index/extract"
	"github.com/escurel/escurel/internal/modelserver"
	"github.com/escurel/escurel/internal/testdocs"
	"github.com/escurel/escurel/rerank"
)

var smallToBig = []string{"parent_child(max_bytes=200,parent_max_bytes=1500)", "sentence_window(window=2)"}

// Every child cites its document exactly, its window is verbatim and
// contains it; the chunkers survive a rebuild with the same digest.
func TestSmallToBigCitations(t *testing.T) {
	pages := sharedData(t, "markdown/fastapi")
	for _, spec := range smallToBig {
		e := newEnv(t, index.Options{Chunker: spec})
		if _, err := e.ix.IngestFiles(context.Background(), []string{pages}, index.IngestOptions{}); err != nil {
			t.Fatal(err)
		}
		n := e.checkVerbatim()
		ctx := context.Background()
		recs, _ := e.ix.Blobs().Records(ctx)
		windows := 0
		for _, r := range recs {
			data, _ := e.ix.Blobs().Get(ctx, r.BlobID)
			blocks, err := e.ix.DocumentBlocks(ctx, r.DocID, index.Restricted)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range blocks {
				l := b.ParentLocator
				if l == nil || b.PromptText == "" {
					t.Fatalf("%s %s block %s: no window", spec, r.Source, b.BlockID)
				}
				if string(data[l.ByteStart:l.ByteEnd]) != b.PromptText {
					t.Fatalf("%s %s block %s: window is not text[%d:%d]", spec, r.Source, b.BlockID, l.ByteStart, l.ByteEnd)
				}
				if l.ByteStart > b.ByteStart || l.ByteEnd < b.ByteEnd || l.ParagraphStart >= l.ParagraphEnd {
					t.Fatalf("%s %s block %s: window %+v does not contain the block [%d, %d)", spec, r.Source, b.BlockID, l, b.ByteStart, b.ByteEnd)
				}
				windows++
			}
		}
		digest := e.digest()
		st, _ := e.ix.Stats(ctx)
		sum := e.rebuild(index.Options{})
		if sum.Verify.Digest != digest {
			t.Errorf("%s: rebuild digest %s, ingest %s", spec, sum.Verify.Digest, digest)
		}
		t.Logf("%s: %d documents, %d blocks (%.1f a document), %d windows, index file %.1f MB",
			spec, len(recs), n, float64(n)/float64(len(recs)), windows, float64(st.FileBytes)/1e6)
	}
}

// A word that only the window holds does not retrieve the child: windows
// never feed ranking.
func TestWindowDoesNotFeedRanking(t *testing.T) {
	e := newEnv(t, index.Options{Chunker: "parent_child(max_bytes=64,parent_max_bytes=4000)"})
	e.ingest("/w.md", "# Section\n\nThe first paragraph speaks of quokkas only, at some length so that it is a child of its own.\n\n"+
		"The second paragraph speaks of numbats only, at some length so that it is a child of its own too.\n")
	hits := searchWith(t, e.ix, "quokkas", index.SearchOptions{Mode: index.ModeBM25, K: 10})
	if len(hits) != 1 || !strings.Contains(hits[0].Body, "quokkas") {
		t.Fatalf("hits %+v", hits)
	}
	if !strings.Contains(hits[0].PromptText, "numbats") {
		t.Errorf("the child's prompt_text is not its whole parent: %q", hits[0].PromptText)
	}
}

// secretResponse serializes everything a search returns, explain included.
func secretResponse(t *testing.T, ix *index.Index, q string, opts index.SearchOptions) (string, int) {
	t.Helper()
	hits, err := ix.Search(context.Background(), q, &opts)
	if err != nil {
		t.Fatalf("search %q %+v: %v", q, opts, err)
	}
	b, _ := json.Marshal(hits)
	return string(b), len(hits)
}

// parent_child_isolation: a restricted block that carries a window and is
// the best match leaks no byte of its body or window, in any mode, with
// explain and a reranker; k public hits still come back.
func TestParentChildIsolation(t *testing.T) {
	srv := modelserver.Start(t)
	rr, _ := rerank.NewHTTP(srv.URL+"/rerank", rerank.Options{})
	for _, spec := range smallToBig {
		e := newEnv(t, index.Options{Chunker: spec})
		ctx := context.Background()
		secret := "# Merger plan\n\nProject kestrel acquires the ocelot company. Kestrel closes in March.\n\nThe board meets on Friday about kestrel and ocelot terms.\n"
		if _, err := e.ix.Ingest(ctx, index.Input{Source: "/s/merger.md", Data: []byte(secret), Sensitivity: index.Restricted}); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			e.ingest(fmt.Sprintf("/p/%d.md", i), fmt.Sprintf("# Public %d\n\nThe ocelot company publishes report %d. Nothing else here.\n", i, i))
		}
		for _, mode := range []string{index.ModeBM25, index.ModeDense, index.ModeHybrid} {
			for _, withRerank := range []bool{false, true} {
				opts := index.SearchOptions{Mode: mode, K: 3, Explain: true}
				if withRerank {
					opts.Reranker = rr
				}
				out, n := secretResponse(t, e.ix, "project kestrel acquires ocelot board", opts)
				for _, word := range []string{"kestrel", "Kestrel", "Merger", "acquires", "board meets", "merger.md"} {
					if strings.Contains(out, word) {
						t.Errorf("%s %s rerank=%v: %q leaked: %s", spec, mode, withRerank, word, out)
					}
				}
				if n != 3 {
					t.Errorf("%s %s: %d hits, want 3 public ones", spec, mode, n)
				}
				full, _ := secretResponse(t, e.ix, "project kestrel acquires ocelot board", index.SearchOptions{Mode: mode, K: 3, Clearance: index.Restricted})
				if !strings.Contains(full, "kestrel") {
					t.Errorf("%s %s: with clearance the restricted block is not found", spec, mode)
				}
			}
		}
		for _, r := range srv.Requests() {
			for _, p := range r.Passages {
				if strings.Contains(p, "estrel") {
					t.Errorf("the reranker saw restricted text: %q", p)
				}
			}
		}
	}
}

// The randomized leak suite: random corpora mixing sensitivities, queries
// built from restricted text, every mode, clearance and small-to-big
// chunker: no text of a document above the clearance in any response.
func TestRandomizedLeaks(t *testing.T) {
	vocab := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu")
	levels := []string{index.Public, index.Internal, index.Restricted}
	cases, controls, queries, malformed := 0, 0, 0, 0
	for corpus := range 4 {
		r := rand.New(rand.NewPCG(uint64(corpus), 99))
		spec := smallToBig[corpus%2]
		e := newEnv(t, index.Options{Chunker: spec})
		secrets := map[string]string{} // secret word → its document's sensitivity
		var restrictedTexts []string
		for d := range 20 {
			sens := levels[r.IntN(3)]
			secret := fmt.Sprintf("secret%dx%02dz", corpus, d) // no secret is a prefix of another
			secrets[secret] = sens
			var b strings.Builder
			fmt.Fprintf(&b, "# Doc %d %s\n\n", d, secret)
			for p := range 1 + r.IntN(3) {
				for s := range 2 + r.IntN(3) {
					for range 4 + r.IntN(6) {
						b.WriteString(vocab[r.IntN(len(vocab))] + " ")
					}
					if s == 0 && p == 0 {
						b.WriteString(secret)
					}
					b.WriteString(". ")
				}
				b.WriteString("\n\n")
			}
			in := index.Input{Source: fmt.Sprintf("/c%d/%d.md", corpus, d), Data: []byte(b.String()), Sensitivity: sens}
			if sens != index.Public && r.IntN(2) == 0 {
				// Declared in front matter, in a form read or a near miss
				// refused (issue 15): never visible below sens either way.
				c := testdocs.FrontMatterCases[r.IntN(len(testdocs.FrontMatterCases))]
				in.Data, in.Sensitivity = []byte(c.Make(sens, b.String())), ""
				malformed++
			}
			if _, err := e.ix.Ingest(context.Background(), in); err != nil && !errors.Is(err, extract.ErrFrontMatter) {
				t.Fatal(err)
			}
			if sens != index.Public {
				restrictedTexts = append(restrictedTexts, b.String())
			}
		}
		for _, clearance := range []string{index.Public, index.Internal} {
			failed, err := e.ix.Failed(context.Background(), clearance)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(failed)
			for secret, sens := range secrets {
				if (sens == index.Restricted || (sens == index.Internal && clearance == index.Public)) && strings.Contains(string(out), secret) {
					t.Fatalf("corpus %d: the failure list at %s shows %s (%s)", corpus, clearance, secret, sens)
				}
			}
		}
		for q := range 15 {
			src := restrictedTexts[r.IntN(len(restrictedTexts))]
			words := strings.Fields(src)
			start := r.IntN(max(1, len(words)-5))
			query := strings.Join(words[start:min(len(words), start+5)], " ")
			// Positive control: with clearance, the source's secret shows.
			queries++
			if out, _ := secretResponse(t, e.ix, query+" "+strings.Fields(src)[3], index.SearchOptions{K: 5, Clearance: index.Restricted}); strings.Contains(out, strings.Fields(src)[3]) {
				controls++
			}
			for _, mode := range []string{index.ModeBM25, index.ModeDense, index.ModeHybrid} {
				for _, clearance := range []string{index.Public, index.Internal} {
					out, _ := secretResponse(t, e.ix, query, index.SearchOptions{Mode: mode, K: 5, Clearance: clearance, Explain: true})
					cases++
					for secret, sens := range secrets {
						if sens == index.Restricted || (sens == index.Internal && clearance == index.Public) {
							if strings.Contains(out, secret) {
								t.Fatalf("corpus %d query %d %q, %s at %s: %s (%s) leaked", corpus, q, query, mode, clearance, secret, sens)
							}
						}
					}
				}
			}
		}
	}
	if controls == 0 {
		t.Error("the queries never found their restricted source even with clearance: the suite cannot see a leak")
	}
	t.Logf("%d leak cases (%d documents declaring their sensitivity in front matter, read or refused), 0 leaks; with restricted clearance the source document came back in %d of %d queries", cases, malformed, controls, queries)
}

// expand: neighbours and window within the budget; a restricted block
// answers exactly like a missing one.
func TestExpand(t *testing.T) {
	e := newEnv(t, index.Options{Chunker: "sentence_window(window=1)"})
	ctx := context.Background()
	e.ingest("/e.md", "# Expand\n\nOne sentence here. Two sentence here. Three sentence here. Four sentence here. Five sentence here.\n")
	if _, err := e.ix.Ingest(ctx, index.Input{Source: "/secret.md", Data: []byte("# S\n\nHidden words.\n"), Sensitivity: index.Restricted}); err != nil {
		t.Fatal(err)
	}
	hits := searchWith(t, e.ix, "three", index.SearchOptions{K: 1})
	x, err := e.ix.Expand(ctx, hits[0].BlockID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if x.Block.Body != "Three sentence here." || len(x.Before) != 2 || len(x.After) != 2 || x.Before[1].Body != "Two sentence here." ||
		x.Block.PromptText != "Two sentence here. Three sentence here. Four sentence here." || x.Truncated {
		t.Errorf("expansion %+v", x)
	}
	small, err := e.ix.Expand(ctx, hits[0].BlockID, &index.ExpandOptions{MaxBytes: 45})
	if err != nil || small.Bytes > 45 || !small.Truncated || small.Block.Body != "Three sentence here." {
		t.Errorf("bounded expansion %+v, %v", small, err)
	}
	secret := searchWith(t, e.ix, "hidden", index.SearchOptions{K: 1, Clearance: index.Restricted})[0].BlockID
	_, errSecret := e.ix.Expand(ctx, secret, nil)
	_, errMissing := e.ix.Expand(ctx, "00000000000f4240", nil)
	if !errors.Is(errSecret, index.ErrNotFound) || !errors.Is(errMissing, index.ErrNotFound) ||
		strings.Replace(errSecret.Error(), secret, "N", 1) != strings.Replace(errMissing.Error(), "00000000000f4240", "N", 1) ||
		!strings.Contains(errMissing.Error(), "no such block 00000000000f4240 (its document changed or was deleted)") {
		t.Errorf("restricted %v; missing %v", errSecret, errMissing)
	}
	// A malformed id is its own error, not "no such block".
	for _, bad := range []string{"", "123", "00000000000F4240", "00000000000f42400", "00000000000f424g"} {
		if _, err := e.ix.Expand(ctx, bad, nil); !errors.Is(err, index.ErrBadBlockID) || errors.Is(err, index.ErrNotFound) {
			t.Errorf("Expand(%q): %v, want ErrBadBlockID", bad, err)
		}
	}
	if x, err := e.ix.Expand(ctx, secret, &index.ExpandOptions{Clearance: index.Restricted}); err != nil || x.Block.Body != "Hidden words." {
		t.Errorf("with clearance: %+v %v", x, err)
	}
}

// From review: a huge neighbour count is bounded by the document, and a
// window cut to the budget stays around the block, with its locator the
// range kept.
func TestExpandBounds(t *testing.T) {
	e := newEnv(t, index.Options{Chunker: "parent_child(max_bytes=64,parent_max_bytes=4000)"})
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("# Long section\n\n")
	for i := range 30 {
		fmt.Fprintf(&b, "Paragraph number %02d of the long section, with words.\n\n", i)
	}
	text := b.String()
	e.ingest("/long.md", text)
	hit := searchWith(t, e.ix, "28", index.SearchOptions{K: 1})[0]
	x, err := e.ix.Expand(ctx, hit.BlockID, &index.ExpandOptions{Before: 1 << 62, After: 1 << 62, MaxBytes: 300})
	if err != nil {
		t.Fatal(err)
	}
	l := x.Block.ParentLocator
	if !x.Truncated || l == nil || text[l.ByteStart:l.ByteEnd] != x.Block.PromptText || !strings.Contains(x.Block.PromptText, x.Block.Body) || x.Bytes > 300 {
		t.Errorf("cut window %q at %+v (body %q), %d bytes", x.Block.PromptText, l, x.Block.Body, x.Bytes)
	}
	tiny, err := e.ix.Expand(ctx, hit.BlockID, &index.ExpandOptions{MaxBytes: 10})
	if err != nil || tiny.Block.PromptText != "" || tiny.Block.ParentLocator != nil || !tiny.Truncated || tiny.Block.Body != hit.Body {
		t.Errorf("a budget below the body: %+v, %v", tiny, err)
	}
}

// From review: hard-wrapped prose is not cut at its line breaks, and a
// fenced code block is one block.
func TestSentenceWindowLineBreaks(t *testing.T) {
	e := newEnv(t, index.Options{Chunker: "sentence_window(window=1)"})
	e.ingest("/wrap.md", "# Wrap\n\nThe first sentence\ncontinues on the next line and ends here. The second\nsentence also wraps.\n\n```go\nfunc main() {\n}\n```\n")
	var bodies []string
	for _, h := range searchWith(t, e.ix, "sentence continues wraps func main", index.SearchOptions{K: 10}) {
		bodies = append(bodies, h.Body)
	}
	want := map[string]bool{"The first sentence\ncontinues on the next line and ends here.": true, "The second\nsentence also wraps.": true, "```go\nfunc main() {\n}\n```": true}
	if len(bodies) != 3 {
		t.Fatalf("blocks %q", bodies)
	}
	for _, b := range bodies {
		if !want[b] {
			t.Errorf("block %q", b)
		}
	}
}
