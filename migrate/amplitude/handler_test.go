package amplitude

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/config"
)

func with(kv ...any) map[string]any {
	r := request()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(r, kv[i].(string))
			continue
		}
		r[kv[i].(string)] = kv[i+1]
	}
	return r
}

// Every refusal of POST /amplitude, with its status and a message that
// says what to fix. Nothing is stored and no job is created.
func TestRefusals(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"not JSON", "SOURCE_API_KEY=x", 400, "must be a JSON object"},
		{"two objects", `{"TARGET_TOKEN":"a"} {}`, 400, "one JSON object"},
		{"no fields", map[string]any{}, 400, "SOURCE_API_KEY (or AMPLITUDE_API_KEY), SOURCE_API_SECRET (or AMPLITUDE_API_SECRET), TARGET_TOKEN (or MIXPANEL_TOKEN)"},
		{"empty secret", with("SOURCE_API_SECRET", ""), 400, "SOURCE_API_SECRET"},
		{"blank token", with("TARGET_TOKEN", "  "), 400, "TARGET_TOKEN"},
		{"token not a string", with("TARGET_TOKEN", 42), 400, "TARGET_TOKEN must be a string"},
		{"unknown field", with("START", "2024-03-01"), 400, `unknown field "START"`},
		{"alias conflict", with("MIXPANEL_TOKEN", "tok-other"), 400, "both given"},
		{"bad DRY_RUN", with("DRY_RUN", "maybe"), 400, "DRY_RUN must be true or false"},
		{"malformed start", with("START_DATE", "2024/03/01"), 400, "START_DATE must be a date as YYYY-MM-DD"},
		{"malformed end", with("END_DATE", "2024-3-4"), 400, "END_DATE must be a date"},
		{"end before start", with("START_DATE", "2024-03-04", "END_DATE", "2024-03-01"), 400, "is before START_DATE"},
		{"over 365 days", with("START_DATE", "2023-03-01", "END_DATE", "2024-03-01"), 400, "the range is 367 days"},
		{"future start", with("START_DATE", "2024-04-01", "END_DATE", nil), 400, "START_DATE 2024-04-01 is in the future"},
		{"bad region", with("REGION", "APAC"), 400, "REGION must be EU"},
		{"unknown token", with("TARGET_TOKEN", "tok-nobody"), 401, "not the token of any project"},
		{"original id merge", with("TARGET_TOKEN", "tok-original"), 400, "Simplified ID Merge"},
		{"project in another region", with("TARGET_TOKEN", "tok-eu", "REGION", "EU"), 403, "EU data residency"},
		{"REGION EU, US project", with("REGION", "EU"), 400, "REGION is EU but project 1"},
		{"bad Amplitude credentials", with("SOURCE_API_SECRET", "nope"), 401, "Amplitude refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := e.do("POST", "/amplitude", c.body)
			msg, _ := body["error"].(string)
			if code != c.status || !strings.Contains(msg, c.msg) || body["code"] != float64(c.status) || body["status"] != http.StatusText(c.status) {
				t.Fatalf("got %d %v; want %d with %q", code, body, c.status, c.msg)
			}
			if strings.Contains(msg, testSecret) || strings.Contains(msg, testKey) {
				t.Fatalf("credentials in the answer: %s", msg)
			}
		})
	}
	if code, body := e.do("PUT", "/amplitude", request()); code != 405 {
		t.Fatalf("PUT: %d %v", code, body)
	}
	for _, id := range []string{"0123456789abcdef01234567", "..%2F..%2Fetc"} {
		if code, body := e.do("GET", "/amplitude/"+id, nil); code != 404 || !strings.Contains(body["error"].(string), "no migration job") {
			t.Fatalf("GET %s: %d %v", id, code, body)
		}
	}
	e.statusUser = "-"
	if code, body := e.do("GET", "/amplitude/0123456789abcdef01234567", nil); code != 401 {
		t.Fatalf("GET without credentials: %d %v", code, body)
	}
	e.statusUser = ""
	if n := len(e.stored()); n != 0 {
		t.Fatalf("refused requests stored %d events", n)
	}
	if strings.Contains(e.logs.String(), testSecret) {
		t.Fatal("credentials in the log")
	}
}

