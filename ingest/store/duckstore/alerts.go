package duckstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// The alert outbox and rule states (store.Alerts). Their tables have no
// keys (DuckDB refuses a delete and re-insert of one key in a
// transaction); syncState.runMu serialises every write of them and of
// runs, and the store file is locked to one process, so a read-then-write
// under it is atomic. EndRun ends the run and adds its alerts in one
// DuckDB transaction: durable at commit, like the run itself.

const alertColumns = `id, destination, project, import, kind, body, created_ms, attempts, next_ms, last_error`

// EndRun implements store.Alerts.
func (s *Store) EndRun(ctx context.Context, e store.RunEnd) error {
	if err := s.enter("end run"); err != nil {
		return err
	}
	defer s.ops.Done()
	r := e.Run
	if len(r.Failures) == 0 {
		r.Failures = []byte("[]")
	}
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: end run: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE sync_runs SET status = ?, reason = ?, ended_ms = ?, rows_read = ?, imported = ?,
		duplicate = ?, failed = ?, bytes = ?, failures = ? WHERE id = ? AND status = 'RUNNING'`,
		r.Status, r.Reason, r.EndedMs, r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes, string(r.Failures), r.ID)
	if err != nil {
		return fmt.Errorf("duckstore: end run: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("duckstore: end run %s: %w", r.ID, store.ErrNotFound)
	}
	if err := addAlerts(ctx, tx, e.Alerts, e.States); err != nil {
		return fmt.Errorf("duckstore: end run %s: %w", r.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: end run %s: %w", r.ID, err)
	}
	return nil
}

// RaiseAlerts implements store.Alerts.
func (s *Store) RaiseAlerts(ctx context.Context, alerts []store.Alert, states []store.RuleState) error {
	if err := s.enter("raise alerts"); err != nil {
		return err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: raise alerts: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := addAlerts(ctx, tx, alerts, states); err != nil {
		return fmt.Errorf("duckstore: raise alerts: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: raise alerts: %w", err)
	}
	return nil
}

// addAlerts writes alerts not stored yet and replaces states; the caller
// holds runMu.
func addAlerts(ctx context.Context, tx *sql.Tx, alerts []store.Alert, states []store.RuleState) error {
	for _, a := range alerts {
		_, err := tx.ExecContext(ctx, `INSERT INTO alert_outbox (`+alertColumns+`, status, lease_owner, lease_until_ms, settled_ms)
			SELECT ?, ?, ?, ?, ?, ?, ?, 0, ?, '', 'pending', '', 0, 0
			WHERE NOT EXISTS (SELECT 1 FROM alert_outbox WHERE id = ? AND destination = ?)`,
			a.ID, a.Destination, a.Project, a.Import, a.Kind, string(a.Body), a.CreatedMs, a.NextMs, a.ID, a.Destination)
		if err != nil {
			return fmt.Errorf("add alert %s: %w", a.ID, err)
		}
	}
	for _, st := range states {
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_states WHERE project = ? AND import = ? AND rule = ?`,
			st.Project, st.Import, st.Rule); err != nil {
			return fmt.Errorf("rule state %s: %w", st.Rule, err)
		}
		detail := string(st.Detail)
		if detail == "" {
			detail = "{}"
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_states VALUES (?, ?, ?, ?, ?, ?)`,
			st.Project, st.Import, st.Rule, st.State, detail, st.UpdatedMs); err != nil {
			return fmt.Errorf("rule state %s: %w", st.Rule, err)
		}
	}
	return nil
}

// RuleStates implements store.Alerts.
func (s *Store) RuleStates(ctx context.Context, project int64, importID string) ([]store.RuleState, error) {
	if err := s.enter("rule states"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT project, import, rule, state, detail, updated_ms FROM alert_states
		WHERE project = ? AND import = ? ORDER BY rule`, project, importID)
	if err != nil {
		return nil, fmt.Errorf("duckstore: rule states: %w", err)
	}
	defer rows.Close()
	var out []store.RuleState
	for rows.Next() {
		var st store.RuleState
		var detail string
		if err := rows.Scan(&st.Project, &st.Import, &st.Rule, &st.State, &detail, &st.UpdatedMs); err != nil {
			return nil, fmt.Errorf("duckstore: rule states: %w", err)
		}
		st.Detail = []byte(detail)
		out = append(out, st)
	}
	return out, rows.Err()
}

