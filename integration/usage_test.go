package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/migrate/amplitude/amptest"
)

// Monthly usage: events stored through /import, /track, a warehouse sync
// and an Amplitude migration count per source, duplicates do not, and the
// counters show in the app API and in /metrics.

func usagePath(project any) string { return fmt.Sprintf("/api/app/projects/%v/usage", project) }

type usageBody struct {
	Status  string `json:"status"`
	Results struct {
		Months []struct {
			Month   string           `json:"month"`
			Total   int64            `json:"total"`
			Sources map[string]int64 `json:"sources"`
		} `json:"months"`
	} `json:"results"`
}

func getUsage(t *testing.T, s *server, a authFn, q url.Values) usageBody {
	t.Helper()
	r := s.do(t, request{Method: http.MethodGet, Path: usagePath(mainID), Query: q, Auth: a})
	if r.Status != http.StatusOK {
		t.Fatalf("usage: %s", r)
	}
	var b usageBody
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Status != "ok" {
		t.Fatalf("usage body %s (%v)", r.Body, err)
	}
	return b
}

// migrateAmplitude runs a migration of the fake export's day and waits for it.
func migrateAmplitude(t *testing.T, s *server, amp *amptest.Server, day time.Time) int64 {
	t.Helper()
	body := mustJSON(t, map[string]any{"SOURCE_API_KEY": amp.Key, "SOURCE_API_SECRET": amp.Secret, "TARGET_TOKEN": mainToken,
		"START_DATE": day.Format(time.DateOnly), "END_DATE": day.Format(time.DateOnly)})
	r := s.do(t, request{Path: "/amplitude", Body: body})
	if r.Status != http.StatusAccepted {
		t.Fatalf("POST /amplitude: %s", r)
	}
	var st migrationStatus
	if err := json.Unmarshal(r.Body, &st); err != nil || st.StatusURL == "" {
		t.Fatalf("POST /amplitude body %s (%v)", r.Body, err)
	}
	return waitMigration(t, s, st.StatusURL).Imported
}

