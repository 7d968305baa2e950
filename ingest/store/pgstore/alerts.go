package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// The alert outbox and rule states (store.Alerts, migration 8). EndRun
// ends the run and adds its alerts in one transaction. Several processes
// deliver from one outbox: ClaimAlerts leases rows with FOR UPDATE SKIP
// LOCKED, so two claimers never take the same alert, and a claim whose
// process died lapses with its lease. SettleAlert only counts for the
// lease's owner, so a process that stalled past its lease cannot undo the
// outcome of the one that took the alert over.

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
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: end run %s: %w", r.ID, err)
	}
	defer rollback(ctx, tx)
	tag, err := tx.Exec(ctx, `UPDATE sync_runs SET status = $1, reason = $2, ended_ms = $3, rows_read = $4,
		imported = $5, duplicate = $6, failed = $7, bytes = $8, failures = $9
		WHERE id = $10 AND status = 'RUNNING'`,
		r.Status, r.Reason, r.EndedMs, r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes, string(r.Failures), r.ID)
	if err != nil {
		return fmt.Errorf("pgstore: end run %s: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: end run %s (no such running run): %w", r.ID, store.ErrNotFound)
	}
	if err := addAlerts(ctx, tx, e.Alerts, e.States); err != nil {
		return fmt.Errorf("pgstore: end run %s: %w", r.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: end run %s: %w", r.ID, err)
	}
	return nil
}

// RaiseAlerts implements store.Alerts.
func (s *Store) RaiseAlerts(ctx context.Context, alerts []store.Alert, states []store.RuleState) error {
	if err := s.enter("raise alerts"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: raise alerts: %w", err)
	}
	defer rollback(ctx, tx)
	if err := addAlerts(ctx, tx, alerts, states); err != nil {
		return fmt.Errorf("pgstore: raise alerts: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: raise alerts: %w", err)
	}
	return nil
}

func addAlerts(ctx context.Context, tx pgx.Tx, alerts []store.Alert, states []store.RuleState) error {
	if len(alerts) == 0 && len(states) == 0 {
		return nil
	}
	var b pgx.Batch
	for _, a := range alerts {
		b.Queue(`INSERT INTO alert_outbox (`+alertColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, '')
			ON CONFLICT (id, destination) DO NOTHING`,
			a.ID, a.Destination, a.Project, a.Import, a.Kind, string(a.Body), a.CreatedMs, a.NextMs)
	}
	for _, st := range states {
		detail := string(st.Detail)
		if detail == "" {
			detail = "{}"
		}
		b.Queue(`INSERT INTO alert_states (project, import, rule, state, detail, updated_ms) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (project, import, rule) DO UPDATE SET state = excluded.state, detail = excluded.detail, updated_ms = excluded.updated_ms`,
			st.Project, st.Import, st.Rule, st.State, detail, st.UpdatedMs)
	}
	return tx.SendBatch(ctx, &b).Close()
}

// RuleStates implements store.Alerts.
func (s *Store) RuleStates(ctx context.Context, project int64, importID string) ([]store.RuleState, error) {
	if err := s.enter("rule states"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT project, import, rule, state, detail, updated_ms FROM alert_states
		WHERE project = $1 AND import = $2 ORDER BY rule`, project, importID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: rule states: %w", err)
	}
	var (
		out    []store.RuleState
		st     store.RuleState
		detail string
	)
	_, err = pgx.ForEachRow(rows, []any{&st.Project, &st.Import, &st.Rule, &st.State, &detail, &st.UpdatedMs}, func() error {
		st.Detail = []byte(detail)
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: rule states: %w", err)
	}
	return out, nil
}

// ClaimAlerts implements store.Alerts.
func (s *Store) ClaimAlerts(ctx context.Context, owner string, nowMs, leaseUntilMs int64, limit int) ([]store.Alert, error) {
	if err := s.enter("claim alerts"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `UPDATE alert_outbox SET lease_owner = $1, lease_until_ms = $3
		WHERE (id, destination) IN (SELECT id, destination FROM alert_outbox
			WHERE status = 'pending' AND next_ms <= $2 AND lease_until_ms < $2
			ORDER BY created_ms LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING `+alertColumns, owner, nowMs, leaseUntilMs, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim alerts: %w", err)
	}
	var (
		out  []store.Alert
		a    store.Alert
		body string
	)
	_, err = pgx.ForEachRow(rows, []any{&a.ID, &a.Destination, &a.Project, &a.Import, &a.Kind, &body, &a.CreatedMs,
		&a.Attempts, &a.NextMs, &a.LastError}, func() error {
		a.Body = []byte(body)
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim alerts: %w", err)
	}
	return out, nil
}

// SettleAlert implements store.Alerts.
func (s *Store) SettleAlert(ctx context.Context, st store.AlertSettle) error {
	if err := s.enter("settle alert"); err != nil {
		return err
	}
	defer s.ops.Done()
	_, err := s.pool.Exec(ctx, `UPDATE alert_outbox SET status = $1, attempts = attempts + 1, next_ms = $2, last_error = $3,
		lease_owner = '', lease_until_ms = 0, settled_ms = $4
		WHERE id = $5 AND destination = $6 AND lease_owner = $7 AND status = 'pending'`,
		st.Status, st.NextMs, st.Error, st.NowMs, st.ID, st.Destination, st.Owner)
	if err != nil {
		return fmt.Errorf("pgstore: settle alert %s: %w", st.ID, err)
	}
	return nil
}

// AlertCounts implements store.Alerts.
func (s *Store) AlertCounts(ctx context.Context) (map[int64]map[string]int64, error) {
	if err := s.enter("count alerts"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT project, status, count(*) FROM alert_outbox GROUP BY project, status`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: count alerts: %w", err)
	}
	out := map[int64]map[string]int64{}
	var (
		p, n   int64
		status string
	)
	_, err = pgx.ForEachRow(rows, []any{&p, &status, &n}, func() error {
		if out[p] == nil {
			out[p] = map[string]int64{}
		}
		out[p][status] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: count alerts: %w", err)
	}
	return out, nil
}

// PruneAlerts implements store.Alerts.
func (s *Store) PruneAlerts(ctx context.Context, beforeMs int64) error {
	if err := s.enter("prune alerts"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.pool.Exec(ctx, `DELETE FROM alert_outbox WHERE status <> 'pending' AND created_ms < $1`, beforeMs); err != nil {
		return fmt.Errorf("pgstore: prune alerts: %w", err)
	}
	return nil
}
