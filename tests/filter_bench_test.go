package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escurel/escurel/index"
)

// BenchmarkFilter measures search latency with metadata filters of
// selectivity 50 %, 10 %, 1 % and 0.01 % against the unfiltered search,
// on a synthetic corpus of ESCUREL_FILTER_BLOCKS blocks (default 100,000:
// documents of 10 sections, each a block, with a "bucket" number 0 to
// docs-1 as metadata; bucket < docs·s selects the fraction s of the
// blocks). Per mode (bm25, dense) it reports the p50 and p95 of 40 queries
// (k = 10), and checks that every filtered search returns k hits when k
// blocks match both the query and the filter (counted from the unfiltered
// ranking at index.MaxK). The first filtered search after the index is
// opened builds the metadata table (reported apart as first-ms); after a
// one-document write, the first filtered search brings it up to date
// (after-write-first-ms, the p50 of 5 writes). With ESCUREL_FILTER_DIR
// the index is kept in that directory and a later run reuses it (the
// ingest is skipped when it already holds blocks).
//
//	go test ./tests -run '^$' -bench BenchmarkFilter -benchtime 1x
func BenchmarkFilter(b *testing.B) {
	ctx := context.Background()
	blocks := 100000
	if v := os.Getenv("ESCUREL_FILTER_BLOCKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("ESCUREL_FILTER_BLOCKS=%q: want a number ≥ 1000", v)
		}
		blocks = n
	}
	const perDoc = 10
	docs := blocks / perDoc
	dir := b.TempDir()
	if v := os.Getenv("ESCUREL_FILTER_DIR"); v != "" {
		dir = v // kept: a later run with the same block count reuses the corpus
	}
	ix, err := index.Open(ctx, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	st, err := ix.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	built := st.Blocks > 0
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx%c", i, 'a'+rune(i%26))
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 2, uint64(len(vocab)-1))
	t0 := time.Now()
	var batch []index.Input
	for d := 0; d < docs && !built; d++ {
		var sb strings.Builder
		for s := 0; s < perDoc; s++ {
			fmt.Fprintf(&sb, "## Section %d\n\n", s)
			for w := 0; w < 40; w++ {
				sb.WriteString(vocab[zipf.Uint64()])
				sb.WriteByte(' ')
			}
			sb.WriteString("\n\n")
		}
		batch = append(batch, index.Input{Source: fmt.Sprintf("/bench/%06d.md", d), Data: []byte(sb.String()),
			Meta: map[string]any{"bucket": d}})
		if len(batch) == 500 || d == docs-1 {
			if _, errs, err := ix.IngestBatch(ctx, batch); err != nil {
				b.Fatal(err)
			} else {
				for _, e := range errs {
					if e != nil {
						b.Fatal(e)
					}
				}
			}
			batch = batch[:0]
		}
	}
	if st, err = ix.Stats(ctx); err != nil {
		b.Fatal(err)
	}
	if st.Documents != int64(docs) {
		b.Fatalf("%d documents in the index, want %d (ESCUREL_FILTER_DIR holds another corpus?)", st.Documents, docs)
	}
	b.Logf("%d documents, %d blocks, ingested in %s", docs, st.Blocks, time.Since(t0).Round(time.Second))
	queries := make([]string, 40)
	for i := range queries {
		queries[i] = vocab[20+rng.IntN(400)] + " " + vocab[20+rng.IntN(400)] + " " + vocab[400+rng.IntN(2000)]
	}
	sels := []struct {
		name string
		frac float64
	}{{"none", 1}, {"50%", 0.5}, {"10%", 0.1}, {"1%", 0.01}, {"0.01%", 0.0001}}
	b.ResetTimer()
	for _, mode := range []string{index.ModeBM25, index.ModeDense} {
		// The truth: each query's full ranking, by bucket.
		full := make([][]float64, len(queries))
		for i, q := range queries {
			hits, err := ix.Search(ctx, q, &index.SearchOptions{K: index.MaxK, Mode: mode})
			if err != nil {
				b.Fatal(err)
			}
			for _, h := range hits {
				full[i] = append(full[i], h.Meta["bucket"].(float64))
			}
		}
		var p50none float64
		for _, sel := range sels {
			var f *index.Filter
			limit := float64(docs) * sel.frac
			if sel.name != "none" {
				if f, err = index.ParseFilter(fmt.Sprintf("bucket < %v", limit)); err != nil {
					b.Fatal(err)
				}
				t := time.Now()
				if _, err := ix.Search(ctx, queries[0], &index.SearchOptions{K: 10, Mode: mode, Filter: f}); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(ms(time.Since(t)), mode+"-"+sel.name+"-first-ms")
			}
			var lat []time.Duration
			for round := 0; round < 3; round++ {
				for i, q := range queries {
					t := time.Now()
					hits, err := ix.Search(ctx, q, &index.SearchOptions{K: 10, Mode: mode, Filter: f})
					lat = append(lat, time.Since(t))
					if err != nil {
						b.Fatal(err)
					}
					match := 0
					for _, bk := range full[i] {
						if bk < limit {
							match++
						}
					}
					if want := min(10, match); len(hits) != want && (match >= 10 || len(full[i]) < index.MaxK) {
						b.Errorf("%s %s %q: %d hits, want %d", mode, sel.name, q, len(hits), want)
					}
					for _, h := range hits {
						if h.Meta["bucket"].(float64) >= limit {
							b.Errorf("%s %s: a hit outside the filter: bucket %v", mode, sel.name, h.Meta["bucket"])
						}
					}
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p50 := ms(lat[len(lat)/2])
			if sel.name == "none" {
				p50none = p50
			}
			b.ReportMetric(p50, mode+"-"+sel.name+"-p50-ms")
			b.ReportMetric(ms(lat[len(lat)*95/100]), mode+"-"+sel.name+"-p95-ms")
			b.Logf("%-5s %-5s p50 %.2f ms (%.2f× unfiltered), p95 %.2f ms", mode, sel.name, p50, p50/p50none, ms(lat[len(lat)*95/100]))
		}
		// A small write, then the first filtered search: it re-reads the
		// written document's metadata only (metastore.go).
		f, err := index.ParseFilter(fmt.Sprintf("bucket < %v", docs/2))
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for w := 0; w < 5; w++ {
			in := index.Input{Source: fmt.Sprintf("/bench/%06d.md", w), Data: []byte(fmt.Sprintf("## Section 0\n\nrewritten %s %d\n", mode, w)),
				Meta: map[string]any{"bucket": w}}
			if _, err := ix.Ingest(ctx, in); err != nil {
				b.Fatal(err)
			}
			t := time.Now()
			if _, err := ix.Search(ctx, queries[w], &index.SearchOptions{K: 10, Mode: mode, Filter: f}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(ms(lat[len(lat)/2]), mode+"-after-write-first-ms")
		b.Logf("%-5s first filtered search after a one-document write: p50 %.2f ms of 5", mode, ms(lat[len(lat)/2]))
	}
	b.ReportMetric(0, "ns/op")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
