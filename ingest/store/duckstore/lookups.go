package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Lookup tables bypass the write log: a replacement is one DuckDB
// transaction (delete the old rows, append the new), all or nothing and
// durable at COMMIT. Uploads are rare and large; the log would only copy
// them twice.

// ReplaceLookup implements store.Lookups. Each batch is appended and
// flushed, and repeated keys are looked for once all are in: a batch
// (lookup.BatchRows, 16k rows) is what the appender holds. Left to gather
// the whole table until Close, a 32 MB upload (527k rows) cost 135 MiB of
// DuckDB memory beyond its limit; flushing every 16k rows (4k gained
// nothing more), 78 MiB. The rows stay in the one transaction: the
// replacement is still all or nothing.
func (s *Store) ReplaceLookup(ctx context.Context, project int64, id string, rows store.LookupRows) error {
	if err := s.enter("replace lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	cols, err := json.Marshal(rows.Columns())
	if err != nil {
		return fmt.Errorf("duckstore: replace lookup table: %w", err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("duckstore: replace lookup table: %w", err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) (err error) {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		if _, err := c.ExecContext(ctx, "BEGIN TRANSACTION", nil); err != nil {
			return err
		}
		committed := false
		defer func() {
			if !committed {
				_, _ = c.ExecContext(context.Background(), "ROLLBACK", nil)
			}
		}()
		if err := execArgs(ctx, c, `DELETE FROM lookup_rows WHERE project = ? AND table_id = ?`, project, id); err != nil {
			return err
		}
		if err := execArgs(ctx, c, `DELETE FROM lookup_tables WHERE project = ? AND id = ?`, project, id); err != nil {
			return err
		}
		n, err := appendLookupRows(ctx, c, project, id, rows)
		if err != nil {
			return err
		}
		if err := lookupDuplicate(ctx, c, project, id); err != nil {
			return err
		}
		if err := execArgs(ctx, c, `INSERT INTO lookup_tables VALUES (?, ?, ?, ?, ?)`,
			project, id, string(cols), n, nowMs()); err != nil {
			return err
		}
		// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
		if _, err := c.ExecContext(context.Background(), "COMMIT", nil); err != nil {
			return err
		}
		committed = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("duckstore: replace lookup table %q: %w", id, err)
	}
	return nil
}

// appendLookupRows appends every batch of rows inside c's transaction and
// returns how many rows there were.
func appendLookupRows(ctx context.Context, c *duckdb.Conn, project int64, id string, rows store.LookupRows) (n int64, err error) {
	ap, err := duckdb.NewAppenderFromConn(c, "", "lookup_rows")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = ap.Clear()
		}
		err = errors.Join(err, ap.Close())
	}()
	for {
		b, err := rows.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		// The row goes in as []byte: the appender copies it into the
		// vector, where a string would cost a copy of the table in garbage.
		for i := range b.Len() {
			if err := ap.AppendRow(project, id, b.Key(i), b.Row(i)); err != nil {
				return n, err
			}
		}
		if err := ap.Flush(); err != nil {
			return n, err
		}
		n += int64(b.Len())
	}
}

// lookupDuplicate finds the first row of the replacement in c's
// transaction whose key repeats an earlier one, once all are appended:
// one aggregation, where checking each batch against the rows before it
// made a 99 MB upload 3.7 times slower. Row numbers come from rowid: the
// transaction deleted the table's old rows, so the rows it sees are the
// ones it appended, and DuckDB numbers a transaction's appended rows in
// order (storetest Lookup_StreamRollback pins the row it names).
func lookupDuplicate(ctx context.Context, c *duckdb.Conn, project int64, id string) error {
	var key string
	var first, second int64
	found, err := queryRow(ctx, c, `WITH dup AS (SELECT key FROM lookup_rows WHERE project = $1 AND table_id = $2 GROUP BY key HAVING count(*) > 1),
		ranked AS (SELECT key, rowid AS r, row_number() OVER (PARTITION BY key ORDER BY rowid) AS n
			FROM lookup_rows WHERE project = $1 AND table_id = $2 AND key IN (SELECT key FROM dup))
		SELECT a.key, a.r, b.r FROM ranked a JOIN ranked b ON a.key = b.key AND a.n = 1 AND b.n = 2 ORDER BY b.r LIMIT 1`,
		[]any{project, id}, &key, &first, &second)
	if err != nil || !found {
		return err
	}
	var firstRow, row int64
	if _, err := queryRow(ctx, c, `SELECT count(*) FILTER (WHERE rowid <= $3), count(*) FILTER (WHERE rowid <= $4)
		FROM lookup_rows WHERE project = $1 AND table_id = $2`, []any{project, id, first, second}, &firstRow, &row); err != nil {
		return err
	}
	return lookup.DuplicateKey(key, int(row), int(firstRow))
}

// queryRow runs a query on the driver connection and scans its first row
// into dest (string and int64 pointers); found is false when it has none.
func queryRow(ctx context.Context, c *duckdb.Conn, query string, args []any, dest ...any) (found bool, err error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rs, err := c.QueryContext(ctx, query, nv)
	if err != nil {
		return false, err
	}
	defer rs.Close()
	vals := make([]driver.Value, len(dest))
	switch err := rs.Next(vals); {
	case err == io.EOF:
		return false, nil
	case err != nil:
		return false, err
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			v, ok := vals[i].(string)
			if !ok {
				return false, fmt.Errorf("column %d scanned as %T", i+1, vals[i])
			}
			*d = v
		case *int64:
			v, ok := vals[i].(int64)
			if !ok {
				return false, fmt.Errorf("column %d scanned as %T", i+1, vals[i])
			}
			*d = v
		}
	}
	return true, nil
}

// ScanLookup implements store.Lookups.
func (s *Store) ScanLookup(ctx context.Context, project int64, id string, fn func(key string, row []byte) error) error {
	if err := s.enter("scan lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.db.BeginTx(ctx, nil) // one snapshot for both queries
	if err != nil {
		return fmt.Errorf("duckstore: scan lookup table: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM lookup_tables WHERE project = ? AND id = ?`, project, id).Scan(&n); err != nil {
		return fmt.Errorf("duckstore: scan lookup table: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("lookup table %q: %w", id, store.ErrNotFound)
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, row FROM lookup_rows WHERE project = ? AND table_id = ? ORDER BY key`, project, id)
	if err != nil {
		return fmt.Errorf("duckstore: scan lookup table: %w", err)
	}
	defer rows.Close()
	var key string
	var row sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&key, &row); err != nil {
			return fmt.Errorf("duckstore: scan lookup table: %w", err)
		}
		if err := fn(key, row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duckstore: scan lookup table: %w", err)
	}
	return nil
}
