package index

// What a delete puts back: the blocks of documents it did not delete, and
// the records of documents whose rows stay after a failure.

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/escurel/escurel/internal/duck"
)

// restoreBlocks inserts again, within tx, the rows of the blocks ids that
// tx deleted, as committed: read outside tx (the caller holds writeMu, so
// the committed rows are those tx started from).
func (ix *state) restoreBlocks(ctx context.Context, tx *duck.Tx, ids []int64) error {
	rows, err := ix.db.QueryContext(ctx, `SELECT * FROM blocks WHERE block_id IN (SELECT unnest(?::BIGINT[]))`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	var restored [][]driver.Value
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		row := make([]driver.Value, len(vals))
		for i, v := range vals {
			row[i] = v
		}
		restored = append(restored, row)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(restored) != len(ids) {
		return fmt.Errorf("restore %d blocks of other documents: %d read", len(ids), len(restored))
	}
	return duck.Append(ctx, tx.Conn, "blocks", cols, func(add func(...driver.Value) error) error {
		for _, row := range restored {
			if err := add(row...); err != nil {
				return err
			}
		}
		return nil
	})
}

// restoreRemoved puts back the records of docIDs that a delete removed
// when its transaction then failed: each document whose rows are still
// committed gets its record again, as the index's copy (currentDocs, what
// restoreRecords puts back for a failed ingest), durably. A document
// without rows keeps its record removed.
func (ix *state) restoreRemoved(ctx context.Context, docIDs []any) error {
	if len(docIDs) == 0 {
		return nil
	}
	ids := make([]string, len(docIDs))
	for i, id := range docIDs {
		ids[i] = id.(string)
	}
	current, err := ix.currentDocs(ctx, ids)
	if err != nil {
		return err
	}
	kept := ids[:0]
	for _, id := range ids {
		if current[id] != nil {
			kept = append(kept, id)
		}
	}
	return ix.restoreRecords(ctx, kept, current)
}
