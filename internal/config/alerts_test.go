package config

import (
	"strings"
	"testing"
	"time"
)

// Alert destinations take their URLs and header values only through
// ${VAR}; every mistake names its key.
func TestAlertsConfig(t *testing.T) {
	vars := map[string]string{"HOOK": "https://hooks.example.com/t/abc", "TOK": "s3cret", "BAD": "ftp://x"}
	alerts := func(body string) string { return oneProject + "    alerts:\n" + body }
	cases := []struct {
		name, yaml, want string // want "" = accepted
	}{
		{"webhook", alerts("      destinations:\n        - {name: h, kind: webhook, url: \"${HOOK}\", headers: {Authorization: \"Bearer ${TOK}\"}}\n"), ""},
		{"literal url", alerts("      destinations:\n        - {name: h, kind: slack, url: \"https://hooks.slack.com/services/T/B/x\"}\n"),
			"projects[0].alerts.destinations[0].url: line 8: may hold a token, so it is written with ${VAR}"},
		{"literal header", alerts("      destinations:\n        - {name: h, kind: webhook, url: \"${HOOK}\", headers: {Authorization: \"Bearer abc\"}}\n"),
			"projects[0].alerts.destinations[0].headers.Authorization: line 8: may hold a token"},
		{"url default", alerts("      destinations:\n        - {name: h, kind: webhook, url: \"${NOPE:-https://x}\"}\n"),
			"projects[0].alerts.destinations[0].url: line 8: may hold a token"},
		{"not http", alerts("      destinations:\n        - {name: h, kind: webhook, url: \"${BAD}\"}\n"),
			"projects[0].alerts.destinations[0].url: must be an http(s) URL"},
		{"kind", alerts("      destinations:\n        - {name: h, kind: email}\n"),
			"projects[0].alerts.destinations[0].kind: must be webhook, slack or command; got \"email\""},
		{"command", alerts("      destinations:\n        - {name: c, kind: command, command: [/bin/true]}\n"), ""},
		{"empty command", alerts("      destinations:\n        - {name: c, kind: command}\n"), "projects[0].alerts.destinations[0].command: must be the program"},
		{"duplicate name", alerts("      destinations:\n        - {name: c, kind: command, command: [a]}\n        - {name: c, kind: command, command: [b]}\n"),
			"projects[0].alerts.destinations[1].name: \"c\" is already used by projects[0].alerts.destinations[0]"},
		{"volume action", alerts("      rules:\n        volume: {action: stop}\n"), "projects[0].alerts.rules.volume.action: must be notify, pause or off; got \"stop\""},
		{"import rule", alerts("      imports:\n        orders:\n          refused: {max_ratio: 2}\n"), "projects[0].alerts.imports.orders.refused.max_ratio: must be between 0 and 1"},
		{"freshness", alerts("      rules:\n        freshness: {max_age: 10s}\n"), "projects[0].alerts.rules.freshness.max_age: must be at least 1m"},
		{"retry", alerts("      retry: {base: 1m, max: 1s}\n"), "projects[0].alerts.retry.max: must be at least retry.base"},
		{"base url", alerts("      base_url: tributary.example.com\n"), "projects[0].alerts.base_url: must be an http(s) URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml), env(vars))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Defaults, and one import's rules over the project's.
func TestAlertsDefaultsAndRulesFor(t *testing.T) {
	yaml := oneProject + `    alerts:
      destinations:
        - {name: h, kind: webhook, url: "${HOOK}"}
      rules:
        volume: {action: pause}
        failed: false
      imports:
        orders:
          volume: {lower: 0.2}
          failed: true
`
	c, err := Parse("c.yaml", []byte(yaml), env(map[string]string{"HOOK": "http://127.0.0.1:9/h"}))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Projects[0].Alerts
	if a.BaseURL != "http://127.0.0.1:8080" || time.Duration(a.Destinations[0].Timeout) != 10*time.Second || a.Retry.Attempts != 16 {
		t.Errorf("defaults: %+v", a)
	}
	if v := a.RulesFor("other").Volume; v.Action != ActionPause || v.Lower != 0.5 || v.Upper != 3 || v.MinRuns != 5 {
		t.Errorf("project volume rule: %+v", v)
	}
	r := a.RulesFor("orders")
	if r.Volume.Lower != 0.2 || r.Volume.Action != ActionNotify || r.Failed == nil || !*r.Failed {
		t.Errorf("import rules: %+v %+v", r, r.Volume)
	}
}
