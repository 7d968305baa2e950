package amplitude

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/migrate/amplitude/amptest"
)

// checkStored asserts the project holds exactly one copy of every valid
// fixture event, attributed as Simplified ID Merge attributes it, and one
// profile per user, $set from the user's latest event.
func (e *env) checkStored() {
	e.t.Helper()
	evs := e.stored()
	if len(evs) != e.fx.valid {
		e.t.Fatalf("stored %d events; want %d", len(evs), e.fx.valid)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.InsertID] {
			e.t.Fatalf("insert id %s stored twice", ev.InsertID)
		}
		seen[ev.InsertID] = true
		var p map[string]any
		if err := json.Unmarshal(ev.Props, &p); err != nil {
			e.t.Fatal(err)
		}
		if p["$source"] != "amplitude" || p["$import"] != true {
			e.t.Fatalf("event %s lacks the migration tags: %s", ev.InsertID, ev.Props)
		}
		user, _ := p["$user_id"].(string)
		want := user
		if user == "" {
			want = "$device:" + p["$device_id"].(string)
		}
		if ev.DistinctID != want {
			e.t.Fatalf("event %s has distinct_id %q; want %q", ev.InsertID, ev.DistinctID, want)
		}
	}
	got := e.profiles()
	if len(got) != len(e.fx.latest) {
		e.t.Fatalf("%d profiles; want %d", len(got), len(e.fx.latest))
	}
	for user, w := range e.fx.latest {
		want := map[string]any{"$last_seen": time.UnixMilli(w.ms).UTC().Format("2006-01-02T15:04:05")}
		raw, _ := json.Marshal(w.props)
		var props map[string]any
		json.Unmarshal(raw, &props)
		for k, v := range props {
			want[k] = v
		}
		if !reflect.DeepEqual(got[user], want) {
			e.t.Fatalf("profile %s:\n got %v\nwant %v", user, got[user], want)
		}
	}
	if got["user-5"]["plan"] != "newest" || got["user-0"]["plan"] == "stale" {
		e.t.Fatalf("latest must follow event_time: user-5 %v, user-0 %v", got["user-5"], got["user-0"])
	}
}

// A whole migration over the real store, through the HTTP API, then the
// same request again: the second job stores nothing new.
func TestMigrationRunTwice(t *testing.T) {
	e := newEnv(t, nil)
	st := e.run(request())
	if st.State != Succeeded || st.Error != "" {
		t.Fatalf("job: %+v", st)
	}
	total := len(e.fx.events)
	if st.HoursDone != 96 || st.HoursTotal != 96 || st.EventsExported != int64(total) || st.EventsImported != int64(e.fx.valid) ||
		st.EventsFailed != int64(e.fx.invalid) || st.EventsDuplicate != 0 || st.ProfilesUpdated != fixtureUsers || st.ProfilesFailed != 0 {
		t.Fatalf("counts: %+v; want %d exported, %d imported, %d failed, %d profiles", st, total, e.fx.valid, e.fx.invalid, fixtureUsers)
	}
	if len(st.Failures) != e.fx.invalid {
		t.Fatalf("failures: %+v", st.Failures)
	}
	fields := map[string]int{}
	for _, f := range st.Failures {
		if !strings.HasPrefix(f.File, "187520/187520_2024-03-0") || f.Line < 1 {
			t.Fatalf("failure without location: %+v", f)
		}
		fields[f.Field]++
	}
	if fields["event"] == 0 || fields["event_time"] == 0 || fields["properties.deep"] == 0 {
		t.Fatalf("failure fields: %v", fields)
	}
	if st.FinishedAt.IsZero() || st.StartedAt.IsZero() || st.ElapsedSeconds <= 0 {
		t.Fatalf("timing: %+v", st)
	}
	e.checkStored()
	// The job file holds no credentials once the job is final, and its
	// work directory is gone.
	raw, err := os.ReadFile(filepath.Join(e.dir, "migrations", st.ID+".json"))
	if err != nil || strings.Contains(string(raw), testSecret) || strings.Contains(string(raw), testKey) {
		t.Fatalf("job file: %v\n%s", err, raw)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "migrations", st.ID+".d")); !os.IsNotExist(err) {
		t.Fatalf("work dir left: %v", err)
	}

	again := e.run(request())
	if again.ID == st.ID || again.State != Succeeded || again.EventsImported != int64(e.fx.valid) ||
		again.EventsDuplicate != int64(e.fx.valid) || again.ProfilesUpdated != fixtureUsers {
		t.Fatalf("second job: %+v", again)
	}
	e.checkStored()
	if strings.Contains(e.logs.String(), testSecret) || strings.Contains(e.logs.String(), testKey) {
		t.Fatal("credentials in the log")
	}
}

