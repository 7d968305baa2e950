package scheduler

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// leased builds a scheduler over f's catalog with a short lease.
func (f *fixture) leased(t *testing.T, owner string, lease time.Duration) (*Scheduler, *metrics.Registry) {
	t.Helper()
	reg := metrics.New()
	s := New(f.sched.Catalog(), Options{Runner: f.sched.opt.Runner, Store: f.st, JoinWindow: time.Millisecond,
		Owner: owner, Lease: lease, Metrics: reg})
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s, reg
}

func counter(reg *metrics.Registry, name string) int64 { return reg.Counter(name, "").Value() }

// waitFor polls cond for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A run of another owner whose lease lapses while this scheduler runs is
// interrupted by the periodic search and resumed here from the committed
// watermark, once; runs of this scheduler keep their renewed leases.
func TestExpiredLeaseTakenOver(t *testing.T) {
	f := newFixture(t, 20_000, "api")
	// 3s, not 1s: renewals contend with the import for the store, and a lapsed
	// lease would get the recovery run itself reaped on a loaded machine.
	s, reg := f.leased(t, "me", 3*time.Second)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another process's run that stops renewing at once.
	ghost := store.Run{ID: "ghost", Project: 1, Import: "ev", Trigger: TriggerAPI, StartedMs: time.Now().UnixMilli(),
		Owner: "other", LeaseUntilMs: time.Now().Add(300 * time.Millisecond).UnixMilli()}
	if _, ok, err := f.st.StartRun(context.Background(), store.RunStart{Run: ghost}); err != nil || !ok {
		t.Fatalf("start ghost: %v %v", ok, err)
	}
	var resumed store.Run
	waitFor(t, "the recovery run", func() bool {
		runs, _ := f.st.Runs(context.Background(), store.RunFilter{Project: 1, Import: "ev"})
		for _, r := range runs {
			if r.Period == "resume:ghost" {
				resumed = r
				return true
			}
		}
		return false
	})
	if resumed.Trigger != TriggerRecovery || resumed.Owner != "me" {
		t.Fatalf("recovery run: %+v", resumed)
	}
	done := f.wait(t, resumed.ID)
	if done.Status != store.RunSucceeded || done.Imported != int64(f.rows) {
		t.Fatalf("recovery run: %+v", done)
	}
	runs, _ := f.st.Runs(context.Background(), store.RunFilter{Project: 1, Import: "ev"})
	if g := runs[len(runs)-1]; g.ID != "ghost" || g.Status != store.RunFailed || g.Reason != reasonExpired {
		t.Fatalf("the ghost run: %+v", g)
	}
	if n := f.events(t); n != f.rows {
		t.Fatalf("%d events, want %d", n, f.rows)
	}
	if r, tk := counter(reg, "tributary_sync_leases_reaped_total"), counter(reg, "tributary_sync_takeovers_total"); r != 1 || tk != 1 {
		t.Fatalf("reaped %d, takeovers %d; want 1 and 1", r, tk)
	}
	var b strings.Builder
	if err := reg.Write(&b); err != nil || !strings.Contains(b.String(), "tributary_sync_runs_owned") {
		t.Fatalf("metrics lack the owned runs gauge (%v):\n%s", err, b.String())
	}
}

// A run outliving many leases keeps running while renewed; once another
// process interrupts it anyway (this one was cut off), the next renewal
// cancels it here and its end does not overwrite the interruption.
func TestLostLeaseCancelsRun(t *testing.T) {
	f := newFixture(t, 2_000_000, "api")
	s, reg := f.leased(t, "me", 600*time.Millisecond)
	r, ok, err := s.Trigger(context.Background(), 1, "ev", TriggerAPI, false)
	if err != nil || !ok {
		t.Fatalf("trigger: %v %v", ok, err)
	}
	time.Sleep(1500 * time.Millisecond) // several leases
	if st, ok := s.Progress(r.ID); !ok || st.RowsRead == int64(f.rows) {
		t.Fatalf("the run finished within 1.5s (%+v): nothing to take over; the fixture needs more rows", st)
	}
	got, err := f.st.InterruptRuns(context.Background(), reasonExpired, time.Now().Add(time.Hour).UnixMilli())
	if err != nil || len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("interrupt: %+v %v", got, err)
	}
	waitFor(t, "the run to stop", func() bool { _, running := s.Progress(r.ID); return !running })
	end := f.wait(t, r.ID)
	if end.Status != store.RunFailed || end.Reason != reasonExpired {
		t.Fatalf("run after losing its lease: %+v", end)
	}
	if n := counter(reg, "tributary_sync_leases_lost_total"); n != 1 {
		t.Fatalf("leases lost: %d, want 1", n)
	}
}

// "@every D" activates at the same instants in every process, whenever
// each started, and a late tick names the period of its activation.
func TestEveryIsAligned(t *testing.T) {
	sched, gran, err := parseSchedule("@every 5s")
	if err != nil || gran != 5*time.Second {
		t.Fatalf("parse: %v %v", gran, err)
	}
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a, b := sched.Next(base.Add(1300*time.Millisecond)), sched.Next(base.Add(3900*time.Millisecond))
	if !a.Equal(base.Add(5*time.Second)) || !b.Equal(a) {
		t.Fatalf("next activations %v and %v; want both %v", a, b, base.Add(5*time.Second))
	}
	if p := periodOf(a.Add(1700*time.Millisecond), gran); p != "2026-03-01T10:00:05Z" {
		t.Fatalf("period of a late tick: %s", p)
	}
	_, gran, _ = parseSchedule("*/15 * * * *")
	if p := periodOf(base.Add(15*time.Minute+3*time.Second), gran); p != "2026-03-01T10:15:00Z" {
		t.Fatalf("cron period: %s", p)
	}
}

// A renewal that meets the store closed (the CLI closes it as the process
// ends), or whose renewer is stopped mid-call, is the shutdown, not a
// failure worth a warning (`tributary sync` printed "renewing run leases
// … context canceled" at some exits).
func TestRenewOnClosedStoreIsQuiet(t *testing.T) {
	f := newFixture(t, 10, "api")
	var logs strings.Builder
	s := New(f.sched.Catalog(), Options{Runner: f.sched.opt.Runner, Store: f.st, Owner: "me",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	stopped, stop := context.WithCancel(context.Background())
	stop()
	s.renew(stopped)
	if logs.Len() != 0 {
		t.Fatalf("renewal by a stopped renewer logged: %s", logs.String())
	}
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	s.renew(context.Background())
	if logs.Len() != 0 {
		t.Fatalf("renewal on a closed store logged: %s", logs.String())
	}
}
