package amplitude

import "testing"

// GET /amplitude?project_id=N lists the project's jobs to its own
// credentials only.
func TestListJobs(t *testing.T) {
	e := newEnv(t, nil)
	st := e.run(request())
	code, body := e.do("GET", "/amplitude?project_id=1", nil)
	jobs, _ := body["jobs"].([]any)
	if code != 200 || len(jobs) != 1 {
		t.Fatalf("list: %d %v", code, body)
	}
	j := jobs[0].(map[string]any)
	if j["job_id"] != st.ID || j["state"] != string(Succeeded) || j["hours_done"] != j["hours_total"] || j["events_imported"] == float64(0) {
		t.Errorf("listed job %v, want %s succeeded with its hours and events", j, st.ID)
	}
	e.statusUser = "tok-original" // another project's credential sees none of them
	if code, body := e.do("GET", "/amplitude?project_id=2", nil); code != 200 || len(body["jobs"].([]any)) != 0 {
		t.Errorf("another project: %d %v", code, body)
	}
	e.statusUser = "-"
	if code, _ := e.do("GET", "/amplitude?project_id=1", nil); code != 401 {
		t.Errorf("no credentials: %d", code)
	}
}
