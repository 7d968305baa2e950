package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/migrate/amplitude/amptest"
)

// migrationStatus is the part of GET /amplitude/{job_id} the tests read.
type migrationStatus struct {
	StatusURL  string `json:"status_url"`
	State      string `json:"state"`
	Error      string `json:"error"`
	HoursDone  int    `json:"hours_done"`
	HoursTotal int    `json:"hours_total"`
	Imported   int64  `json:"events_imported"`
	Failed     int64  `json:"events_failed"`
	Profiles   int64  `json:"profiles_updated"`
}

// waitMigration polls a job's status URL until it succeeds.
func waitMigration(t *testing.T, s *server, statusURL string) migrationStatus {
	t.Helper()
	var st migrationStatus
	var r reply
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r = s.do(t, request{Method: http.MethodGet, Path: statusURL, Auth: asSecret})
		if err := json.Unmarshal(r.Body, &st); err != nil || r.Status != http.StatusOK {
			t.Fatalf("job status %s: %v", r, err)
		}
		switch st.State {
		case "succeeded":
			return st
		case "failed":
			t.Fatalf("migration failed: %s", st.Error)
		}
	}
	t.Fatalf("migration not finished after 2 minutes: %s", r)
	return st
}

// A migration whose server is SIGKILLed mid-job resumes by itself when the
// server starts again (its credentials sealed with TRIBUTARY_MIGRATE_KEY),
// and the project ends with exactly one copy of every event and each
// user's profile from its latest event. The Export API is amptest's local
// server, which speaks Amplitude's protocol (a zip of gzipped NDJSON per
// request): the real service cannot run here.
func TestMigrationResumesAfterKill(t *testing.T) {
	const days, perDay, users = 3, 400, 20
	amp := amptest.New("amp-key", "amp-secret")
	defer amp.Close()
	first := time.Now().UTC().AddDate(0, 0, -5).Truncate(24 * time.Hour)
	last := first.AddDate(0, 0, days-1)
	const layout = "2006-01-02 15:04:05.000000"
	latestPlan := map[string]string{}
	for d := range days {
		for i := range perDay {
			at := first.AddDate(0, 0, d).Add(time.Duration(i) * (24 * time.Hour / perDay))
			user, plan := fmt.Sprintf("kill-user-%d", i%users), fmt.Sprintf("plan-%d-%d", d, i)
			latestPlan[user] = plan // events go in time order: the last one wins
			if err := amp.Add(map[string]any{
				"event_type": "Kill event", "user_id": user, "device_id": "dev-" + user, "uuid": fmt.Sprintf("kill-%d-%d", d, i),
				"amplitude_id": 1000 + i%users, "event_time": at.Format(layout), "server_upload_time": at.Add(time.Minute).Format(layout),
				"event_properties": map[string]any{"n": d*perDay + i}, "user_properties": map[string]any{"plan": plan},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The last day's export (a day is one request) waits until the server
	// is dead: the kill lands with the first day checkpointed and the
	// second loading or loaded, never after the job's end.
	reached, release := make(chan struct{}), make(chan struct{})
	var reachOnce, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	amp.OnRequest = func(start, end time.Time) {
		if start.Equal(last) && end.Equal(last.Add(23*time.Hour)) {
			reachOnce.Do(func() { close(reached) })
			<-release
		}
	}
	t.Setenv("TRIBUTARY_AMPLITUDE_URL", amp.URL) // the child inherits both
	t.Setenv("TRIBUTARY_MIGRATE_KEY", strings.Repeat("5a", 32))
	s := startServer(t, defaultConfig())

	body := mustJSON(t, map[string]any{"SOURCE_API_KEY": amp.Key, "SOURCE_API_SECRET": amp.Secret, "TARGET_TOKEN": mainToken,
		"START_DATE": first.Format(time.DateOnly), "END_DATE": last.Format(time.DateOnly)})
	r := s.do(t, request{Path: "/amplitude", Body: body})
	var st migrationStatus
	if err := json.Unmarshal(r.Body, &st); err != nil || r.Status != http.StatusAccepted || st.StatusURL == "" {
		t.Fatalf("POST /amplitude: %s (%v)", r, err)
	}
	select {
	case <-reached:
	case <-time.After(2 * time.Minute):
		t.Fatal("the job never asked for its last day")
	}
	r = s.do(t, request{Method: http.MethodGet, Path: st.StatusURL, Auth: asSecret})
	var before migrationStatus
	if err := json.Unmarshal(r.Body, &before); err != nil || before.State != "exporting" || before.HoursDone >= days*24 {
		t.Fatalf("before the kill: %s (%v)", r, err)
	}
	s.Kill()
	free()
	s.Start()
	st = waitMigration(t, s, st.StatusURL)
	total := int64(days * perDay)
	if st.HoursDone != days*24 || st.HoursTotal != days*24 || st.Imported != total || st.Failed != 0 || st.Profiles != users {
		t.Fatalf("resumed job: %+v, want %d hours, %d events, %d profiles", st, days*24, total, users)
	}

	got := s.export(t, asSecret, 0, url.Values{"from_date": {first.Format(time.DateOnly)}, "to_date": {last.Format(time.DateOnly)}})
	ids := map[string]int{}
	for _, e := range got {
		if e.Event != "Kill event" {
			t.Fatalf("unexpected event %+v", e)
		}
		ids[e.InsertID()]++
	}
	if int64(len(got)) != total || int64(len(ids)) != total {
		t.Fatalf("after the kill and resume: %d events stored, %d distinct insert ids; want %d of each", len(got), len(ids), total)
	}
	profiles := engageProfiles(t, s, mainSecret, nil)
	for user, plan := range latestPlan {
		if p := profiles[user]; p == nil || p["plan"] != plan {
			t.Errorf("profile of %s: %v, want plan %s (its latest event's)", user, p, plan)
		}
	}
}
