package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

// The identity graph of a project is decided in Go (package identity holds
// the rules) and stored twice: identity_changes, the log that rebuilds it,
// and identity_ids, its answers for reads. Only a write holding the
// project's identity lock changes either, so the cached graph of the process
// holding the lock can be brought up to date by replaying the changes other
// processes logged since it last looked (catchUp).

type graphCache struct {
	mu sync.Mutex // guards m
	m  map[int64]*projectGraph
}

// projectGraph is one project's cached graph. mu is only ever taken by a
// write that already holds the project's identity advisory lock, so it never
// waits for long, and a goroutine waiting for the advisory lock never holds it.
type projectGraph struct {
	mu  sync.Mutex
	g   *identity.Graph // nil: rebuild from identity_changes
	seq int64           // the last identity_changes.seq applied to g
}

func (gc *graphCache) get(project int64) *projectGraph {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	pg := gc.m[project]
	if pg == nil {
		pg = &projectGraph{}
		gc.m[project] = pg
	}
	return pg
}

// projectMode reads a project's mode; a project never set is Simplified.
func projectMode(ctx context.Context, q pgx.Tx, project int64) (mode identity.Mode, stored bool, err error) {
	var m string
	err = q.QueryRow(ctx, `SELECT id_mode FROM projects WHERE project = $1`, project).Scan(&m)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return identity.Simplified, false, nil
	case err != nil:
		return "", false, fmt.Errorf("read mode of project %d: %w", project, err)
	}
	mode, err = identity.ParseMode(m)
	return mode, true, err
}

// catchUp brings pg up to the committed state. The caller holds the
// project's identity lock, so nothing commits changes meanwhile and seq
// order is commit order.
func catchUp(ctx context.Context, tx pgx.Tx, project int64, pg *projectGraph) (err error) {
	mode, _, err := projectMode(ctx, tx, project)
	if err != nil {
		return err
	}
	if pg.g == nil || pg.g.Mode() != mode {
		pg.g, pg.seq = identity.New(mode), 0
	}
	defer func() {
		if err != nil {
			pg.g = nil // half replayed: start over next time
		}
	}()
	rows, err := tx.Query(ctx, `SELECT seq, kind, a, b FROM identity_changes WHERE project = $1 AND seq > $2 ORDER BY seq`, project, pg.seq)
	if err != nil {
		return fmt.Errorf("read identity changes of project %d: %w", project, err)
	}
	defer rows.Close()
	var (
		seq  int64
		kind int16
		c    identity.Change
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &kind, &c.A, &c.B); err != nil {
			return fmt.Errorf("read identity changes of project %d: %w", project, err)
		}
		c.Kind = identity.Kind(kind)
		if changed, err := pg.g.Apply(c); err != nil || !changed {
			return fmt.Errorf("project %d: replaying identity change %d (%v %q %q): %w (changed=%v, %v)",
				project, seq, c.Kind, c.A, c.B, identity.ErrCorruptLog, changed, err)
		}
		pg.seq = seq
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read identity changes of project %d: %w", project, err)
	}
	return nil
}