// ClaimAlerts implements store.Alerts.
func (s *Store) ClaimAlerts(ctx context.Context, owner string, nowMs, leaseUntilMs int64, limit int) ([]store.Alert, error) {
	if err := s.enter("claim alerts"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	s.noteOwner(owner)
	// As with runs (syncs.go), only this process holds the file: a lease
	// of an owner not alive here belongs to a process that died, and is
	// over whatever its time says.
	var live []any
	marks := ""
	for o := range s.syncs.live {
		live = append(live, o)
		marks += ",?"
	}
	args := append([]any{nowMs, nowMs}, live...)
	rows, err := s.db.QueryContext(ctx, `SELECT `+alertColumns+` FROM alert_outbox
		WHERE status = 'pending' AND next_ms <= ? AND (lease_until_ms < ? OR lease_owner NOT IN (''`+marks+`))
		ORDER BY created_ms, id, destination LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("duckstore: claim alerts: %w", err)
	}
	var out []store.Alert
	for rows.Next() {
		var a store.Alert
		var body string
		if err := rows.Scan(&a.ID, &a.Destination, &a.Project, &a.Import, &a.Kind, &body, &a.CreatedMs, &a.Attempts, &a.NextMs, &a.LastError); err != nil {
			rows.Close()
			return nil, fmt.Errorf("duckstore: claim alerts: %w", err)
		}
		a.Body = []byte(body)
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: claim alerts: %w", err)
	}
	for _, a := range out {
		if _, err := s.db.ExecContext(ctx, `UPDATE alert_outbox SET lease_owner = ?, lease_until_ms = ? WHERE id = ? AND destination = ?`,
			owner, leaseUntilMs, a.ID, a.Destination); err != nil {
			return nil, fmt.Errorf("duckstore: claim alerts: %w", err)
		}
	}
	return out, nil
}

// SettleAlert implements store.Alerts.
func (s *Store) SettleAlert(ctx context.Context, st store.AlertSettle) error {
	if err := s.enter("settle alert"); err != nil {
		return err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	_, err := s.db.ExecContext(ctx, `UPDATE alert_outbox SET status = ?, attempts = attempts + 1, next_ms = ?, last_error = ?,
		lease_owner = '', lease_until_ms = 0, settled_ms = ?
		WHERE id = ? AND destination = ? AND lease_owner = ? AND status = 'pending'`,
		st.Status, st.NextMs, st.Error, st.NowMs, st.ID, st.Destination, st.Owner)
	if err != nil {
		return fmt.Errorf("duckstore: settle alert %s: %w", st.ID, err)
	}
	return nil
}

// AlertCounts implements store.Alerts.
func (s *Store) AlertCounts(ctx context.Context) (map[int64]map[string]int64, error) {
	if err := s.enter("count alerts"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT project, status, count(*) FROM alert_outbox GROUP BY project, status`)
	if err != nil {
		return nil, fmt.Errorf("duckstore: count alerts: %w", err)
	}
	defer rows.Close()
	out := map[int64]map[string]int64{}
	for rows.Next() {
		var p, n int64
		var status string
		if err := rows.Scan(&p, &status, &n); err != nil {
			return nil, fmt.Errorf("duckstore: count alerts: %w", err)
		}
		if out[p] == nil {
			out[p] = map[string]int64{}
		}
		out[p][status] = n
	}
	return out, rows.Err()
}

// PruneAlerts implements store.Alerts.
func (s *Store) PruneAlerts(ctx context.Context, beforeMs int64) error {
	if err := s.enter("prune alerts"); err != nil {
		return err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM alert_outbox WHERE status <> 'pending' AND created_ms < ?`, beforeMs); err != nil {
		return fmt.Errorf("duckstore: prune alerts: %w", err)
	}
	return nil
}
