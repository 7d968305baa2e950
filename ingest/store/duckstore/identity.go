package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Identity state lives in memory, one Graph per project, rebuilt at Open by
// replaying identity_changes (only changes that changed a cluster are
// logged, so the replay is exact). Writes apply changes under the writer
// lock before logging them, so a change refused for what is already there
// (a full cluster) is known when the client is answered; reads resolve ids
// under each graph's read lock.

type graphs struct {
	mu sync.RWMutex // guards the map; each projectGraph guards its Graph
	m  map[int64]*projectGraph
}

type projectGraph struct {
	mu sync.RWMutex
	g  *identity.Graph
}

// get returns the project's graph, creating it in the default mode.
func (gs *graphs) get(project int64) *projectGraph {
	gs.mu.RLock()
	pg := gs.m[project]
	gs.mu.RUnlock()
	if pg != nil {
		return pg
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if pg = gs.m[project]; pg == nil {
		pg = &projectGraph{g: identity.New(identity.Simplified)}
		gs.m[project] = pg
	}
	return pg
}

func (pg *projectGraph) resolve(id string) string {
	pg.mu.RLock()
	defer pg.mu.RUnlock()
	return pg.g.Resolve(id)
}

// loadIdentity rebuilds every project's graph from the tables.
func (s *Store) loadIdentity(ctx context.Context) error {
	s.graphs = graphs{m: map[int64]*projectGraph{}}
	modes := map[int64]identity.Mode{}
	rows, err := s.db.QueryContext(ctx, `SELECT project, id_mode FROM projects`)
	if err != nil {
		return fmt.Errorf("load project modes: %w", err)
	}
	for rows.Next() {
		var p int64
		var m string
		if err := rows.Scan(&p, &m); err != nil {
			rows.Close()
			return fmt.Errorf("load project modes: %w", err)
		}
		if modes[p], err = identity.ParseMode(m); err != nil {
			rows.Close()
			return fmt.Errorf("project %d: %w", p, err)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("load project modes: %w", err)
	}
	for p, m := range modes {
		s.graphs.m[p] = &projectGraph{g: identity.New(m)}
	}
	rows, err = s.db.QueryContext(ctx, `SELECT project, kind, a, b FROM identity_changes ORDER BY project, seq`)
	if err != nil {
		return fmt.Errorf("load identity changes: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var p int64
		var c identity.Change
		if err := rows.Scan(&p, &c.Kind, &c.A, &c.B); err != nil {
			return fmt.Errorf("load identity changes: %w", err)
		}
		if changed, err := s.graphs.get(p).g.Apply(c); err != nil || !changed {
			return fmt.Errorf("project %d: replaying identity change %d (%v %q %q): %w (changed=%v, %v)",
				p, n, c.Kind, c.A, c.B, identity.ErrCorruptLog, changed, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load identity changes: %w", err)
	}
	return nil
}

// SetMode implements store.Identities.
func (s *Store) SetMode(ctx context.Context, project int64, mode identity.Mode) error {
	if err := s.enter("set mode"); err != nil {
		return err
	}
	defer s.ops.Done()
	if mode != identity.Original && mode != identity.Simplified {
		return fmt.Errorf("duckstore: set mode: invalid mode %v", mode)
	}
	// The writer lock keeps writes (which read the mode) out meanwhile.
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("duckstore: set mode: %w", ctx.Err())
	}
	defer func() { <-s.wsem }()
	pg := s.graphs.get(project)
	if pg.g.Mode() == mode {
		return s.recordMode(ctx, project, mode)
	}
	if err := s.Sync(ctx); err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events WHERE project = $1) +
		(SELECT count(*) FROM merges WHERE project = $1) + (SELECT count(*) FROM profiles WHERE project = $1)`, project).Scan(&n)
	if err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	if n > 0 || pg.g.Changes() > 0 {
		return fmt.Errorf("project %d holds data under %v ID merge; %v refused: %w", project, pg.g.Mode(), mode, store.ErrModeChange)
	}
	if err := s.recordMode(ctx, project, mode); err != nil {
		return err
	}
	pg.mu.Lock()
	pg.g = identity.New(mode)
	pg.mu.Unlock()
	return nil
}

func (s *Store) recordMode(ctx context.Context, project int64, mode identity.Mode) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var cur sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT max(id_mode) FROM projects WHERE project = ?`, project).Scan(&cur); err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	if cur.Valid && cur.String == mode.String() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM projects WHERE project = ?`, project); err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO projects VALUES (?, ?)`, project, mode.String()); err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: set mode: %w", err)
	}
	return nil
}

// Resolve implements store.Identities. Changes are applied before a write
// is acknowledged, so the graph already reflects every acknowledged write.
func (s *Store) Resolve(ctx context.Context, project int64, id string) (string, error) {
	if err := s.enter("resolve"); err != nil {
		return "", err
	}
	defer s.ops.Done()
	return s.graphs.get(project).resolve(id), nil
}

// changeRow is an identity change that changed a cluster, to be logged.
type changeRow struct {
	project int64
	c       identity.Change
}

// applyChange applies c to the project's graph for a write: a full cluster
// rejects the record; any other refusal (wrong mode, an anon id already
// merged, ...) is a valid record with no effect. When the change moves a
// cluster's canonical id, the profiles of the ids that lost it are merged
// into the new canonical profile.
func (s *Store) applyChange(project int64, c identity.Change) error {
	pg := s.graphs.get(project)
	pg.mu.Lock()
	// Only Original ID Merge moves profiles between clusters: under
	// Simplified, where a migration links a device per event, the three
	// lookups were a wasted 1 % of its CPU.
	mode := pg.g.Mode()
	var before [2]string
	var after string
	if mode == identity.Original {
		before = [2]string{pg.g.Resolve(c.A), pg.g.Resolve(c.B)}
	}
	changed, err := pg.g.ApplyBare(c)
	if mode == identity.Original && changed && err == nil {
		after = pg.g.Resolve(c.A)
	}
	pg.mu.Unlock()
	switch {
	case errors.Is(err, identity.ErrClusterFull):
		return err
	case err != nil || !changed:
		return nil
	}
	s.scratch.graphChanged = true
	s.scratch.changes = append(s.scratch.changes, changeRow{project, c})
	if mode == identity.Original {
		for _, old := range before {
			if old != after {
				s.scratch.moves = append(s.scratch.moves, profileMove{project, old, after})
			}
		}
	}
	return nil
}
