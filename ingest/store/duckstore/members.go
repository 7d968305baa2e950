package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// The ownership bookkeeping of profile imports (store.Members) bypasses
// the write log, like runs: a run tracks a batch's profiles in one DuckDB
// transaction, durable at COMMIT, before it writes the batch itself, so
// the bookkeeping is never behind the profiles. No primary key: DuckDB
// refuses a delete and re-insert of one key in a transaction, which is
// how a batch replaces its rows.
//
// membersSchema is this file's part of the schema (Open runs it after
// duckstore.go's list); IF NOT EXISTS adds the tables to older files.
var membersSchema = []string{`CREATE TABLE IF NOT EXISTS import_members (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, kind UTINYINT NOT NULL, group_key VARCHAR NOT NULL,
		id VARCHAR NOT NULL, run_id VARCHAR NOT NULL, names VARCHAR NOT NULL, prev_names VARCHAR NOT NULL)`,
	// The keys of one TrackMembers call, inside its transaction only.
	`CREATE TABLE IF NOT EXISTS import_members_stage (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, kind UTINYINT NOT NULL, group_key VARCHAR NOT NULL, id VARCHAR NOT NULL)`}

// membersChunk bounds the rows a StaleMembers page holds.
const membersChunk = 1000

// TrackMembers implements store.Members. The keys go into a staging table
// with the Appender (bound parameters cost DuckDB far more than rows do),
// so reading the old rows and deleting them are one join each; the new
// rows are appended. All of it is one transaction on one connection.
func (s *Store) TrackMembers(ctx context.Context, project int64, importID, runID string, ms []store.Member) (err error) {
	if err := s.enter("track members"); err != nil {
		return err
	}
	defer s.ops.Done()
	ms = store.MergeMembers(ms)
	if len(ms) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("duckstore: track members: %w", err)
		}
	}()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN TRANSACTION`); err != nil {
		return err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); err != nil {
			// The connection may still be inside the transaction: drop it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	scope := []any{project, importID}
	if _, err := conn.ExecContext(ctx, `DELETE FROM import_members_stage WHERE project = ? AND import = ?`, scope...); err != nil {
		return err
	}
	err = appendRows(conn, "import_members_stage", len(ms), func(i int) []driver.Value {
		return []driver.Value{project, importID, uint8(ms[i].Kind), ms[i].GroupKey, ms[i].ID}
	})
	if err != nil {
		return err
	}
	const staged = `FROM import_members m JOIN import_members_stage k
		ON k.project = m.project AND k.import = m.import AND k.kind = m.kind AND k.group_key = m.group_key AND k.id = m.id
		WHERE k.project = ? AND k.import = ?`
	old, err := readMembers(ctx, conn, `SELECT m.kind, m.group_key, m.id, m.run_id, m.names, m.prev_names `+staged, scope...)
	if err != nil {
		return err
	}
	if len(old) > 0 {
		if _, err := conn.ExecContext(ctx, `DELETE FROM import_members m WHERE m.project = ? AND m.import = ? AND EXISTS (
			SELECT 1 FROM import_members_stage k WHERE k.project = m.project AND k.import = m.import
				AND k.kind = m.kind AND k.group_key = m.group_key AND k.id = m.id)`, scope...); err != nil {
			return err
		}
	}
	type row struct {
		m    *store.Member
		next store.MemberState
	}
	rows := make([]row, 0, len(ms))
	for i := range ms {
		if next, ok := old[ms[i].MemberKey].Track(runID, ms[i]); ok {
			rows = append(rows, row{&ms[i], next})
		}
	}
	err = appendRows(conn, "import_members", len(rows), func(i int) []driver.Value {
		r := rows[i]
		return []driver.Value{project, importID, uint8(r.m.Kind), r.m.GroupKey, r.m.ID, runID,
			store.EncodeNames(r.next.Names), store.EncodeNames(r.next.Prev)}
	})
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, `DELETE FROM import_members_stage WHERE project = ? AND import = ?`, scope...); err != nil {
		return err
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), `COMMIT`); err != nil {
		return err
	}
	committed = true
	return nil
}

// appendRows appends n rows to table with the Appender, on conn's
// driver connection (so inside its transaction).
func appendRows(conn *sql.Conn, table string, n int, row func(i int) []driver.Value) error {
	if n == 0 {
		return nil
	}
	return conn.Raw(func(dc any) error {
		ap, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", table)
		if err != nil {
			return err
		}
		for i := range n {
			if err := ap.AppendRow(row(i)...); err != nil {
				_ = ap.Clear()
				return errors.Join(err, ap.Close())
			}
		}
		return ap.Close()
	})
}

// readMembers reads (kind, group_key, id, run_id, names, prev_names) rows.
func readMembers(ctx context.Context, conn *sql.Conn, query string, args ...any) (map[store.MemberKey]store.MemberState, error) {
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[store.MemberKey]store.MemberState{}
	for rows.Next() {
		var k store.MemberKey
		var st store.MemberState
		var kind uint8
		var names, prev string
		if err := rows.Scan(&kind, &k.GroupKey, &k.ID, &st.RunID, &names, &prev); err != nil {
			return nil, err
		}
		k.Kind = profile.Kind(kind)
		if st.Names, err = store.DecodeNames(names); err == nil {
			st.Prev, err = store.DecodeNames(prev)
		}
		if err != nil {
			return nil, fmt.Errorf("profile %q: %w", k.ID, err)
		}
		out[k] = st
	}
	return out, rows.Err()
}

// StaleMembers implements store.Members. The candidates are numbered
// once into a temporary table, so each page is a range of row numbers
// (DuckDB skips the row groups outside it) and no query stays open while
// fn writes.
func (s *Store) StaleMembers(ctx context.Context, project int64, importID, runID string, fn func(store.StaleMember) error) error {
	if err := s.enter("stale members"); err != nil {
		return err
	}
	defer s.ops.Done()
	conn, err := s.db.Conn(ctx) // the temporary table lives on this connection
	if err != nil {
		return fmt.Errorf("duckstore: stale members: %w", err)
	}
	defer conn.Close()
	// A profile the run tracked with nothing left over from before has
	// nothing stale: most of them, in a steady state.
	_, err = conn.ExecContext(ctx, `CREATE OR REPLACE TEMP TABLE members_stale AS
		SELECT row_number() OVER (ORDER BY kind, group_key, id) AS n, kind, group_key, id, run_id, names, prev_names
		FROM import_members WHERE project = ? AND import = ? AND NOT (run_id = ? AND prev_names = '[]')`,
		project, importID, runID)
	if err != nil {
		return fmt.Errorf("duckstore: stale members: %w", err)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS members_stale`) }()
	var keys []store.MemberKey
	var states []store.MemberState
	for after := int64(0); ; after += membersChunk {
		keys, states = keys[:0], states[:0]
		rows, err := conn.QueryContext(ctx, `SELECT kind, group_key, id, run_id, names, prev_names FROM members_stale
			WHERE n > ? AND n <= ? ORDER BY n`, after, after+membersChunk)
		if err != nil {
			return fmt.Errorf("duckstore: stale members: %w", err)
		}
		for rows.Next() {
			k, st, err := store.ScanMember(rows.Scan)
			if err != nil {
				rows.Close()
				return fmt.Errorf("duckstore: stale members: %w", err)
			}
			keys, states = append(keys, k), append(states, st)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("duckstore: stale members: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("duckstore: stale members: %w", err)
		}
		if err := store.EmitStale(keys, states, runID, fn); err != nil {
			return err
		}
		if len(keys) < membersChunk {
			return nil
		}
	}
}

// SettleMembers implements store.Members.
func (s *Store) SettleMembers(ctx context.Context, project int64, importID, runID string) error {
	if err := s.enter("settle members"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: settle members: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM import_members WHERE project = ? AND import = ? AND run_id <> ?`, project, importID, runID); err != nil {
		return fmt.Errorf("duckstore: settle members: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE import_members SET prev_names = '[]' WHERE project = ? AND import = ? AND run_id = ? AND prev_names <> '[]'`,
		project, importID, runID); err != nil {
		return fmt.Errorf("duckstore: settle members: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: settle members: %w", err)
	}
	return nil
}
