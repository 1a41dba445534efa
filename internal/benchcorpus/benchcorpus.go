// Package benchcorpus builds the passages and queries escurel's
// benchmarks index and ask (bench/fts, a module of its own, and
// index/dense's benchmarks): real text from the shared test data and the
// machine's /usr/share/doc, the same passages for the same arguments, so
// that the figures of every benchmark are of one corpus.
package benchcorpus

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Passage is one unit of text every engine indexes.
type Passage struct {
	ID    string
	Title string
	Body  string
}

// PassageWords is the target passage length, in words.
const PassageWords = 150

// Passages builds n passages from real text, in a fixed order: the SciFact
// abstracts (with their titles), the shared FastAPI Markdown, then the text
// files Debian installs under /usr/share/doc (gzip ones decompressed), each
// cut into windows of about PassageWords words, duplicates dropped. Past the
// real passages it adds perturbed copies (15% of words replaced by words of
// the pool, deterministically). The same arguments give the same passages.
func Passages(shared string, n int) []Passage {
	var pool []Passage
	seen := map[uint64]bool{}
	add := func(title, text string) {
		words := strings.Fields(text)
		for len(words) > 0 {
			k := min(PassageWords, len(words))
			if len(words)-k < PassageWords/3 { // fold a short tail into this passage
				k = len(words)
			}
			body := strings.Join(words[:k], " ")
			words = words[k:]
			h := fnv.New64a()
			h.Write([]byte(body))
			if sum := h.Sum64(); !seen[sum] && len(body) > 80 {
				seen[sum] = true
				pool = append(pool, Passage{ID: "p" + strconv.Itoa(len(pool)), Title: title, Body: body})
			}
		}
	}
	if f, err := os.Open(filepath.Join(shared, "scifact", "corpus.jsonl")); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var d struct{ Title, Text string }
			if json.Unmarshal(sc.Bytes(), &d) == nil {
				add(d.Title, d.Text)
			}
		}
		f.Close()
	}
	var files []string
	filepath.WalkDir(filepath.Join(shared, "markdown"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	var docs []string
	filepath.WalkDir("/usr/share/doc", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".html") && !strings.HasSuffix(p, ".htm") {
			docs = append(docs, p)
		}
		return nil
	})
	sort.Strings(docs)
	for _, p := range append(files, docs...) {
		if len(pool) >= n {
			break
		}
		text, ok := ReadText(p)
		if ok {
			add(filepath.Base(filepath.Dir(p))+" "+filepath.Base(p), text)
		}
	}
	if len(pool) >= n || len(pool) == 0 {
		return pool[:min(n, len(pool))]
	}
	// Perturbed copies.
	var vocab []string
	for _, p := range pool[:min(len(pool), 20000)] {
		vocab = append(vocab, strings.Fields(p.Body)...)
	}
	real := len(pool)
	for c := 1; len(pool) < n; c++ {
		rng := rand.New(rand.NewPCG(uint64(c), 42))
		for i := 0; i < real && len(pool) < n; i++ {
			words := strings.Fields(pool[i].Body)
			for j := range words {
				if rng.IntN(100) < 15 {
					words[j] = vocab[rng.IntN(len(vocab))]
				}
			}
			pool = append(pool, Passage{ID: "p" + strconv.Itoa(len(pool)), Title: pool[i].Title, Body: strings.Join(words, " ")})
		}
	}
	return pool
}

// ReadText returns a file's text (gunzipped when it ends in .gz), or false
// when it is not UTF-8 text.
func ReadText(p string) (string, bool) {
	data, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	if strings.HasSuffix(p, ".gz") {
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return "", false
		}
		if data, err = io.ReadAll(io.LimitReader(r, 64<<20)); err != nil {
			return "", false
		}
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return "", false
	}
	return string(data), true
}

// Queries returns the first n SciFact claims (queries.jsonl), fewer when
// the file has fewer, none when it cannot be read.
func Queries(shared string, n int) []string {
	f, err := os.Open(filepath.Join(shared, "scifact", "queries.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		var q struct{ Text string }
		if json.Unmarshal(sc.Bytes(), &q) == nil && q.Text != "" {
			out = append(out, q.Text)
		}
	}
	return out
}