// SetMode implements store.Identities. The exclusive mode lock waits for
// every write touching the project, so "holds data" cannot change while it
// decides.
func (s *Store) SetMode(ctx context.Context, project int64, mode identity.Mode) error {
	if err := s.enter("set mode"); err != nil {
		return err
	}
	defer s.ops.Done()
	if mode != identity.Original && mode != identity.Simplified {
		return fmt.Errorf("pgstore: set mode: invalid mode %v", mode)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: set mode: %w", err)
	}
	defer rollback(ctx, tx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(s.schema, nsMode, project)); err != nil {
		return fmt.Errorf("pgstore: set mode: %w", err)
	}
	cur, stored, err := projectMode(ctx, tx, project)
	if err != nil {
		return fmt.Errorf("pgstore: set mode: %w", err)
	}
	if cur == mode && stored {
		return nil
	}
	if cur != mode {
		var has bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE project = $1)
			OR EXISTS (SELECT 1 FROM merges WHERE project = $1)
			OR EXISTS (SELECT 1 FROM profiles WHERE project = $1)
			OR EXISTS (SELECT 1 FROM identity_changes WHERE project = $1)`, project).Scan(&has)
		if err != nil {
			return fmt.Errorf("pgstore: set mode: %w", err)
		}
		if has {
			return fmt.Errorf("project %d holds data under %v ID merge; %v refused: %w", project, cur, mode, store.ErrModeChange)
		}
	}
	// Cached graphs notice the new mode in catchUp.
	if _, err := tx.Exec(ctx, `INSERT INTO projects (project, id_mode) VALUES ($1, $2)
		ON CONFLICT (project) DO UPDATE SET id_mode = excluded.id_mode`, project, mode.String()); err != nil {
		return fmt.Errorf("pgstore: set mode: %w", err)
	}
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pgstore: set mode: %w", err)
	}
	return nil
}

// Resolve implements store.Identities from identity_ids, which every
// process's acknowledged writes have updated.
func (s *Store) Resolve(ctx context.Context, project int64, id string) (string, error) {
	if err := s.enter("resolve"); err != nil {
		return "", err
	}
	defer s.ops.Done()
	var c string
	err := s.pool.QueryRow(ctx, `SELECT canonical FROM identity_ids WHERE project = $1 AND id = $2`, project, id).Scan(&c)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return id, nil
	case err != nil:
		return "", fmt.Errorf("pgstore: resolve: %w", err)
	}
	return c, nil
}

// changeIDs are the ids a change registers in the graph. A link names its
// device without the prefix its distinct_id carries.
func changeIDs(c identity.Change) [2]string {
	if c.Kind == identity.KindLink {
		return [2]string{c.A, identity.DevicePrefix + c.B}
	}
	return [2]string{c.A, c.B}
}

// identWork is what a write's identity changes leave to store.
type identWork struct {
	changes []changeRow
	// Per project: ids the changes registered, and canonical ids that
	// stopped being canonical. identity_ids rows of both get rewritten.
	touched map[int64]map[string]struct{}
	stale   map[int64]map[string]struct{}
	moves   []profileMove // profile folds asked for, applied per batch
}

type changeRow struct {
	project int64
	c       identity.Change
}

// applyChange applies c to the project's graph for a write: a full cluster
// rejects the record; any other refusal (wrong mode, an anon id already
// merged, ...) is a valid record with no effect.
func (w *writeTx) applyChange(project int64, c identity.Change) error {
	lg := w.graphs[project]
	g := lg.pg.g
	ids := changeIDs(c)
	before := [2]string{g.Resolve(ids[0]), g.Resolve(ids[1])}
	changed, err := g.ApplyBare(c)
	switch {
	case errors.Is(err, identity.ErrClusterFull):
		return err
	case err != nil || !changed:
		return nil
	}
	lg.changed = true
	after := g.Resolve(ids[0])
	iw := &w.ident
	iw.changes = append(iw.changes, changeRow{project, c})
	addTo(iw.touched, project, ids[0])
	addTo(iw.touched, project, ids[1])
	for i, old := range before {
		if old == after || (i == 1 && old == before[0]) {
			continue
		}
		addTo(iw.stale, project, old)
		// Simplified profiles stay where they are: Mixpanel does not carry
		// a device's profile over to its user.
		if g.Mode() == identity.Original {
			iw.moves = append(iw.moves, profileMove{project, old, after})
		}
	}
	return nil
}

func addTo(m map[int64]map[string]struct{}, project int64, id string) {
	set := m[project]
	if set == nil {
		set = map[string]struct{}{}
		m[project] = set
	}
	set[id] = struct{}{}
}

// flushIdentity stores the write's identity changes: the log rows, then
// identity_ids for every id whose canonical id may have moved. Those are the
// ids the changes registered plus the stored members of every cluster whose
// canonical id lost that role; in the common case (a device linked to a
// user, an id joining a bigger cluster) that is a handful of rows.
func (w *writeTx) flushIdentity(ctx context.Context) error {
	iw := &w.ident
	if len(iw.changes) == 0 {
		return nil
	}
	i := 0
	_, err := w.tx.CopyFrom(ctx, pgx.Identifier{"identity_changes"}, []string{"project", "kind", "a", "b"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(iw.changes) {
				return nil, nil
			}
			r := iw.changes[i]
			i++
			return []any{r.project, int16(r.c.Kind), r.c.A, r.c.B}, nil
		}))
	if err != nil {
		return fmt.Errorf("store identity changes: %w", err)
	}
	var stP []int64
	var stID []string
	for p, set := range iw.stale {
		for id := range set {
			stP, stID = append(stP, p), append(stID, id)
		}
	}
	if len(stP) > 0 {
		rows, err := w.tx.Query(ctx, `SELECT i.project, i.id FROM identity_ids i
			JOIN unnest($1::int8[], $2::text[]) AS s(project, canonical) ON i.project = s.project AND i.canonical = s.canonical`, stP, stID)
		if err != nil {
			return fmt.Errorf("read identity ids: %w", err)
		}
		var p int64
		var id string
		_, err = pgx.ForEachRow(rows, []any{&p, &id}, func() error {
			addTo(iw.touched, p, id)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read identity ids: %w", err)
		}
	}
	var ps []int64
	var ids, canon []string
	for p, set := range iw.touched {
		g := w.graphs[p].pg.g
		for id := range set {
			ps, ids, canon = append(ps, p), append(ids, id), append(canon, g.Resolve(id))
		}
	}
	var b pgx.Batch
	b.Queue(`INSERT INTO identity_ids (project, id, canonical) SELECT * FROM unnest($1::int8[], $2::text[], $3::text[])
		ON CONFLICT (project, id) DO UPDATE SET canonical = excluded.canonical
		WHERE identity_ids.canonical <> excluded.canonical`, ps, ids, canon)
	// Under the identity locks the newest changes of these projects are ours.
	b.Queue(`SELECT project, max(seq) FROM identity_changes WHERE project = ANY($1) GROUP BY project`, w.identProjects).
		Query(func(rows pgx.Rows) error {
			var p, seq int64
			_, err := pgx.ForEachRow(rows, []any{&p, &seq}, func() error {
				if lg := w.graphs[p]; lg != nil && lg.changed {
					lg.newSeq = seq
				}
				return nil
			})
			return err
		})
	if err := w.tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("store identity ids: %w", err)
	}
	return nil
}