func TestUsageBySource(t *testing.T) {
	amp := amptest.New("amp-key", "amp-secret")
	defer amp.Close()
	t.Setenv("TRIBUTARY_AMPLITUDE_URL", amp.URL) // the child inherits it
	db := newPGDB(t)
	db.eventTable(t, 300)
	// Counts are per UTC month: a test that straddled the turn of a month
	// would split them, so one that starts within three minutes of it
	// waits for the new month first.
	now := time.Now().UTC()
	if turn := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC); turn.Sub(now) < 3*time.Minute {
		time.Sleep(turn.Sub(now) + time.Second)
	}
	s := syncServer(t, db)
	monthBefore := time.Now().UTC().Format("2006-01")

	// /import: 5 events, then the same 5 again (acknowledged, not stored).
	evs := events("usage-import", 5)
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), evs), 5)
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), evs), 5)
	// /track: 3 events.
	at := time.Now().Add(-time.Hour)
	trk := []map[string]any{trackEvent("t1", mainToken, at), trackEvent("t2", mainToken, at), trackEvent("t3", mainToken, at)}
	wantBody(t, s.track(t, http.MethodPost, nil, "application/json", mustJSON(t, trk), nil), "1")
	// A warehouse sync of 300 rows.
	if run := waitRun(t, s, syncImport, manualSync(t, s, syncImport)); run.Status != "SUCCEEDED" || run.Imported != 300 {
		t.Fatalf("sync run: %+v", run)
	}
	// An Amplitude migration of 4 events uploaded two days ago.
	day := time.Now().UTC().AddDate(0, 0, -2).Truncate(24 * time.Hour)
	for i := range 4 {
		et := day.Add(time.Duration(10+i) * time.Hour)
		if err := amp.Add(map[string]any{
			"event_type": "Amp event", "user_id": fmt.Sprintf("amp-user-%d", i), "device_id": "dev", "uuid": fmt.Sprintf("amp-%d", i),
			"amplitude_id": 100 + i, "event_time": et.Format("2006-01-02 15:04:05.000000"),
			"server_upload_time": et.Add(time.Minute).Format("2006-01-02 15:04:05.000000"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := migrateAmplitude(t, s, amp, day); n != 4 {
		t.Fatalf("migration imported %d events, want 4", n)
	}
	// Profile updates are not events.
	up := mustJSON(t, []map[string]any{{"$token": mainToken, "$distinct_id": "u1", "$set": map[string]any{"a": 1}}})
	wantBody(t, s.do(t, request{Path: "/engage", Body: up}), "1")

	month := time.Now().UTC().Format("2006-01")
	if month != monthBefore {
		t.Fatalf("the month changed during the test (%s → %s) although it waited for the turn: it ran over three minutes", monthBefore, month)
	}
	want := map[string]int64{"import": 5, "track": 3, "warehouse-import": 300, "amplitude": 4}
	check := func(what string, b usageBody) {
		t.Helper()
		if len(b.Results.Months) != 1 {
			t.Fatalf("%s: months %+v, want only %s", what, b.Results.Months, month)
		}
		m := b.Results.Months[0]
		if m.Month != month || m.Total != 312 || len(m.Sources) != len(want) {
			t.Fatalf("%s: %+v, want %s total 312 %v", what, m, month, want)
		}
		for src, n := range want {
			if m.Sources[src] != n {
				t.Fatalf("%s: source %s = %d, want %d (%+v)", what, src, m.Sources[src], n, m)
			}
		}
	}
	check("usage", getUsage(t, s, asOwner, nil))
	checkDailyUsage(t, s, want) // the same counts per day (usage/daily)
	check("usage of this month", getUsage(t, s, basicAuth(analystSA, analystSec), url.Values{"month": {month}}))
	if b := getUsage(t, s, asOwner, url.Values{"month": {"2001-02"}}); len(b.Results.Months) != 1 || b.Results.Months[0].Total != 0 ||
		b.Results.Months[0].Sources["import"] != 0 {
		t.Fatalf("a month without events: %+v", b.Results.Months)
	}

	metrics := string(s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: asSecret}).Body)
	for src, n := range want {
		line := fmt.Sprintf(`tributary_usage_events{month="%s",project="%d",source="%s"} %d`, month, mainID, src, n)
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if strings.Contains(metrics, fmt.Sprintf(`project="%d"`, otherID)) {
		t.Errorf("/metrics with project %d's secret shows project %d's series:\n%s", mainID, otherID, metrics)
	}

	// The counters survive a restart.
	s.Restart()
	check("usage after a restart", getUsage(t, s, asOwner, nil))
}

// The usage route takes the app API's service-account auth: any role of
// the project reads it; other credentials get 401, a project enrolled in
// another region 403, a malformed project id 404, a malformed month 400.
func TestUsageAuth(t *testing.T) {
	s := startServer(t, defaultConfig())
	cases := []struct {
		name   string
		path   string
		q      url.Values
		auth   authFn
		status int
	}{
		{"owner", usagePath(mainID), nil, asOwner, 200},
		{"analyst", usagePath(mainID), nil, basicAuth(analystSA, analystSec), 200},
		{"no credentials", usagePath(mainID), nil, noAuth, 401},
		{"wrong secret", usagePath(mainID), nil, basicAuth(ownerSA, "nope"), 401},
		{"account of another project", usagePath(mainID), nil, basicAuth(euSA, euSASecret), 401},
		{"project secret", usagePath(mainID), nil, asSecret, 401},
		{"unknown project", usagePath(99), nil, asOwner, 401},
		{"project in another region", usagePath(euID), nil, basicAuth(euSA, euSASecret), 403},
		{"malformed project id", usagePath("abc"), nil, asOwner, 404},
		{"project id 0", usagePath(0), nil, asOwner, 404},
		{"malformed month", usagePath(mainID), url.Values{"month": {"2026-13"}}, asOwner, 400},
	}
	for _, c := range cases {
		r := s.do(t, request{Method: http.MethodGet, Path: c.path, Query: c.q, Auth: c.auth})
		var body map[string]any
		_ = json.Unmarshal(r.Body, &body)
		if r.Status != c.status {
			t.Errorf("%s: %s, want %d", c.name, r, c.status)
			continue
		}
		if c.status != 200 && (body["status"] != "error" || body["error"] == "") {
			t.Errorf("%s: body %s, want {error, status: error}", c.name, r.Body)
		}
		if c.status == 401 && r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.name)
		}
	}
}
