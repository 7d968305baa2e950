package amplitude

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/migrate/amplitude/amptest"
)

// The fixture: three days of Amplitude history, 2024-03-01 to 03, and an
// empty fourth day. Users user-0…user-16 and anonymous devices; a few
// events no /import accepts; for users 0–4 a late upload of a stale event
// (old event_time, last hour), for user-5 an early upload of its newest
// event, so "latest" must follow event_time, not upload order.
const (
	fixtureEvents = 1200
	fixtureUsers  = 17
)

var testNow = time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC)

type fixture struct {
	events  []map[string]any
	valid   int
	invalid int
	// latest is each user's newest valid event's user properties and time.
	latest map[string]wantProfile
}

type wantProfile struct {
	ms    int64
	props map[string]any
}

func makeFixture() *fixture {
	f := &fixture{latest: map[string]wantProfile{}}
	base := hour(1, 0)
	add := func(ev map[string]any, user string, et time.Time, ok bool) {
		f.events = append(f.events, ev)
		if !ok {
			f.invalid++
			return
		}
		f.valid++
		if user == "" {
			return
		}
		if w, seen := f.latest[user]; !seen || et.UnixMilli() > w.ms {
			f.latest[user] = wantProfile{ms: et.UnixMilli(), props: ev["user_properties"].(map[string]any)}
		}
	}
	for i := range fixtureEvents {
		h := i % 72
		et := base.Add(time.Duration(h)*time.Hour + time.Duration(i)*time.Second + time.Duration(i)*time.Microsecond)
		u := i % fixtureUsers
		ev := map[string]any{
			"event_type": fmt.Sprintf("Event %d", i%5), "uuid": fmt.Sprintf("uuid-%d", i), "amplitude_id": 1000 + u,
			"event_time":         et.Format("2006-01-02 15:04:05.000000"),
			"server_upload_time": et.Add(2 * time.Second).Format("2006-01-02 15:04:05.000000"),
			"device_id":          fmt.Sprintf("dev-%d", i%13), "city": "Berlin", "os_name": "android",
			"event_properties": map[string]any{"i": i, "kind": fmt.Sprintf("k%d", i%3)},
			"user_properties":  map[string]any{"plan": fmt.Sprintf("p%d", i), "n": i, "user": u},
		}
		user := fmt.Sprintf("user-%d", u)
		if i%9 == 0 {
			user = "" // anonymous: device only
		} else {
			ev["user_id"] = user
		}
		ok := true
		switch {
		case i%97 == 50:
			delete(ev, "event_type")
			ok = false
		case i%89 == 3:
			ev["event_time"] = "yesterday"
			ok = false
		case i == 77:
			ev["event_properties"] = map[string]any{"deep": map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": 1}}}}}
			ok = false
		}
		add(ev, user, et, ok)
	}
	for u := range 6 {
		user := fmt.Sprintf("user-%d", u)
		et, up := time.Date(2024, 2, 28, 12, 0, 0, 0, time.UTC), hour(3, 23).Add(30*time.Minute)
		plan := "stale"
		if u == 5 {
			et, up, plan = time.Date(2024, 3, 5, 12, 0, 0, 0, time.UTC), hour(1, 0).Add(time.Minute), "newest"
		}
		add(map[string]any{
			"event_type": "Twist", "user_id": user, "uuid": "twist-" + user, "amplitude_id": 1000 + u,
			"event_time": et.Format("2006-01-02 15:04:05.000000"), "server_upload_time": up.Format("2006-01-02 15:04:05.000000"),
			"user_properties": map[string]any{"plan": plan},
		}, user, et, true)
	}
	return f
}

// env is a migration service over the real embedded store and the fake
// Export API, reopenable to simulate a restart.
type env struct {
	t    *testing.T
	dir  string
	fx   *fixture
	srv  *amptest.Server
	cfg  *config.Config
	tune func(*Config)
	wrap func(store.Store) store.Store
	// noResume opens the service as the CLI does: without Resume.
	noResume bool
	st       *duckstore.Store
	svc      *Service
	http     *httptest.Server
	logs     *bytes.Buffer
	began    time.Time
	// later moves the service's clock ahead (read at every call).
	later time.Duration
	// statusUser is the Basic-auth user of GETs: "" the job's project
	// token, "-" no credentials.
	statusUser string
}

func newEnv(t *testing.T, tune func(*Config)) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), fx: makeFixture(), tune: tune, logs: &bytes.Buffer{}, began: time.Now()}
	e.srv = amptest.New(testKey, testSecret)
	t.Cleanup(e.srv.Close)
	e.srv.PartitionSize = 40
	for _, ev := range e.fx.events {
		if err := e.srv.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	e.cfg = &config.Config{Region: config.RegionUS, Projects: []config.Project{
		{ID: 1, Token: "tok-simplified", Region: config.RegionUS, IDManagement: config.IDSimplified},
		{ID: 2, Token: "tok-original", Region: config.RegionUS, IDManagement: config.IDOriginal},
		{ID: 3, Token: "tok-eu", Region: config.RegionEU, IDManagement: config.IDSimplified},
	}}
	e.open()
	t.Cleanup(e.close)
	return e
}

