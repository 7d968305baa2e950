package integration

import (
	"fmt"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// TestClientsMixpanelImport drives mixpanel-import 3.1.43 over HTTPS:
// events with a service account (strict, gzip) and with the API secret
// (strict=0), user and group profiles in the package's default shape (no
// $token in the updates, the credential in the header), and the raw
// export. The package has no custom-host option; the script redirects
// only its URL table (see clients/mixpanel-import.js).
func TestClientsMixpanelImport(t *testing.T) {
	t.Parallel()
	needNode(t, "mixpanel-import")
	s, ca := startTLSServer(t, defaultConfig())
	out := runNode(t, 2*time.Minute, "mixpanel-import.js", map[string]string{
		"TRIBUTARY_URL": s.URL, "NODE_EXTRA_CA_CERTS": ca.CAFile, "TRIBUTARY_PROJECT_ID": fmt.Sprint(mainID),
		"TRIBUTARY_SECRET": mainSecret, "TRIBUTARY_SA_USER": ownerSA, "TRIBUTARY_SA_SECRET": ownerSecret,
	})
	res := callResults(t, out)
	evs := s.export(t, asOwner, mainID, nil)
	count := func(name string) int {
		n := 0
		for _, e := range evs {
			if e.Event == name {
				n++
			}
		}
		return n
	}
	t.Run("events/service-account", func(t *testing.T) {
		wantCallsOK(t, res, "events:service-account")
		if n := count("mi-sa event"); n != 250 {
			t.Errorf("stored %d events, want 250", n)
		}
	})
	t.Run("events/secret-strict0", func(t *testing.T) {
		wantCallsOK(t, res, "events:secret strict=0")
		if n := count("mi-secret event"); n != 20 {
			t.Errorf("stored %d events, want 20", n)
		}
	})
	users := engageProfiles(t, s, mainSecret, url.Values{"project_id": {"1"}})
	for _, via := range []string{"secret", "service-account"} {
		prefix := map[string]string{"secret": "mi-secret", "service-account": "mi-sa"}[via]
		t.Run("users/"+via, func(t *testing.T) {
			wantCallsOK(t, res, "users:"+via)
			want := map[string]map[string]any{prefix + "-ada": {"name": "Ada", "plan": "pro"}, prefix + "-bob": {"name": "Bob", "plan": "free"}}
			for id, w := range want {
				if !reflect.DeepEqual(users[id], w) {
					t.Errorf("profile %s: %v, want %v", id, users[id], w)
				}
			}
		})
	}
	t.Run("groups/secret", func(t *testing.T) {
		wantCallsOK(t, res, "groups:secret")
		g := engageProfiles(t, s, mainSecret, url.Values{"project_id": {"1"}, "data_group_id": {"company"}})
		if !reflect.DeepEqual(g["mi-acme"], map[string]any{"tier": "gold"}) {
			t.Errorf("group company/mi-acme: %v", g["mi-acme"])
		}
	})
	t.Run("export/service-account", func(t *testing.T) {
		wantCallsOK(t, res, "export:service-account")
		// The export ran after both event imports: it wrote what the server holds.
		if got, want := res["#export:service-account"], fmt.Sprint(len(evs)); got != want {
			t.Errorf("export wrote %s events, the server holds %s", got, want)
		}
	})
	if t.Failed() {
		t.Logf("script results: %s", out)
	}
}
