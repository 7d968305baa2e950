package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `tributary sync` raises the same alerts as serve and hands the outbox
// over between processes: a CLI run that fails while the receiver is
// down leaves its alert in the outbox, the next serve delivers it once,
// and the CLI's next (successful) run delivers its own recovery notice
// before it exits. On both stores.
func TestAlertFromCLISync(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "embedded"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			db := newPGDB(t)
			hook := newAlertReceiver(t)
			hook.down.Store(true)
			t.Setenv("TRIBUTARY_IT_ALERT_URL", hook.srv.URL+"/tributary")
			cfg := defaultConfig()
			if pg {
				cfg.Store = storeURL(t, newPGDB(t))
			}
			cfg.Projects[0].Alerts = map[string]any{
				"destinations": []map[string]any{{"name": "hook", "kind": "webhook", "url": "${TRIBUTARY_IT_ALERT_URL}"}},
				"retry":        map[string]any{"base": "100ms", "max": "500ms", "attempts": 100},
			}
			s := syncServerCfg(t, db, cfg)
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			sync := func() (string, error) {
				t.Helper()
				out, err := exec.Command(binPath, "sync", "--config", s.cfgPath, "--data-dir", s.dataDir, "--quiet",
					"--alert-wait", "2s", "-c", filepath.Join(s.Cfg.ImportsDir, "ev.yaml")).CombinedOutput()
				return string(out), err
			}
			// No table yet: the run fails, and its alert cannot go out.
			if out, err := sync(); err == nil || !strings.Contains(out, "FAILED") || !strings.Contains(out, "1 alert(s) not delivered") {
				t.Fatalf("CLI sync of a missing table with the receiver down: %v\n%s", err, out)
			}
			if hook.tried.Load() == 0 {
				t.Fatal("the CLI never tried to deliver the failure alert")
			}
			hook.down.Store(false)
			s.Start()
			hook.waitKind(t, "run_failed")
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			db.eventTable(t, 20)
			out, err := sync()
			if err != nil || !strings.Contains(out, "SUCCEEDED") || strings.Contains(out, "not delivered") {
				t.Fatalf("CLI sync after the table exists: %v\n%s", err, out)
			}
			if kinds, dups := hook.kinds(); dups != 0 || len(kinds) != 2 || kinds["run_failed"] != 1 || kinds["run_recovered"] != 1 {
				t.Fatalf("receiver got %v with %d duplicates after the CLI's recovery; want one run_failed and one run_recovered", kinds, dups)
			}
			// Nothing is left for serve to send again.
			s.Start()
			time.Sleep(time.Second) // a redelivery would come within the retry's max
			if kinds, dups := hook.kinds(); dups != 0 || len(kinds) != 2 {
				t.Fatalf("receiver got %v with %d duplicates after serve started again", kinds, dups)
			}
		})
	}
}
