package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func startedRun(t *testing.T, s store.Store, id string) store.Run {
	t.Helper()
	r, ok, err := s.StartRun(context.Background(), store.RunStart{Run: store.Run{ID: id, Project: 1, Import: "imp", Trigger: "api", StartedMs: 1000}})
	if err != nil || !ok {
		t.Fatalf("start run %s: %v (started %v)", id, err, ok)
	}
	return r
}

// testAlertsEndRun: a run's end and its alerts and rule states commit
// together and survive a restart; raising an alert again keeps one copy;
// a run no longer RUNNING takes neither end nor alerts.
func testAlertsEndRun(t *testing.T, h Harness) {
	ctx := context.Background()
	s := h.Open(t)
	r := startedRun(t, s, "r1")
	r.Status, r.EndedMs, r.Reason = store.RunFailed, 2000, "boom"
	a := store.Alert{ID: "1.imp.r1.run_failed", Destination: "hook", Project: 1, Import: "imp", Kind: "run_failed",
		Body: []byte(`{"kind":"run_failed"}`), CreatedMs: 2000, NextMs: 2000}
	st := store.RuleState{Project: 1, Import: "imp", Rule: "run", State: "failing", UpdatedMs: 2000}
	if err := s.EndRun(ctx, store.RunEnd{Run: r, Alerts: []store.Alert{a}, States: []store.RuleState{st}}); err != nil {
		t.Fatal(err)
	}
	// Ended already: refused whole.
	late := store.Alert{ID: "late", Destination: "hook", Project: 1, Import: "imp", Kind: "x", Body: []byte(`{}`), CreatedMs: 1, NextMs: 1}
	if err := s.EndRun(ctx, store.RunEnd{Run: r, Alerts: []store.Alert{late}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ending an ended run: %v, want ErrNotFound", err)
	}
	// Raised again (another process, a retry): one copy.
	if err := s.RaiseAlerts(ctx, []store.Alert{a}, nil); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s)
	runs, err := s.Runs(ctx, store.RunFilter{Project: 1, Import: "imp"})
	if err != nil || len(runs) != 1 || runs[0].Status != store.RunFailed || runs[0].Reason != "boom" {
		t.Fatalf("runs after reopen: %+v %v", runs, err)
	}
	sts, err := s.RuleStates(ctx, 1, "imp")
	if err != nil || len(sts) != 1 || sts[0].State != "failing" || string(sts[0].Detail) != "{}" {
		t.Fatalf("rule states: %+v %v", sts, err)
	}
	got, err := s.ClaimAlerts(ctx, "p1", 3000, 9000, 10)
	if err != nil || len(got) != 1 || got[0].ID != a.ID || string(got[0].Body) != string(a.Body) {
		t.Fatalf("claimed %+v %v, want the one alert", got, err)
	}
	// Leased: nobody else gets it until the lease lapses.
	if again, err := s.ClaimAlerts(ctx, "p2", 4000, 9000, 10); err != nil || len(again) != 0 {
		t.Fatalf("claimed a leased alert: %+v %v", again, err)
	}
	// A settle by a process that does not hold the lease is ignored.
	if err := s.SettleAlert(ctx, store.AlertSettle{ID: a.ID, Destination: "hook", Owner: "p2", Status: store.AlertSent, NowMs: 4000}); err != nil {
		t.Fatal(err)
	}
	// Failed attempt: retried at NextMs.
	if err := s.SettleAlert(ctx, store.AlertSettle{ID: a.ID, Destination: "hook", Owner: "p1", Status: store.AlertPending, NextMs: 5000, Error: "503", NowMs: 4000}); err != nil {
		t.Fatal(err)
	}
	if early, _ := s.ClaimAlerts(ctx, "p2", 4500, 9000, 10); len(early) != 0 {
		t.Fatalf("claimed before its retry time: %+v", early)
	}
	got, err = s.ClaimAlerts(ctx, "p2", 5000, 9000, 10)
	if err != nil || len(got) != 1 || got[0].Attempts != 1 || got[0].LastError != "503" {
		t.Fatalf("retry claim: %+v %v", got, err)
	}
	if err := s.SettleAlert(ctx, store.AlertSettle{ID: a.ID, Destination: "hook", Owner: "p2", Status: store.AlertSent, NowMs: 5100}); err != nil {
		t.Fatal(err)
	}
	// Sent: never claimed again, even raised again.
	if err := s.RaiseAlerts(ctx, []store.Alert{a}, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.ClaimAlerts(ctx, "p3", 1<<40, 1<<41, 10); len(after) != 0 {
		t.Fatalf("a sent alert was claimed again: %+v", after)
	}
	counts, err := s.AlertCounts(ctx)
	if err != nil || counts[1][store.AlertSent] != 1 || counts[1][store.AlertPending] != 0 {
		t.Fatalf("counts %v %v", counts, err)
	}
	if err := s.PruneAlerts(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	if counts, _ := s.AlertCounts(ctx); len(counts) != 0 {
		t.Fatalf("counts after prune: %v", counts)
	}
}
