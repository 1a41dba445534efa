package fts

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/escurel/escurel/internal/duck"
	schemasql "github.com/escurel/escurel/sql"
)

// BenchmarkAdd is one write batch's full-text part: 1,000 blocks of 150
// body and 10 context terms from a Zipf vocabulary of 50,000 words,
// added in a transaction that is rolled back.
func BenchmarkAdd(b *testing.B) {
	db, err := sql.Open("duckdb", b.TempDir()+"/fts.duckdb")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ms, err := schemasql.Migrations()
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range ms {
		if _, err := db.Exec(m.SQL); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	ix, err := Load(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	blocks := zipfBlocks()
	b.ResetTimer()
	for range b.N {
		tx, err := duck.Begin(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ix.Add(ctx, tx, blocks); err != nil {
			b.Fatal(err)
		}
		tx.Rollback()
	}
}

// zipfBlocks is BenchmarkAdd's batch: 1,000 blocks of 150 body and 10
// context terms from a Zipf vocabulary of 50,000 words.
func zipfBlocks() []Block {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, 49_999)
	words := make([]string, 50_000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i)
	}
	blocks := make([]Block, 1000)
	for i := range blocks {
		blocks[i].ID = int64(i)
		for range 150 {
			blocks[i].Terms[Body] = append(blocks[i].Terms[Body], words[z.Uint64()])
		}
		for range 10 {
			blocks[i].Terms[Context] = append(blocks[i].Terms[Context], words[z.Uint64()])
		}
	}
	return blocks
}

// BenchmarkInvert is BenchmarkAdd's inversion alone (no database): what
// runs beside the documents' and blocks' appends in a write.
func BenchmarkInvert(b *testing.B) {
	ix := &Index{ids: newDict(), cache: newCache(DefaultCacheBytes)}
	blocks := zipfBlocks()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := ix.Invert(blocks); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMerge is a merge of the lowest tier: MergeFactor segments of
// zipfBlocks' batch (1,000 blocks each, ascending block ids) into one, in
// its own transaction; building them is not timed.
func BenchmarkMerge(b *testing.B) {
	ctx := context.Background()
	blocks := zipfBlocks()
	for range b.N {
		b.StopTimer()
		db, err := sql.Open("duckdb", b.TempDir()+"/fts.duckdb")
		if err != nil {
			b.Fatal(err)
		}
		ms, err := schemasql.Migrations()
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range ms {
			if _, err := db.Exec(m.SQL); err != nil {
				b.Fatal(err)
			}
		}
		ix, err := Load(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		for s := range MergeFactor {
			bs := slices.Clone(blocks)
			for i := range bs {
				bs[i].ID = int64(s*len(blocks) + i)
			}
			tx, err := duck.Begin(ctx, db)
			if err != nil {
				b.Fatal(err)
			}
			ch, err := ix.Add(ctx, tx, bs)
			if err != nil {
				b.Fatal(err)
			}
			if err := ix.Commit(ctx, tx, ch); err != nil {
				b.Fatal(err)
			}
		}
		segs := slices.Clone(ix.segments)
		b.StartTimer()
		if err := ix.merge(ctx, db, segs, false); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		db.Close()
	}
}