// awaitRequest holds the first write until the fake Export API has been
// asked for a range, then lets every write through.
type awaitRequest struct {
	store.Store
	srv        *amptest.Server
	start, end string
	once       sync.Once
	seen       atomic.Bool
}

func (s *awaitRequest) Write(ctx context.Context, b []store.Batch) (store.WriteResult, error) {
	s.once.Do(func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, r := range s.srv.Requests() {
				if r.Start == s.start && r.End == s.end {
					s.seen.Store(true)
					return
				}
			}
		}
	})
	return s.Store.Write(ctx, b)
}

// The next day downloads while a day loads, and is then loaded from that
// download: the job asks for each day once.
func TestMigrationFetchesAhead(t *testing.T) {
	e := newEnv(t, nil)
	w := &awaitRequest{srv: e.srv, start: "20240302T00", end: "20240302T23"}
	e.wrap = func(st store.Store) store.Store { w.Store = st; return w }
	e.restart()
	st := e.run(request())
	if st.State != Succeeded || st.EventsImported != int64(e.fx.valid) || st.ProfilesUpdated != fixtureUsers {
		t.Fatalf("job: %+v", st)
	}
	if !w.seen.Load() {
		t.Fatal("day two was not asked for while day one was loading")
	}
	e.checkStored()
	days := map[string]int{}
	for _, r := range e.srv.Requests() {
		if strings.HasSuffix(r.Start, "T00") && strings.HasSuffix(r.End, "T23") {
			days[r.Start]++
		}
	}
	for _, d := range []string{"20240301T00", "20240302T00", "20240303T00", "20240304T00"} {
		if days[d] != 1 {
			t.Fatalf("day %s asked for %d times; requests per day: %v", d, days[d], days)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(e.dir, "amplitude-export-*")); len(left) > 0 {
		t.Fatalf("downloads left behind: %v", left)
	}
}

// stopAfter lets n writes through, then blocks the next one until its
// context ends, after asking the service to shut down: a restart in the
// middle of a range, at a known point.
type stopAfter struct {
	store.Store
	n    atomic.Int32
	stop func()
	// profiles counts only writes of profile updates: events pass.
	profiles bool
}

func (s *stopAfter) Write(ctx context.Context, b []store.Batch) (store.WriteResult, error) {
	if s.profiles && !slices.ContainsFunc(b, func(b store.Batch) bool { return len(b.Profiles) > 0 }) {
		return s.Store.Write(ctx, b)
	}
	if s.n.Add(-1) < 0 {
		go s.stop()
		<-ctx.Done()
		return store.WriteResult{}, ctx.Err()
	}
	return s.Store.Write(ctx, b)
}

// postStopped posts body to a service whose store lets n writes through
// (only profile writes count when profiles is set) and then stops the
// service, as a restart in the middle of the job would; it returns the
// job's id once the job has stopped.
func (e *env) postStopped(body map[string]any, n int32, profiles bool) string {
	e.t.Helper()
	e.wrap = func(st store.Store) store.Store {
		w := &stopAfter{Store: st, profiles: profiles, stop: func() { e.svc.Close() }}
		w.n.Store(n)
		return w
	}
	e.restart()
	code, resp := e.do("POST", "/amplitude", body)
	if code != 202 {
		e.t.Fatalf("POST: %d %v", code, resp)
	}
	e.wrap = nil // the next open is a plain restart
	return resp["job_id"].(string)
}

// A job stopped while it writes the profiles (state loading: every hour
// done) resumes after a restart with the profiles alone: nothing is
// exported again, and every user gets its profile once.
func TestMigrationResumesLoading(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CredentialKey = make([]byte, KeySize) })
	id := e.postStopped(request(), 0, true)
	if st := e.wait(id); st.State != Loading || st.HoursDone != 96 || st.ProfilesUpdated != 0 {
		t.Fatalf("after the stop: %+v", st)
	}
	if got := e.profiles(); len(got) != 0 {
		t.Fatalf("%d profiles written before the stop", len(got))
	}
	fetched := len(e.srv.Requests())
	e.restart() // Resume picks the job up by itself
	st := e.wait(id)
	if st.State != Succeeded || st.EventsImported != int64(e.fx.valid) || st.ProfilesUpdated != fixtureUsers {
		t.Fatalf("resumed job: %+v", st)
	}
	if n := len(e.srv.Requests()); n != fetched {
		t.Fatalf("the resumed load asked Amplitude %d more times", n-fetched)
	}
	e.checkStored()
}

