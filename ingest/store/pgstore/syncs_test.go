package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

func checkpoint(t *testing.T, s store.Store, project int64, importID string) string {
	t.Helper()
	v, err := s.Checkpoint(context.Background(), project, importID)
	if err != nil {
		t.Fatalf("checkpoint %s: %v", importID, err)
	}
	return string(v)
}

// TestProcessesShareCheckpoint: a checkpoint one store writes is what the
// other reads, together with the records it covers; a write that fails
// stores neither.
func TestProcessesShareCheckpoint(t *testing.T) {
	a, b := openPair(t)
	all := store.Scan{Project: 1, FromMs: -1 << 62, ToMs: 1 << 62}
	write(t, a, store.Batch{Project: 1, Events: storetest.GenEvents(1, 3, 0),
		Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w1")}})
	if got := checkpoint(t, b, 1, "imp"); got != "w1" {
		t.Fatalf("other store reads checkpoint %q, want w1", got)
	}
	if got := storetest.Collect(t, b, all); len(got) != 3 {
		t.Fatalf("other store sees %d events, want 3", len(got))
	}
	// Nothing but checkpoints; the later batch of one import wins.
	write(t, b,
		store.Batch{Project: 1, Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w2")}},
		store.Batch{Project: 1, Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w3")}},
		store.Batch{Project: 1, Checkpoint: &store.Checkpoint{Import: "gone", Value: []byte("x")}})
	if got := checkpoint(t, a, 1, "imp"); got != "w3" {
		t.Fatalf("checkpoint after a checkpoint-only write = %q, want w3", got)
	}
	// PostgreSQL text cannot hold U+0000: the write fails after its
	// checkpoints were queued, and must take them back with its events.
	bad := storetest.NewEvent(1, "bad\x00name", "u", 1, "i1", `{}`)
	_, err := a.Write(context.Background(), []store.Batch{{Project: 1,
		Events:     append(storetest.GenEvents(1, 5, 100), bad),
		Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("lost")}}})
	if err == nil {
		t.Fatal("a write with U+0000 in an event name succeeded")
	}
	if got := checkpoint(t, b, 1, "imp"); got != "w3" {
		t.Fatalf("checkpoint after a failed write = %q, want w3", got)
	}
	if got := storetest.Collect(t, b, all); len(got) != 3 {
		t.Fatalf("failed write stored %d events", len(got)-3)
	}
	write(t, b, store.Batch{Project: 1, Checkpoint: &store.Checkpoint{Import: "gone"}})
	if got := checkpoint(t, a, 1, "gone"); got != "" {
		t.Fatalf("cleared checkpoint reads %q", got)
	}
}

// TestProcessesStartOneRun: starts of one import racing in two stores make
// exactly one run: first while nothing ran, then for a new period, then
// none for a period that already ran.
func TestProcessesStartOneRun(t *testing.T) {
	a, b := openPair(t)
	const perStore = 25
	// round races 2×perStore starts and returns how many started and the
	// runs they got.
	round := func(name, period string, startedMs int64) (started int, ids map[string]bool) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		ids = map[string]bool{}
		for g := range 2 * perStore {
			s := store.Store(a)
			if g%2 == 1 {
				s = b
			}
			wg.Go(func() {
				r := store.Run{ID: fmt.Sprintf("%s-%d", name, g), Project: 1, Import: "imp", Trigger: "api",
					Period: period, StartedMs: startedMs}
				got, ok, err := s.StartRun(context.Background(), store.RunStart{Run: r, JoinWithinMs: 500})
				if err != nil {
					t.Errorf("start %s: %v", r.ID, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				ids[got.ID] = true
				if ok {
					started++
				}
			})
		}
		wg.Wait()
		return started, ids
	}
	one := func(ids map[string]bool) string {
		t.Helper()
		if len(ids) != 1 {
			t.Fatalf("starts got runs %v, want one run", ids)
		}
		for id := range ids {
			return id
		}
		return ""
	}
	finish := func(id string) {
		t.Helper()
		if err := b.UpdateRun(context.Background(), store.Run{ID: id, Status: store.RunSucceeded, EndedMs: 1}); err != nil {
			t.Fatalf("finish %s: %v", id, err)
		}
	}
	const period = "2026-11-22T10:00"
	started, ids := round("first", "", 1000)
	if started != 1 {
		t.Fatalf("%d started, want 1 (runs %v)", started, ids)
	}
	finish(one(ids))
	// Past the join window of the first run: a new period starts once.
	started, ids = round("period", period, 10_000)
	if started != 1 {
		t.Fatalf("new period: %d started, want 1 (runs %v)", started, ids)
	}
	p := one(ids)
	finish(p)
	started, ids = round("again", period, 20_000)
	if started != 0 || one(ids) != p {
		t.Fatalf("period that ran: %d started, runs %v; want %s joined", started, ids, p)
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM sync_runs`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d runs stored (%v), want 2", n, err)
	}
}

// TestOneRunningRunIndex: the partial unique index refuses a second
// RUNNING run of an import even when the advisory lock is bypassed.
func TestOneRunningRunIndex(t *testing.T) {
	a, _ := openPair(t)
	ctx := context.Background()
	if _, ok, err := a.StartRun(ctx, store.RunStart{Run: store.Run{ID: "r1", Project: 1, Import: "imp", Trigger: "api", StartedMs: 1}}); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	_, err := a.pool.Exec(ctx, `INSERT INTO sync_runs (`+runColumns+`)
		VALUES ('r2', 1, 'imp', 'api', '', 'RUNNING', '', 2, 0, 0, 0, 0, 0, 0, '[]', '', 0)`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("second RUNNING run inserted directly: %v, want a unique violation", err)
	}
}

// TestMigrateFromVersion1: a schema of the first release gains the sync
// tables and keeps its data.
func TestMigrateFromVersion1(t *testing.T) {
	dsn, schema := testSchema(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, sql := range []string{
		`SET search_path = ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE schema_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		migrations[0],
		`INSERT INTO schema_migrations (version) VALUES (1)`,
		`INSERT INTO events (project, time_ms, name, distinct_id, props, ingest_ms) VALUES (1, 5, 'e', 'u', '{}', 5)`,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s := openTest(t, dsn, schema, defaultPages())
	defer s.Close()
	write(t, s, store.Batch{Project: 1, Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w1")}})
	if got := checkpoint(t, s, 1, "imp"); got != "w1" {
		t.Fatalf("checkpoint after migrating = %q", got)
	}
	if got := storetest.Collect(t, s, store.Scan{Project: 1, FromMs: -1 << 62, ToMs: 1 << 62}); len(got) != 1 {
		t.Fatalf("%d events after migrating, want 1", len(got))
	}
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("version %d (%v), want %d", v, err, len(migrations))
	}
}

// TestStartRunIgnoresServerIsolation: a server or dsn defaulting to
// REPEATABLE READ must not let StartRun read runs from a snapshot taken
// before it held the import's lock.
func TestStartRunIgnoresServerIsolation(t *testing.T) {
	dsn, schema := testSchema(t)
	dsn += " default_transaction_isolation='repeatable read'"
	stores := []*testStore{openTest(t, dsn, schema, defaultPages()), openTest(t, dsn, schema, defaultPages())}
	defer stores[0].Close()
	defer stores[1].Close()
	var mu sync.Mutex
	var wg sync.WaitGroup
	started := 0
	for g := range 40 {
		wg.Go(func() {
			r := store.Run{ID: fmt.Sprintf("r%d", g), Project: 1, Import: "imp", Trigger: "api", StartedMs: 1}
			_, ok, err := stores[g%2].StartRun(context.Background(), store.RunStart{Run: r})
			if err != nil {
				t.Errorf("start %s: %v", r.ID, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				started++
			}
		})
	}
	wg.Wait()
	if started != 1 {
		t.Fatalf("%d runs started, want 1", started)
	}
}