// open starts store, job store and service on the env's directory.
func (e *env) open() {
	e.t.Helper()
	ctx := context.Background()
	st, err := duckstore.Open(ctx, filepath.Join(e.dir, "tributary.duckdb"), duckstore.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
	jobs, err := NewFileJobStore(filepath.Join(e.dir, "migrations"))
	if err != nil {
		e.t.Fatal(err)
	}
	var s store.Store = st
	if e.wrap != nil {
		s = e.wrap(st)
	}
	cfg := Config{
		Store: s, Jobs: jobs, Projects: auth.New(e.cfg, time.Now), Region: e.cfg.Region,
		Now:     func() time.Time { return testNow.Add(e.later + time.Since(e.began)) },
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		BaseURL: e.srv.URL, EUBaseURL: e.srv.URL, TempDir: e.dir, Backoff: quickBackoff,
		BatchSize: 50, ProfileMemory: 2 << 10, EstimateSamples: 6,
	}
	if e.tune != nil {
		e.tune(&cfg)
	}
	if e.svc, err = New(cfg); err != nil {
		e.t.Fatal(err)
	}
	if !e.noResume {
		if err := e.svc.Resume(ctx); err != nil {
			e.t.Fatal(err)
		}
	}
	e.http = httptest.NewServer(e.svc.Handler())
}

func (e *env) close() {
	if e.svc == nil {
		return
	}
	e.http.Close()
	e.svc.Close()
	if err := e.st.Close(); err != nil {
		e.t.Error(err)
	}
	e.svc = nil
}

func (e *env) restart() {
	e.close()
	e.open()
}

// request is a valid body for project 1 over the fixture's days and an
// empty fourth day.
func request() map[string]any {
	return map[string]any{
		"SOURCE_API_KEY": testKey, "SOURCE_API_SECRET": testSecret, "TARGET_TOKEN": "tok-simplified",
		"START_DATE": "2024-03-01", "END_DATE": "2024-03-04",
	}
}

func (e *env) do(method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.http.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if method == "GET" && e.statusUser != "-" {
		user := e.statusUser
		if user == "" {
			user = "tok-simplified" // the job's project token
		}
		req.SetBasicAuth(user, "")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("%s %s: %d %s: not JSON", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// run posts req, waits for the job and returns its final status.
func (e *env) run(req map[string]any) Status {
	e.t.Helper()
	code, body := e.do("POST", "/amplitude", req)
	if code != http.StatusAccepted {
		e.t.Fatalf("POST: %d %v", code, body)
	}
	return e.wait(body["job_id"].(string))
}

func (e *env) wait(id string) Status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.svc.Wait(ctx, id); err != nil {
		e.t.Fatal(err)
	}
	code, body := e.do("GET", "/amplitude/"+id, nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET: %d %v", code, body)
	}
	raw, _ := json.Marshal(body)
	var st Status
	if err := json.Unmarshal(raw, &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// stored returns every stored event of project 1.
func (e *env) stored() []store.Event {
	e.t.Helper()
	var evs []store.Event
	err := e.st.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 62}, func(ev *store.Event) error {
		c := *ev
		c.Props = bytes.Clone(ev.Props)
		evs = append(evs, c)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// profiles returns project 1's user profiles as decoded JSON.
func (e *env) profiles() map[string]map[string]any {
	e.t.Helper()
	out := map[string]map[string]any{}
	err := e.st.ScanProfiles(context.Background(), store.ProfileScan{Project: 1, Kind: profile.User}, func(p *store.StoredProfile) error {
		var m map[string]any
		if err := json.Unmarshal(p.Props, &m); err != nil {
			return err
		}
		out[p.ID] = m
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}
