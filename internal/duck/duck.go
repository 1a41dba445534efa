// Package duck has the DuckDB plumbing shared by escurel's packages: write
// transactions on one connection and bulk appends inside them.
package duck

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/duckdb/duckdb-go/v2"
)

// Append appends rows to table through DuckDB's appender on conn, inside the
// transaction conn has open (a rollback discards them). columns name the
// columns each row gives, in order; fill calls add once per row. The
// appender is the driver's bulk path: list parameters cannot carry BLOBs,
// and binding one value at a time is an order of magnitude slower.
func Append(ctx context.Context, conn *sql.Conn, table string, columns []string, fill func(add func(...driver.Value) error) error) error {
	err := conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("not a DuckDB connection: %T", dc)
		}
		a, err := duckdb.NewAppenderWithColumns(dconn, "", "", table, columns)
		if err != nil {
			return err
		}
		if err := fill(a.AppendRow); err != nil {
			a.Clear()
			a.Close()
			return err
		}
		return a.CloseWithCancel(ctx)
	})
	if err != nil {
		return fmt.Errorf("append to %s: %w", table, err)
	}
	return nil
}

// Tx is a write transaction on one connection, begun with BEGIN and ended
// with Commit or Rollback, so that Append can join it (database/sql's Tx
// hides its connection).
type Tx struct {
	*sql.Conn
	done bool
}

// Begin takes a connection from db and begins a transaction on it.
func Begin(ctx context.Context, db *sql.DB) (*Tx, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		conn.Close()
		return nil, err
	}
	return &Tx{Conn: conn}, nil
}

// Commit commits and returns the connection to the pool.
func (tx *Tx) Commit(ctx context.Context) error {
	if tx.done {
		return fmt.Errorf("commit: transaction already ended")
	}
	tx.done = true
	_, err := tx.ExecContext(ctx, "COMMIT")
	if err != nil {
		tx.ExecContext(context.Background(), "ROLLBACK")
	}
	return errors.Join(err, tx.Close())
}

// Rollback rolls back unless the transaction ended; it is safe to defer.
func (tx *Tx) Rollback() error {
	if tx.done {
		return nil
	}
	tx.done = true
	_, err := tx.ExecContext(context.Background(), "ROLLBACK")
	return errors.Join(err, tx.Close())
}
