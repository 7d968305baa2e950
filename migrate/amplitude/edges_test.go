package amplitude

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/ratelimit"
)

// The project token that is enough to ask for a migration is public: the
// requests that make the server call Amplitude are limited per project.
// Requests refused before any call do not count.
func TestCalloutRatePerProject(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.CalloutRate = ratelimit.Rate{Burst: 2, Every: time.Hour} })
	dry := with("DRY_RUN", true)
	for i := range 3 { // refused locally: not counted
		if code, body := e.do("POST", "/amplitude", with("END_DATE", "2024-02-01")); code != 400 {
			t.Fatalf("local refusal %d: %d %v", i, code, body)
		}
	}
	for i := range 2 {
		if code, body := e.do("POST", "/amplitude", dry); code != 200 {
			t.Fatalf("dry run %d: %d %v", i, code, body)
		}
	}
	before := len(e.srv.Requests())
	req, _ := http.NewRequest("POST", e.http.URL+"/amplitude", strings.NewReader(`{"SOURCE_API_KEY":"`+testKey+`","SOURCE_API_SECRET":"`+testSecret+`","TARGET_TOKEN":"tok-simplified","START_DATE":"2024-03-01","END_DATE":"2024-03-04"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third request: %d %v, want 429 with Retry-After", resp.StatusCode, resp.Header)
	}
	if n := len(e.srv.Requests()); n != before {
		t.Fatalf("a refused request made %d calls to Amplitude", n-before)
	}
	// Another project has its own budget.
	e.do("POST", "/amplitude", with("TARGET_TOKEN", "tok-eu", "REGION", "EU", "DRY_RUN", true))
	if code, body := e.do("POST", "/amplitude", with("TARGET_TOKEN", "tok-eu", "REGION", "EU", "DRY_RUN", true)); code == 429 {
		t.Fatalf("project 3 limited by project 1's requests: %v", body)
	}
}

// A failure to reach the export host says what went wrong, never where:
// the host may be an internal proxy. The log keeps the URL.
func TestExportErrorsHideURLs(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String()
	closed.Close() // nothing listens there now
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "upstream http://10.1.2.3:8443/api/2/export?start=x unreachable")
	}))
	defer proxy.Close()
	cases := []struct {
		name, base, hide string
		want             string
		logged           bool // the log keeps hide (a transport error's address)
	}{
		{"connection refused", deadURL, closed.Addr().String(), "refused the connection", true},
		{"proxy error page", proxy.URL, "10.1.2.3", "HTTP 502: upstream <url> unreachable", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.BaseURL = tc.base })
			for _, body := range []map[string]any{with("DRY_RUN", true), request()} {
				code, got := e.do("POST", "/amplitude", body)
				msg, _ := got["error"].(string)
				if code != 502 || !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.hide) || strings.Contains(msg, "://") {
					t.Fatalf("%d %q; want 502 saying %q without %q or any URL", code, msg, tc.want, tc.hide)
				}
			}
			if tc.logged && !strings.Contains(e.logs.String(), tc.hide) {
				t.Fatalf("the log lost the detail %q:\n%s", tc.hide, e.logs.String())
			}
		})
	}
}

func TestScrubURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Get "https://amplitude.internal:8443/api/2/export?start=1": EOF`: `Get "<url>": EOF`,
		"see HTTP://x.y/z and ftp://a":                                    "see <url> and <url>",
		"no url: 10 events":                                               "no url: 10 events",
	} {
		if got := scrubURLs(in); got != want {
			t.Errorf("scrubURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
