package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// pageServer serves the test page and the SDK's ES module bundle from
// node_modules on its own origin (localhost, another port than the
// server's 127.0.0.1), so every SDK request is cross-origin.
func pageServer(t *testing.T) *httptest.Server {
	t.Helper()
	sdk, err := os.ReadFile(filepath.Join(clientsDir, "node_modules", "mixpanel-browser", "dist", "mixpanel.module.js"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><meta charset="utf-8"><title>compat</title></head><body>
<a id="out" href="/next.html">next</a>
<script type="module">import mixpanel from "/mixpanel.module.js"; window.mixpanel = mixpanel; window.sdkLoaded = true;</script>
</body></html>`)
	})
	mux.HandleFunc("GET /next.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>next</title><p>next</p>`)
	})
	mux.HandleFunc("GET /mixpanel.module.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write(sdk)
	})
	ps := httptest.NewServer(mux)
	t.Cleanup(ps.Close)
	return ps
}

// TestClientsBrowserSDK drives mixpanel-browser 2.83.0 in headless
// Chromium (one launch, a fresh context per scenario) against a server on
// another origin: batched and unbatched, base64 and JSON payloads, a
// Simplified and an Original ID merge project, sendBeacon and track_links,
// and the batch flush on unload. Every callback must report success, every
// response must be readable by the page (CORS), and every event and
// profile is read back.
func TestClientsBrowserSDK(t *testing.T) {
	t.Parallel()
	needNode(t, "mixpanel-browser", "playwright-core")
	_, err := os.Stat(chromiumPath)
	needTool(t, err == nil, chromiumPath+" (Debian package chromium)")
	s := startServer(t, defaultConfig())
	ps := pageServer(t)
	pageURL := strings.Replace(ps.URL, "127.0.0.1", "localhost", 1) + "/page.html"
	run := fmt.Sprint(time.Now().UnixNano() % 1e9)
	out := runNode(t, 3*time.Minute, "browser.mjs", map[string]string{
		"CHROMIUM": chromiumPath, "PAGE_URL": pageURL, "TRIBUTARY_URL": s.URL,
		"TOKEN_SIMPLIFIED": mainToken, "TOKEN_ORIGINAL": otherToken, "RUN_ID": run,
	})
	res := callResults(t, out)
	var anons map[string]string
	if err := json.Unmarshal([]byte(res["#anon"]), &anons); err != nil {
		t.Fatalf("anonymous ids: %v", err)
	}
	var exports map[int64][]exported
	readExports := func() {
		exports = map[int64][]exported{
			mainID:  s.export(t, asOwner, mainID, nil),
			otherID: s.export(t, basicAuth(otherSecret, ""), 0, nil),
		}
	}
	secrets := map[int64]string{mainID: mainSecret, otherID: otherSecret}
	scenarioEvents := func(project int64, scenario, name string) []exported {
		var out []exported
		for _, e := range exports[project] {
			if e.Event == name && e.Properties["scenario"] == scenario {
				out = append(out, e)
			}
		}
		return out
	}
	// No page waits for the answer to a beacon, so the last ones may still
	// be on their way when the script ends: read the export again until
	// they are stored, or the deadline has passed (the subtests then say
	// what is missing).
	beaconed := [][2]string{{"beacon", "beacon event"}, {"beacon", "link clicked"}, {"beacon", "$identify"}, {"unload", "unload event"}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		readExports()
		missing := slices.ContainsFunc(beaconed, func(b [2]string) bool { return len(scenarioEvents(mainID, b[0], b[1])) == 0 })
		if !missing || time.Now().After(deadline) {
			break
		}
	}
	profile := func(t *testing.T, project int64, q url.Values, id string) map[string]any {
		t.Helper()
		q.Set("project_id", fmt.Sprint(project))
		return engageProfiles(t, s, secrets[project], q)[id]
	}

	type scenario struct {
		name     string
		project  int64
		calls    []string
		people   bool
		alias    bool
		register bool
	}
	people := []string{"people.set", "people.set_once", "people.increment", "people.append", "people.union", "people.unset",
		"set_group", "get_group().set"}
	for _, sc := range []scenario{
		{"simplified-batch-base64", mainID, append([]string{"track anon", "track user"}, people...), true, false, true},
		{"original-nobatch-json", otherID, append([]string{"track anon", "track user"}, people...), true, true, true},
		{"original-batch-json", otherID, []string{"track anon", "track user"}, false, false, false},
		{"simplified-nobatch-base64", mainID, []string{"track anon", "track user", "people.set", "people.set_once",
			"people.increment", "people.append", "people.union", "people.unset"}, false, false, false},
	} {
		user := sc.name + "-user-" + run
		t.Run(sc.name+"/callbacks", func(t *testing.T) {
			for _, c := range sc.calls {
				wantCallsOK(t, res, sc.name+":"+c)
			}
		})
		t.Run(sc.name+"/requests", func(t *testing.T) { // every response readable by the page: CORS and status
			wantCallsOK(t, res, sc.name+":requests")
		})
		t.Run(sc.name+"/track", func(t *testing.T) {
			// identify sends one $identify; alias sends another (its
			// callback identifies the alias), which resolves to the user too.
			for name, n := range map[string]int{"user event": 1, "$identify": 1 + btoi(sc.alias)} {
				got := scenarioEvents(sc.project, sc.name, name)
				if len(got) != n {
					t.Errorf("%q: %d stored %v, want %d", name, len(got), got, n)
				}
				for _, e := range got {
					if e.Properties["distinct_id"] != user {
						t.Errorf("%q stored with distinct_id %v, want %s", name, e.Properties["distinct_id"], user)
					}
				}
			}
			if u := scenarioEvents(sc.project, sc.name, "user event"); sc.register && len(u) == 1 && u[0].Properties["plan"] != "pro" {
				t.Errorf("register: user event properties %v, want plan=pro", u[0].Properties)
			}
		})
		t.Run(sc.name+"/identify", func(t *testing.T) { // the anonymous event belongs to the user once identified
			got := scenarioEvents(sc.project, sc.name, "anon event")
			if len(got) != 1 {
				t.Fatalf("anon event: %d stored, want 1", len(got))
			}
			p := got[0].Properties
			if p["distinct_id"] != user {
				t.Errorf("anon event (sent as %s) exported with distinct_id %v, want %s", anons[sc.name], p["distinct_id"], user)
			}
			if id := profile(t, sc.project, url.Values{"distinct_id": {anons[sc.name]}}, user); sc.people && id == nil {
				t.Errorf("profile read by the anonymous id %s is not %s's", anons[sc.name], user)
			}
		})
		if sc.alias {
			t.Run(sc.name+"/alias", func(t *testing.T) {
				alias := sc.name + "-alias-" + run
				if got := scenarioEvents(sc.project, sc.name, "$create_alias"); len(got) != 1 {
					t.Errorf("$create_alias: %d stored %v", len(got), got)
				}
				if p := profile(t, sc.project, url.Values{"distinct_id": {alias}}, user); p == nil || p["name"] != "Ada" {
					t.Errorf("profile read by the alias %s: %v, want %s's", alias, p, user)
				}
			})
		}
		if sc.people {
			t.Run(sc.name+"/people", func(t *testing.T) {
				p := profile(t, sc.project, url.Values{}, user)
				want := map[string]any{"name": "Ada", "first_seen": "2024-01-01", "logins": jsonNum(2),
					"events": []any{"signup"}, "tags": []any{"a", "b"}, "company": []any{sc.name + "-acme-" + run}}
				for k, v := range want {
					if fmt.Sprint(p[k]) != fmt.Sprint(v) {
						t.Errorf("profile %s: %s = %v, want %v (profile %v)", user, k, p[k], v, p)
					}
				}
				if _, ok := p["tmp"]; ok {
					t.Errorf("profile %s: unset tmp is still there", user)
				}
				if p["$browser"] != "Chrome" && p["$browser"] != "Chromium" {
					t.Errorf("profile %s: $browser %v, want the SDK's Chrome", user, p["$browser"])
				}
			})
			t.Run(sc.name+"/group", func(t *testing.T) {
				gid := sc.name + "-acme-" + run
				g := profile(t, sc.project, url.Values{"data_group_id": {"company"}}, gid)
				if g["tier"] != "gold" {
					t.Errorf("group company/%s: %v, want tier gold", gid, g)
				}
				if u := scenarioEvents(sc.project, sc.name, "user event"); len(u) == 1 && fmt.Sprint(u[0].Properties["company"]) != fmt.Sprint([]any{gid}) {
					t.Errorf("set_group: user event company = %v, want [%s]", u[0].Properties["company"], gid)
				}
			})
		}
	}
	t.Run("sendBeacon/callbacks", func(t *testing.T) {
		wantCallsOK(t, res, "beacon:track sendBeacon", "beacon:track_links navigated", "beacon:transport")
	})
	t.Run("sendBeacon/stored", func(t *testing.T) {
		for _, name := range []string{"beacon event", "link clicked", "$identify"} {
			if got := scenarioEvents(mainID, "beacon", name); len(got) != 1 || got[0].Properties["distinct_id"] != "beacon-user-"+run {
				t.Errorf("%q sent by beacon: stored %v, want one for beacon-user-%s", name, got, run)
			}
		}
	})
	t.Run("unload/beacon", func(t *testing.T) {
		wantCallsOK(t, res, "unload:queued at unload")
		if got := scenarioEvents(mainID, "unload", "unload event"); len(got) != 1 {
			t.Errorf("event flushed by beacon on unload: stored %d, want 1", len(got))
		}
	})
	if t.Failed() {
		t.Logf("script results: %s", out)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