// A request whose dates are relative to now (none: the last 30 days;
// START_DATE alone: up to now) resolves to other hours an hour later. The
// same request posted again after a restart still finds the interrupted
// job and resumes it over its own hours, rather than starting a second
// job that exports everything again and leaves the first one waiting.
func TestMigrationResumeRelativeRange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  func() map[string]any
		hours int
	}{
		{"no dates", func() map[string]any {
			b := request()
			delete(b, "START_DATE")
			delete(b, "END_DATE")
			return b
		}, 30 * 24},
		{"start only", func() map[string]any {
			b := request()
			delete(b, "END_DATE")
			return b
		}, 9 * 24}, // 2024-03-01 up to the last hour before testNow (03-10)
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			id := e.postStopped(tc.body(), 20, false)
			if st := e.wait(id); st.State != Exporting || st.HoursTotal != tc.hours {
				t.Fatalf("after the stop: %+v", st)
			}
			e.later = 2 * time.Hour // the range the body names has moved on
			e.noResume = true       // as the CLI runs it
			e.restart()
			code, body := e.do("POST", "/amplitude", tc.body())
			if code != 202 || body["job_id"] != id {
				t.Fatalf("re-POST: %d %v (want job %s)", code, body, id)
			}
			st := e.wait(id)
			if st.State != Succeeded || st.HoursTotal != tc.hours || st.HoursDone != tc.hours ||
				st.EventsImported != int64(e.fx.valid) || st.ProfilesUpdated != fixtureUsers {
				t.Fatalf("resumed: %+v", st)
			}
			e.checkStored()
			// A finished job is not resumed: the same body now starts a new
			// one over the hours it names today.
			code, body = e.do("POST", "/amplitude", tc.body())
			if code != 202 || body["job_id"] == id {
				t.Fatalf("POST after success: %d %v", code, body)
			}
			if st := e.wait(body["job_id"].(string)); st.State != Succeeded || st.EventsDuplicate != int64(e.fx.valid) {
				t.Fatalf("second job: %+v", st)
			}
			e.checkStored()
		})
	}
}

