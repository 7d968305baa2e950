package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// TestTakenOverRunCannotApplyHistory: a stalled process's History
// versions for a run another process took over are refused and leave
// nothing behind (they would have no Mirror state row to delete them
// by); a live run's are stored.
func TestTakenOverRunCannotApplyHistory(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	for _, id := range []string{"live", "stalled"} {
		r := store.Run{ID: id, Project: 1, Import: "imp-" + id, Trigger: "schedule", StartedMs: 1000, Owner: "proc-a", LeaseUntilMs: 10_000}
		if _, ok, err := a.StartRun(ctx, store.RunStart{Run: r}); err != nil || !ok {
			t.Fatalf("start %s: %v %v", id, ok, err)
		}
	}
	if _, err := a.pool.Exec(ctx, `UPDATE sync_runs SET lease_until_ms = 90000 WHERE id = 'live'`); err != nil {
		t.Fatal(err)
	}
	if runs, err := b.InterruptRuns(ctx, "interrupted: lease expired", 20_000); err != nil || len(runs) != 1 || runs[0].ID != "stalled" {
		t.Fatalf("interrupt: %+v %v", runs, err)
	}
	v := []store.HistoryVersion{{ID: "u1", StartMs: 1, Props: []byte(`{"plan":"pro"}`)}}
	if err := a.HistoryApply(ctx, 1, "imp-stalled", "stalled", v, nil); !errors.Is(err, store.ErrRunEnded) {
		t.Fatalf("history apply of the taken-over run: %v, want ErrRunEnded", err)
	}
	if err := a.HistoryApply(ctx, 1, "imp-live", "live", v, nil); err != nil {
		t.Fatalf("history apply of the live run: %v", err)
	}
	count := func(imp string) int {
		var n int
		if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM history_versions WHERE import = $1`, imp).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n, m := count("imp-stalled"), count("imp-live"); n != 0 || m != 1 {
		t.Fatalf("versions stored: %d of the taken-over run (want 0), %d of the live one (want 1)", n, m)
	}
}
