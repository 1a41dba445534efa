package main

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// churnShare: a round of churn (-churn) touches one passage in churnShare.
// Round r deletes the passages p_i with i % 10 == r (10 % of the corpus)
// and ingests them again, so ten rounds replace every passage once.
const churnShare = 10

// diskUsage is the bytes under dir: apparent (the sum of file sizes) and
// allocated (the file system blocks they hold, st_blocks × 512, what the
// disk pays: a 300-byte file takes a 4 KiB block), directories included
// in allocated.
func diskUsage(dir string) (apparent, allocated int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		if d.Type().IsRegular() {
			apparent += fi.Size()
		}
		return nil
	})
	return apparent, allocated
}

// breakdown describes where an engine's bytes lie, one entry per top-level
// file or directory of dir: "name allocated MB (apparent MB)".
func breakdown(dir string) string {
	entries, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return ""
	}
	var parts []string
	for _, e := range entries {
		a, b := diskUsage(e)
		if b < 1<<20 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f MB (apparent %.1f)", filepath.Base(e), float64(b)/1e6, float64(a)/1e6))
		if sub, _ := filepath.Glob(filepath.Join(e, "*")); strings.HasPrefix(filepath.Base(e), "gen-") {
			for _, s := range sub {
				a, b := diskUsage(s)
				parts = append(parts, fmt.Sprintf("  %s %.1f MB (apparent %.1f)", filepath.Base(s), float64(b)/1e6, float64(a)/1e6))
			}
		}
	}
	return strings.Join(parts, "\n  ")
}

// batchDeleter is an engine that deletes many passages in one durable
// batch.
type batchDeleter interface {
	DeleteBatch(ids []string) error
}

func (e *escurelEngine) DeleteBatch(ids []string) error {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = "bench://" + id
	}
	_, err := e.ix.Delete(context.Background(), names...)
	return err
}

func (s *sqliteEngine) DeleteBatch(ids []string) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.Exec(`DELETE FROM p WHERE rowid = ?`, rowid(id)); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (b *bleveEngine) DeleteBatch(ids []string) error {
	batch := b.idx.NewBatch()
	for _, id := range ids {
		batch.Delete(id)
	}
	return b.idx.Batch(batch)
}

// churn runs rounds of churn on e (the corpus ps, the index built from
// them): each round deletes 10 % of the passages in one batch and adds them
// again in batches of batchSize; gone holds passages deleted before, which
// are added again but not deleted. It returns the time taken.
func churn(e Engine, ps []Passage, gone map[string]bool, rounds int) (time.Duration, error) {
	bd, ok := e.(batchDeleter)
	if !ok {
		return 0, fmt.Errorf("no batch delete")
	}
	t0 := time.Now()
	for r := 0; r < rounds; r++ {
		var del []Passage
		for i := r % churnShare; i < len(ps); i += churnShare {
			del = append(del, ps[i])
		}
		for i := 0; i < len(del); i += batchSize {
			part := del[i:min(i+batchSize, len(del))]
			ids := make([]string, 0, len(part))
			for _, p := range part {
				if !gone[p.ID] {
					ids = append(ids, p.ID)
				}
			}
			if err := bd.DeleteBatch(ids); err != nil {
				return 0, fmt.Errorf("round %d: delete: %w", r, err)
			}
		}
		for i := 0; i < len(del); i += batchSize {
			if err := e.Add(del[i:min(i+batchSize, len(del))]); err != nil {
				return 0, fmt.Errorf("round %d: add: %w", r, err)
			}
		}
	}
	return time.Since(t0), nil
}