// A job stopped mid-range resumes after a restart at the first hour not
// done, with credentials sealed in its file: the project ends with exactly
// one copy of every event and the profiles of every user, though the
// interrupted range was written twice and its profiles were gathered by
// two processes.
func TestMigrationResumesAfterRestart(t *testing.T) {
	key := make([]byte, KeySize)
	e := newEnv(t, func(c *Config) { c.CredentialKey = key })
	id := e.postStopped(request(), 15, false) // ~400 events a day in batches of 50: mid second day
	mid := e.wait(id)
	if mid.State != Exporting || mid.HoursDone != 24 {
		t.Fatalf("after the stop: %+v", mid)
	}
	raw, _ := os.ReadFile(filepath.Join(e.dir, "migrations", id+".json"))
	if strings.Contains(string(raw), testSecret) || !strings.Contains(string(raw), "sealed_credentials") {
		t.Fatalf("job file:\n%s", raw)
	}
	written := len(e.stored())
	if written <= 0 || written >= e.fx.valid {
		t.Fatalf("%d events written before the stop", written)
	}

	e.close()
	// The range fetched ahead when the job stopped was discarded with
	// its download.
	if left, _ := filepath.Glob(filepath.Join(e.dir, "amplitude-export-*")); len(left) > 0 {
		t.Fatalf("downloads left behind: %v", left)
	}
	e.open() // Resume picks the job up by itself
	st := e.wait(id)
	if st.State != Succeeded || st.HoursDone != 96 || st.EventsExported != int64(len(e.fx.events)) ||
		st.EventsImported != int64(e.fx.valid) || st.EventsFailed != int64(e.fx.invalid) || st.EventsDuplicate == 0 ||
		st.ProfilesUpdated != fixtureUsers {
		t.Fatalf("resumed job: %+v", st)
	}
	e.checkStored()
	// The resumed job fetched the first day once only.
	first := 0
	for _, r := range e.srv.Requests() {
		if r.Start == "20240301T00" && r.End == "20240301T23" {
			first++
		}
	}
	if first != 1 {
		t.Fatalf("day one fetched %d times", first)
	}
}

// Without a credential key, an interrupted job waits after a restart
// until the same request is posted again, and then resumes under the same
// id, also in a process that never called Resume.
func TestMigrationResumeNeedsCredentials(t *testing.T) {
	e := newEnv(t, nil)
	id := e.postStopped(request(), 20, false)
	e.wait(id)
	e.restart()
	st := e.wait(id)
	if st.State != Exporting || !st.NeedsCredentials {
		t.Fatalf("after restart: %+v", st)
	}
	raw, _ := os.ReadFile(filepath.Join(e.dir, "migrations", id+".json"))
	if strings.Contains(string(raw), testSecret) || strings.Contains(string(raw), "sealed_credentials") {
		t.Fatalf("job file:\n%s", raw)
	}
	// A process that did not Resume (the CLI) finds the job on a POST too.
	e.noResume = true
	e.restart()
	// Another Amplitude key is another migration; the same key resumes.
	other := request()
	other["SOURCE_API_KEY"] = "another-key"
	if code, body := e.do("POST", "/amplitude", other); code != 401 {
		t.Fatalf("wrong key: %d %v", code, body)
	}
	code, body := e.do("POST", "/amplitude", request())
	if code != 202 || body["job_id"] != id {
		t.Fatalf("re-POST: %d %v (want job %s)", code, body, id)
	}
	if st := e.wait(id); st.State != Succeeded || st.EventsImported != int64(e.fx.valid) || st.NeedsCredentials {
		t.Fatalf("resumed: %+v", st)
	}
	e.checkStored()
}

// The spill is exercised at its limits: tiny memory forces a run per few
// users and several levels of merges; the result is the same profiles.
func TestProfileSpillMerges(t *testing.T) {
	dir := t.TempDir()
	p := newProfileSpill(dir, 1) // spill on every new user
	var st profileState
	want := map[string]int64{}
	for i := range 500 {
		user := fmt.Sprintf("u%03d", i%37)
		ms := int64((i * 7919) % 1000)
		if err := p.observe(&st, []byte(user), ms, fmt.Sprint(i), []byte(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		if ms >= want[user] {
			want[user] = ms
		}
		if i%50 == 49 {
			obsolete, err := p.commit(&st)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range obsolete {
				os.Remove(f)
			}
		}
	}
	if maxLevel(st.Runs) < 2 {
		t.Fatalf("runs %+v: expected merges into level 2", st.Runs)
	}
	got := map[string]int64{}
	err := mergeRuns(dir, st.Runs, func(user []byte, ms int64, _, _ []byte) error {
		if _, dup := got[string(user)]; dup {
			t.Fatalf("user %s emitted twice", user)
		}
		got[string(user)] = ms
		return nil
	})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("merged %v (err %v); want %v", got, err, want)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(st.Runs) {
		t.Fatalf("%d files for %d runs", len(ents), len(st.Runs))
	}
}