// At 15 million events (here lowered to 500; the fixture has 1,206) a
// request is refused: the job by the sampled estimate, the dry run by its
// count.
func TestRefusedTooLarge(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxEvents = 500 })
	code, body := e.do("POST", "/amplitude", request())
	if code != 413 || !strings.Contains(body["error"].(string), "estimated from 6 sampled hours") {
		t.Fatalf("job: %d %v", code, body)
	}
	code, body = e.do("POST", "/amplitude", with("DRY_RUN", true))
	if code != 413 || !strings.Contains(body["error"].(string), "500 events or more") {
		t.Fatalf("dry run: %d %v", code, body)
	}
}

// A dry run counts what would be migrated, stores nothing, and takes the
// public doc's field names.
func TestDryRunAndAliases(t *testing.T) {
	e := newEnv(t, nil)
	req := map[string]any{
		"AMPLITUDE_API_KEY": testKey, "AMPLITUDE_API_SECRET": testSecret, "MIXPANEL_TOKEN": "tok-simplified",
		"START_DATE": "2024-03-01", "END_DATE": "2024-03-04", "DRY_RUN": true,
	}
	code, body := e.do("POST", "/amplitude", req)
	if code != 200 || body["dry_run"] != true || body["events"] != float64(e.fx.valid) ||
		body["distinct_users"] != float64(fixtureUsers) || body["events_failed"] != float64(e.fx.invalid) ||
		body["events_exported"] != float64(len(e.fx.events)) || body["hours_done"] != float64(96) {
		t.Fatalf("dry run: %d %v", code, body)
	}
	if n := len(e.stored()); n != 0 || len(e.profiles()) != 0 {
		t.Fatalf("a dry run stored %d events", n)
	}
	// Both spellings with equal values are fine; the real run then finds
	// the same counts.
	both := maps.Clone(req)
	both["SOURCE_API_KEY"], both["DRY_RUN"] = testKey, false
	st := e.run(both)
	if st.EventsImported != int64(e.fx.valid) || st.ProfilesUpdated != fixtureUsers {
		t.Fatalf("run: %+v", st)
	}
}

// REGION EU goes to Amplitude's EU host for an EU project on an EU
// server; the US host is not asked.
func TestRegionEU(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Region = config.RegionEU
		c.BaseURL = "http://127.0.0.1:1" // nothing listens: the US host must not be used
	})
	code, body := e.do("POST", "/amplitude", with("TARGET_TOKEN", "tok-eu", "REGION", "eu", "DRY_RUN", true))
	if code != 200 || body["events"] != float64(e.fx.valid) || body["region"] != "EU" {
		t.Fatalf("EU dry run: %d %v", code, body)
	}
	code, body = e.do("POST", "/amplitude", with("TARGET_TOKEN", "tok-eu", "DRY_RUN", true))
	if code != 400 || !strings.Contains(body["error"].(string), `pass "REGION": "EU"`) {
		t.Fatalf("EU project without REGION: %d %v", code, body)
	}
}

// The sampled estimate can miss events (here 1,067 estimated for 1,206
// exported); the job itself then stops when its exported events reach the
// limit, keeping what it imported.
func TestJobStopsAtTheLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxEvents = 1100 })
	st := e.run(request())
	if st.State != Failed || !strings.Contains(st.Error, "1100 events or more") || st.HoursDone >= 72 {
		t.Fatalf("job: %+v", st)
	}
	if n := len(e.stored()); n == 0 || n >= e.fx.valid {
		t.Fatalf("%d events stored", n)
	}
}

// A job's status is for its own project only: no credentials → 401, a
// bad one → 401, another project's → 404 (as an unknown id), its own
// token or API secret → 200.
func TestStatusNeedsTheJobsProject(t *testing.T) {
	e := newEnv(t, nil)
	id := e.run(request()).ID
	for _, c := range []struct {
		user string
		want int
	}{{"-", 401}, {"wrong-token", 401}, {"tok-original", 404}, {"tok-simplified", 200}} {
		e.statusUser = c.user
		if code, body := e.do("GET", "/amplitude/"+id, nil); code != c.want {
			t.Errorf("GET as %q: %d %v, want %d", c.user, code, body, c.want)
		}
	}
}
