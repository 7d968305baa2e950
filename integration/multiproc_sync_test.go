package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Three server processes share one PostgreSQL store, with no other
// coordinator: 30 scheduled imports run once per period across them, and
// the runs of a process killed mid-run are taken over by the others once
// their leases lapse, ending with exactly one event per source row.

const (
	mpImports  = 30
	mpEvery    = 5 * time.Second // the imports' schedule, "@every 5s"
	mpLease    = "5s"            // renewed every 5/3 s: a process starved for a second or two under CI load keeps its runs
	mpBaseRows = 1000
)

func mpTable(i int) string  { return fmt.Sprintf("src%02d", i) }
func mpImport(i int) string { return fmt.Sprintf("mp-%02d", i) }
func mpEvent(i int) string  { return fmt.Sprintf("mp%02d", i) }

// mpImportsDir writes the 30 import files, reading src's tables through
// the DSN in the environment, as a secret must be.
func mpImportsDir(t *testing.T, src *pgDB) string {
	t.Helper()
	dir := t.TempDir()
	for i := range mpImports {
		spec := fmt.Sprintf(`id: %s
project_id: %d
import_type: event_stream
sync_mode: time_based
source: {kind: postgres, dsn: "${TRIBUTARY_IT_MP_DSN}"}
table_params: {table: %s}
event_name: %s
time_column_name: event_time
user_column_name: user_id
insert_id_column_name: id
insert_time_column_name: loaded_at
schedule: "@every %s"
`, mpImport(i), mainID, mpTable(i), mpEvent(i), mpEvery)
		if err := os.WriteFile(filepath.Join(dir, mpImport(i)+".yaml"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TRIBUTARY_IT_MP_DSN", src.dsn) // the children inherit it
	return dir
}

func TestPGThreeProcessesSyncExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("about two minutes of three processes")
	}
	src, st := newPGDB(t), newPGDB(t)
	rows := make([]int, mpImports) // source rows per table
	for i := range mpImports {
		src.sourceTable(t, mpTable(i), mpBaseRows)
		rows[i] = mpBaseRows
	}
	cfg := defaultConfig()
	cfg.ImportsDir, cfg.Store, cfg.SyncLease = mpImportsDir(t, src), storeURL(t, st), mpLease
	cfg.MinScheduleInterval = mpEvery.String() // under the 1m default, for a test of many ticks
	cfg.MetricsTok = "scrape-token-0123456789" // the lease counters are process-wide, not a project's
	servers := startCluster(t, 3, cfg)

	// Phase 1: a minute of ticks, source rows arriving and manual syncs
	// sent to every process.
	phaseStart := time.Now()
	manual := map[int]int{}
	for k := 0; time.Since(phaseStart) < 60*time.Second; k++ {
		i := rand.IntN(mpImports)
		src.addSourceRows(t, mpTable(i), rows[i]+1, rows[i]+200)
		rows[i] += 200
		if j := rand.IntN(mpImports); manual[j] < 3 { // the API allows 5 an hour
			manual[j]++
			manualSync(t, servers[k%3], mpImport(j))
		}
		time.Sleep(700 * time.Millisecond)
	}
	phaseEnd := time.Now()
	waitCaughtUp(t, st, rows, 90*time.Second)
	runs := storeRuns(t, st)
	checkOncePerPeriod(t, runs, phaseStart, phaseEnd)
	owners := map[string]int{}
	for _, r := range runs {
		owners[r.Owner]++
		if r.Status != "SUCCEEDED" && r.Status != "RUNNING" {
			t.Errorf("run %s of %s: %s %s", r.ID, r.Import, r.Status, r.Reason)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("runs by owner %v; want runs on each of the 3 processes", owners)
	}
	t.Logf("phase 1: %d runs, by owner %v", len(runs), owners)

	// Phase 2: big additions, visible at once (one transaction) and
	// handed to the victim at once by manual syncs, which is killed with
	// its runs under way.
	victim := servers[2]
	// bigRows per table keep the victim's runs going for several seconds:
	// a run's progress reaches the store every 2 s (ProgressEvery), and
	// with 120k rows the runs had all finished (in 2 s) before the wait
	// below saw one under way.
	const big, bigRows = 6, 600_000
	tx, err := src.conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range big {
		_, err := tx.Exec(t.Context(), `INSERT INTO `+mpTable(i)+` SELECT i, 'u' || i, now() - interval '20 hours' + i * interval '1 millisecond',
			timestamptz '2026-01-01' + (i / 500) * interval '1 second' FROM generate_series($1::bigint, $2::bigint) i`, rows[i]+1, rows[i]+bigRows)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] += bigRows
	}
	// A manual sync within the join window (2 s) after a tick's run of
	// the same import returns that run, and a tick after the commit takes
	// the rows itself: commit between ticks (aligned to multiples of
	// mpEvery) and trigger at once, so the victim's syncs start the runs.
	if off := time.Duration(time.Now().UnixNano()) % mpEvery; off < 2500*time.Millisecond || off > 3500*time.Millisecond {
		time.Sleep((mpEvery + 2500*time.Millisecond - off) % mpEvery)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range big {
		manualSync(t, victim, mpImport(i))
	}
	var killed []storeRun
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		progressed := false
		for _, r := range storeRuns(t, st) {
			progressed = progressed || r.Status == "RUNNING" && ownerOf(r.Owner, victim.PID) && r.RowsRead > 0
		}
		if progressed {
			break
		}
	}
	victim.Kill()
	killedAt := time.Now()
	// What the victim held when it died.
	for _, r := range storeRuns(t, st) {
		if r.Status == "RUNNING" && ownerOf(r.Owner, victim.PID) {
			killed = append(killed, r)
		}
	}
	if len(killed) == 0 {
		t.Fatal("the victim held no running run when it was killed")
	}
	waitCaughtUp(t, st, rows, 120*time.Second)
	t.Logf("killed %d running runs; caught up %s after the kill", len(killed), time.Since(killedAt).Round(time.Second))
	checkTakenOver(t, storeRuns(t, st), killed, victim.PID)
	checkOncePerPeriod(t, storeRuns(t, st), phaseStart, phaseEnd)
	var reaped, takeovers float64
	for _, s := range servers[:2] {
		page := string(s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: bearerAuth(cfg.MetricsTok)}).Body)
		reaped += metricValue(page, "tributary_sync_leases_reaped_total")
		takeovers += metricValue(page, "tributary_sync_takeovers_total")
	}
	if int(reaped) < len(killed) || takeovers < 1 {
		t.Fatalf("metrics of the survivors: %v leases reaped, %v takeovers; want ≥ %d and ≥ 1", reaped, takeovers, len(killed))
	}
}

