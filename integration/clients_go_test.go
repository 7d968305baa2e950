package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mixpanel/mixpanel-go"
)

// TestClientsGoSDK completes sdk_test.go and profiles_test.go (which
// cover Import strict with a service account or the secret, Export with
// limit and where, every People* and Group* call and Alias) with what
// they leave out, over HTTPS with HTTP/2 and only the test CA trusted: the
// non-strict Import answers (gzip and not, secret and token auth), Merge
// on both ID modes, a verbose Track batch with a bad record, PeopleSet
// with an IP and PeopleDeleteProfile ignoring aliases.
func TestClientsGoSDK(t *testing.T) {
	t.Parallel()
	s, ca := startTLSServer(t, defaultConfig())
	ctx := context.Background()
	client := func(token string, opts ...mixpanel.Options) *mixpanel.ApiClient {
		base := []mixpanel.Options{mixpanel.ProxyApiLocation(s.URL), mixpanel.ProxyDataLocation(s.URL), mixpanel.HttpClient(ca.Client())}
		return mixpanel.NewApiClient(token, append(base, opts...)...)
	}
	main := client(mainToken, mixpanel.ApiSecret(mainSecret))
	orig := client(otherToken, mixpanel.ApiSecret(otherSecret))
	stored := func(t *testing.T, c *mixpanel.ApiClient, event string) []*mixpanel.Event {
		t.Helper()
		from, to := exportRange()
		got, err := c.Export(ctx, from, to, mixpanel.ExportNoLimit, event, mixpanel.ExportNoWhereFilter)
		if err != nil {
			t.Fatalf("Export %q: %v", event, err)
		}
		return got
	}

	imports := []struct {
		name   string
		c      *mixpanel.ApiClient
		opts   mixpanel.ImportOptions
		events int
	}{
		{"Import/strict=0 gzip secret", main, mixpanel.ImportOptions{Strict: false, Compression: mixpanel.Gzip}, 30},
		{"Import/strict=0 plain token", client(mainToken), mixpanel.ImportOptions{Strict: false, Compression: mixpanel.None}, 12},
		{"Import/strict=1 plain service-account", client(mainToken, mixpanel.ServiceAccount(mainID, ownerSA, ownerSecret)),
			mixpanel.ImportOptions{Strict: true, Compression: mixpanel.None}, 7},
		{"Import/strict=1 gzip token", client(mainToken), mixpanel.ImportOptionsRecommend, 9},
	}
	for _, tc := range imports {
		t.Run(tc.name, func(t *testing.T) {
			name := "go " + tc.name
			sent := sdkEvents(tc.c, name, tc.events, time.Now().Add(-2*time.Hour))
			res, err := tc.c.Import(ctx, sent, tc.opts)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			// What the SDK hands its caller: the JSON answer, strict or not.
			if res.Code != 200 || res.NumRecordsImported != tc.events || res.Status != "OK" {
				t.Errorf("Import result %+v, want code 200, %d imported, status OK", *res, tc.events)
			}
			if got := stored(t, main, name); len(got) != tc.events {
				t.Errorf("export: %d events, want %d", len(got), tc.events)
			}
		})
	}

	t.Run("Track/verbose batch with a bad record", func(t *testing.T) {
		// The SDK returns an error only for {"status":0}; whether a batch
		// that was partly stored answers 0 or 1, its answer must name the
		// refused record, so the body is captured under the SDK.
		rec := &capture{next: ca.Client().Transport}
		c := client(mainToken, mixpanel.HttpClient(&http.Client{Transport: rec, Timeout: time.Minute}))
		evs := sdkEvents(c, "go track mixed", 3, time.Now().Add(-time.Minute))
		evs[1].Properties["time"] = "yesterday"
		err := c.Track(ctx, evs)
		var ve mixpanel.VerboseError
		var body struct {
			Status int     `json:"status"`
			Error  *string `json:"error"`
		}
		if jerr := json.Unmarshal(rec.body, &body); jerr != nil {
			t.Fatalf("verbose answer %q: %v", rec.body, jerr)
		}
		switch {
		case body.Error == nil || !strings.Contains(*body.Error, "time"):
			t.Errorf("verbose answer %s does not name the refused record's time", rec.body)
		case body.Status == 0 && (!errors.As(err, &ve) || ve.ApiError != *body.Error):
			t.Errorf("answer %s but the SDK returned %v", rec.body, err)
		}
		t.Logf("answer %s; SDK Track returned %v", rec.body, err)
		if got := stored(t, main, "go track mixed"); len(got) != 2 {
			t.Errorf("export: %d events, want the 2 valid ones", len(got))
		}
	})

	for _, tc := range []struct {
		name string
		c    *mixpanel.ApiClient
	}{{"Merge/simplified", main}, {"Merge/original", orig}} {
		t.Run(tc.name, func(t *testing.T) {
			// Form data={"event":"$merge","properties":{"$distinct_ids":[a,b]}}, API secret, no token.
			a, b := tc.name+"-a", tc.name+"-b"
			if err := tc.c.Merge(ctx, a, b); err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if tc.c != orig {
				return // Simplified: accepted, nothing to merge
			}
			evs := []*mixpanel.Event{tc.c.NewEvent("go merged", a, nil), tc.c.NewEvent("go merged", b, nil)}
			for _, e := range evs {
				e.AddTime(time.Now().Add(-time.Minute))
				e.AddInsertID(uid("merge"))
			}
			if err := tc.c.Track(ctx, evs); err != nil {
				t.Fatalf("Track: %v", err)
			}
			got := stored(t, tc.c, "go merged")
			if len(got) != 2 || got[0].Properties["distinct_id"] != got[1].Properties["distinct_id"] {
				t.Errorf("after Merge(%s, %s) the events are exported under different ids: %v", a, b, got)
			}
		})
	}

	t.Run("PeopleSet with IP and PeopleDeleteProfile ignoring aliases", func(t *testing.T) {
		p := mixpanel.NewPeopleProperties("go-ip-user", map[string]any{"name": "Ip"})
		p.SetIp(net.ParseIP("203.0.113.7"))
		if err := main.PeopleSet(ctx, []*mixpanel.PeopleProperties{p, mixpanel.NewPeopleProperties("go-gone", map[string]any{"x": 1})}); err != nil {
			t.Fatalf("PeopleSet: %v", err)
		}
		if err := main.PeopleDeleteProfile(ctx, "go-gone", true); err != nil {
			t.Fatalf("PeopleDeleteProfile(ignoreAlias): %v", err)
		}
		got := engageProfiles(t, s, mainSecret, url.Values{"project_id": {"1"}})
		if got["go-ip-user"]["name"] != "Ip" {
			t.Errorf("profile go-ip-user: %v", got["go-ip-user"])
		}
		if _, there := got["go-gone"]; there {
			t.Errorf("profile go-gone survived PeopleDeleteProfile")
		}
	})
}

// capture is a RoundTripper that keeps the last response body it passed on.
type capture struct {
	next http.RoundTripper
	body []byte
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	c.body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(c.body))
	return resp, nil
}
