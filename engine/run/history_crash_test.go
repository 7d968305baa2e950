package run

import (
	"context"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// crashingStore is a real store whose chosen step fails once, as if the
// process died there: after the versions are saved (the state apply),
// after the state (the profile write), or at the end (the settle).
type crashingStore struct {
	store.Store
	store.Mirrors
	store.Histories
	step  string
	fired bool
}

var errCrash = errors.New("simulated crash")

func (c *crashingStore) hit(step string) bool {
	if c.step == step && !c.fired {
		c.fired = true
		return true
	}
	return false
}

func (c *crashingStore) MirrorApply(ctx context.Context, a store.MirrorApply) error {
	if c.hit("state") {
		return errCrash
	}
	return c.Mirrors.MirrorApply(ctx, a)
}

func (c *crashingStore) Write(ctx context.Context, b []store.Batch) (store.WriteResult, error) {
	if c.hit("profiles") {
		return store.WriteResult{}, errCrash
	}
	return c.Store.Write(ctx, b)
}

func (c *crashingStore) MirrorSettle(ctx context.Context, project int64, importID, runID string) error {
	if c.hit("settle") {
		return errCrash
	}
	return c.Mirrors.MirrorSettle(ctx, project, importID, runID)
}

// TestMirrorHistoryCrash: a History run that dies after saving versions,
// after recording the state or before settling leaves a state the next
// run repairs: the profiles end equal to the versions current now, for
// inserts, deletes and moved starts alike.
func TestMirrorHistoryCrash(t *testing.T) {
	for _, sc := range testStores(t) {
		for _, step := range []string{"state", "profiles", "settle"} {
			t.Run(sc.name+"/"+step, func(t *testing.T) {
				st := sc.open(t)
				f := newMirrorFixture(t, st,
					"id: hist\nimport_type: people\ntable_params: {table: hist}\nuser_column_name: uid\nhistory: {start_time_column_name: start}\n",
					`CREATE TABLE hist (uid VARCHAR, start TIMESTAMP, plan VARCHAR)`,
					`INSERT INTO hist VALUES ('u1', '2024-01-01', 'free'), ('u1', '2024-06-01', 'pro'), ('u2', '2024-03-01', 'team')`)
				crashThenRepair := func(round string) {
					t.Helper()
					f.st = &crashingStore{Store: st, Mirrors: st.(store.Mirrors), Histories: st.(store.Histories), step: step}
					if _, err := f.run(); !errors.Is(err, errCrash) {
						t.Fatalf("%s: run with a crash at %s: %v", round, step, err)
					}
					f.st = st
					if _, err := f.run(); err != nil {
						t.Fatalf("%s: run after the crash: %v", round, err)
					}
					f.wantProfiles(round, profile.User, historyCurrent, "uid")
				}
				crashThenRepair("first")
				f.exec(`DELETE FROM hist WHERE uid = 'u1' AND start = '2024-06-01'`,
					`UPDATE hist SET start = '2024-02-01', plan = 'basic' WHERE uid = 'u2'`)
				crashThenRepair("changes")
				f.exec(`DELETE FROM hist WHERE uid = 'u2'`)
				crashThenRepair("u2 gone")
				if got := asOfProps(t, st, "hist", "u2", 1<<50); got != "none" {
					t.Fatalf("u2's versions after it left the table: %s", got)
				}
				f.sync("quiet", 0, 0, 0)
			})
		}
	}
}