// waitCaughtUp waits until every import stored exactly its table's rows,
// and fails on a duplicate or on more events than rows.
func waitCaughtUp(t *testing.T, st *pgDB, rows []int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		total, distinct := eventCounts(t, st)
		behind := 0
		for i, want := range rows {
			n, d := total[mpEvent(i)], distinct[mpEvent(i)]
			if n != d || n > int64(want) {
				t.Fatalf("import %s: %d events, %d distinct ids, %d source rows: duplicates", mpImport(i), n, d, want)
			}
			if n < int64(want) {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d imports still behind their source after %s: %v (want %v)", behind, limit, total, rows)
		}
		time.Sleep(time.Second)
	}
}

// checkOncePerPeriod: no (import, period) ran twice, and each tick of
// the phase, for each import, either ran once or found a run of the
// import in progress (or one that started within the 2 s join window).
func checkOncePerPeriod(t *testing.T, runs []storeRun, from, to time.Time) {
	t.Helper()
	type key struct{ imp, period string }
	seen := map[key][]string{}
	byImport := map[string][]storeRun{}
	for _, r := range runs {
		byImport[r.Import] = append(byImport[r.Import], r)
		if r.Period != "" {
			k := key{r.Import, r.Period}
			seen[k] = append(seen[k], r.ID)
		}
	}
	for k, ids := range seen {
		if len(ids) != 1 {
			t.Fatalf("import %s period %s ran %d times: %v", k.imp, k.period, len(ids), ids)
		}
	}
	// How late a tick may start its run: the latest that any tick which
	// did start a run was, at least 1.5 s. Under load (CI runs packages
	// side by side on two cores) ticks fire late, and a late tick that
	// found a run started after its period began was still skipped rightly.
	slack := int64(1500)
	for _, r := range runs {
		if p, err := time.Parse(time.RFC3339, r.Period); err == nil {
			slack = max(slack, r.StartedMs-p.UnixMilli()+100)
		}
	}
	ran, skipped := 0, 0
	for p := from.Truncate(mpEvery).Add(2 * mpEvery); p.Before(to.Add(-mpEvery)); p = p.Add(mpEvery) {
		period, ms := p.UTC().Format(time.RFC3339), p.UnixMilli()
		for i := range mpImports {
			if len(seen[key{mpImport(i), period}]) == 1 {
				ran++
				continue
			}
			covered := false
			for _, r := range byImport[mpImport(i)] {
				running := r.StartedMs <= ms+slack && (r.EndedMs == 0 || r.EndedMs >= ms-100)
				joined := r.Status == "SUCCEEDED" && r.StartedMs >= ms-2100 && r.StartedMs <= ms+slack
				if running || joined {
					covered = true
					break
				}
			}
			if !covered {
				t.Fatalf("import %s: period %s never ran and no run covered it (tick slack %d ms); its runs: %+v", mpImport(i), period, slack, byImport[mpImport(i)])
			}
			skipped++
		}
	}
	t.Logf("periods: %d ran, %d covered by runs in progress; ticks up to %d ms late", ran, skipped, slack)
	if ran == 0 || skipped > ran {
		t.Fatalf("%d periods ran, %d were covered by runs in progress; the schedule barely ran", ran, skipped)
	}
}

// checkTakenOver: each run the victim held is FAILED (lease expired) and
// a run of its import that started after it, on a surviving process,
// succeeded: the recovery run, or a run that was already starting.
func checkTakenOver(t *testing.T, runs []storeRun, killed []storeRun, pid int) {
	t.Helper()
	resumes := 0
	for _, k := range killed {
		var done bool
		for _, r := range runs {
			switch {
			case r.ID == k.ID:
				if r.Status != "FAILED" || !strings.Contains(r.Reason, "lease expired") {
					t.Fatalf("killed run %s: %s %q; want FAILED, lease expired", r.ID, r.Status, r.Reason)
				}
			case r.Import == k.Import && r.StartedMs > k.StartedMs && r.Status == "SUCCEEDED" && !ownerOf(r.Owner, pid):
				done = true
				if r.Period == "resume:"+k.ID {
					resumes++
					if r.Trigger != "recovery" {
						t.Fatalf("recovery run %+v", r)
					}
				}
			}
		}
		if !done {
			t.Fatalf("no surviving process completed import %s after the kill of run %s", k.Import, k.ID)
		}
	}
	if resumes == 0 {
		t.Fatalf("none of the %d killed runs was resumed by a recovery run", len(killed))
	}
}
