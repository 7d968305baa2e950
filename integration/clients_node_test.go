package integration

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestClientsNodeSDK: the official Node SDK (`mixpanel` 0.24.0) refuses to
// send an API secret or service-account credential over plain HTTP, so it
// runs against a server with tls_cert_file/tls_key_file, trusting only the
// test CA (NODE_EXTRA_CA_CERTS), with one client on the API secret and one
// on a service account. Every call must report success, and every result
// is read back through export and the engage query API.
func TestClientsNodeSDK(t *testing.T) {
	t.Parallel()
	needNode(t, "mixpanel")
	s, ca := startTLSServer(t, defaultConfig())
	start := time.Now()
	out := runNode(t, 2*time.Minute, "node-sdk.js", map[string]string{
		"TRIBUTARY_URL": s.URL, "NODE_EXTRA_CA_CERTS": ca.CAFile,
		"TRIBUTARY_TOKEN": mainToken, "TRIBUTARY_SECRET": mainSecret, "TRIBUTARY_PROJECT_ID": fmt.Sprint(mainID),
		"TRIBUTARY_SA_USER": ownerSA, "TRIBUTARY_SA_SECRET": ownerSecret,
	})
	res := callResults(t, out)
	evs := s.export(t, asOwner, mainID, nil)
	users := engageProfiles(t, s, mainSecret, url.Values{"project_id": {"1"}})
	groups := engageProfiles(t, s, mainSecret, url.Values{"project_id": {"1"}, "data_group_id": {"company"}})

	for _, mode := range []string{"secret", "sa"} {
		u := "node-" + mode
		ok := func(t *testing.T, calls ...string) {
			t.Helper()
			for i := range calls {
				calls[i] = mode + ":" + calls[i]
			}
			wantCallsOK(t, res, calls...)
		}
		named := func(name string) []exported {
			var out []exported
			for _, e := range evs {
				if e.Event == name {
					out = append(out, e)
				}
			}
			return out
		}
		t.Run(mode+"/track", func(t *testing.T) {
			ok(t, "track")
			got := named(u + " track")
			if len(got) != 1 {
				t.Fatalf("export has %d %q events, want 1", len(got), u+" track")
			}
			p := got[0].Properties
			tm := num(t, p["time"])
			if p["distinct_id"] != u+"-user" || p["plan"] != "pro" || p["n"] != jsonNum(1) || p["mp_lib"] != "node" ||
				tm < start.Unix()-1 || tm > time.Now().Unix() {
				t.Errorf("stored track event %v", p)
			}
		})
		t.Run(mode+"/import", func(t *testing.T) { // GET /import?data=
			ok(t, "import")
			got := named(u + " import")
			if len(got) != 1 || got[0].InsertID() != u+"-imp-1" || got[0].Properties["n"] != jsonNum(2) {
				t.Fatalf("export: %d %q events %v, want 1 with $insert_id %s", len(got), u+" import", got, u+"-imp-1")
			}
			if tm := num(t, got[0].Properties["time"]); tm > time.Now().Add(-59*time.Minute).Unix() {
				t.Errorf("import time %d is not the hour-old time sent", tm)
			}
		})
		t.Run(mode+"/import_batch", func(t *testing.T) { // POST /import, form data= of ≤ 50
			ok(t, "import_batch")
			got := named(u + " batch")
			var want []string
			for i := range 120 {
				want = append(want, fmt.Sprintf("%s-b-%d", u, i))
			}
			if ids := exportedIDs(got); !sameStrings(ids, sortedCopy(want)) {
				t.Fatalf("export has %d batch events, want the 120 sent", len(ids))
			}
		})
		t.Run(mode+"/people", func(t *testing.T) {
			ok(t, "people.set", "people.set_once", "people.increment", "people.increment#2", "people.append",
				"people.union", "people.union#2", "people.remove", "people.unset", "people.track_charge",
				"people.track_charge#bob", "people.clear_charges", "people.set#cid", "people.delete_user")
			want := map[string]any{
				"name": "Ada", "plan": "free", "first_seen": "2024-01-01", "logins": jsonNum(5),
				"events": []any{"signup"}, "tags": []any{"b", "c"},
				"$transactions": []any{map[string]any{"$amount": json.Number("19.5"), "$time": "2024-02-01T00:00:00", "sku": "x1"}},
			}
			if got := users[u+"-ada"]; !reflect.DeepEqual(got, want) {
				t.Errorf("profile %s\n got %v\nwant %v", u+"-ada", got, want)
			}
			if got := users[u+"-bob"]; !reflect.DeepEqual(got, map[string]any{"$transactions": []any{}}) {
				t.Errorf("profile %s after clear_charges: %v, want $transactions []", u+"-bob", got)
			}
			if got, there := users[u+"-cid"]; there {
				t.Errorf("profile %s survived delete_user: %v", u+"-cid", got)
			}
		})
		t.Run(mode+"/groups", func(t *testing.T) {
			ok(t, "groups.set", "groups.set_once", "groups.union", "groups.remove", "groups.unset", "groups.set#gone", "groups.delete_group")
			want := map[string]any{"size": jsonNum(10), "tier": "gold", "founded": jsonNum(1999), "regions": []any{"eu"}}
			if got := groups[u+"-acme"]; !reflect.DeepEqual(got, want) {
				t.Errorf("group %s\n got %v\nwant %v", u+"-acme", got, want)
			}
			if got, there := groups[u+"-gone"]; there {
				t.Errorf("group %s survived delete_group: %v", u+"-gone", got)
			}
		})
	}
	if t.Failed() {
		var failed []string
		for k, v := range res {
			if v != "" {
				failed = append(failed, k+": "+v)
			}
		}
		t.Logf("calls the SDK reported as failed:\n%s", strings.Join(failed, "\n"))
	}
}
