package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Alerts are a project's sync monitoring (`alerts:`): where notices go
// and which rules raise them. docs/monitoring.md is the reference.
type Alerts struct {
	// BaseURL is the server's address as readers of an alert reach it;
	// links to the run (app API, console) start with it. Default:
	// http:// and listen.
	BaseURL      string             `yaml:"base_url"`
	Destinations []AlertDestination `yaml:"destinations"`
	// Rules apply to every import of the project; Imports replaces them
	// rule by rule for one import (by import id).
	Rules   AlertRules            `yaml:"rules"`
	Imports map[string]AlertRules `yaml:"imports"`
	Retry   AlertRetry            `yaml:"retry"`
}

// Destination kinds.
const (
	DestWebhook = "webhook" // JSON POST
	DestSlack   = "slack"   // Slack-compatible incoming webhook (text + blocks)
	DestCommand = "command" // a program; the JSON payload on stdin
)

// AlertDestination is one receiver of every alert of the project.
type AlertDestination struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
	// URL (webhook, slack) and Headers (webhook) may hold tokens, so
	// they are written with ${VAR} (alertSecretKey).
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Command is the argv of a command hook (no shell).
	Command []string `yaml:"command"`
	Timeout Duration `yaml:"timeout"` // one attempt; default 10s
}

// AlertRetry paces redelivery to a destination that failed: exponential
// from Base to Max, Attempts tries in all, then the alert is dropped
// (counted in tributary_alerts_dead_total).
type AlertRetry struct {
	Attempts int      `yaml:"attempts"`
	Base     Duration `yaml:"base"`
	Max      Duration `yaml:"max"`
}

// AlertRules choose the rules; a nil rule is the default (for one import,
// the project's).
type AlertRules struct {
	// Failed: a run failed after its retries; with it comes the recovery
	// notice of the first success after. Default on.
	Failed        *bool          `yaml:"failed"`
	Refused       *RefusedRule   `yaml:"refused"`
	Volume        *VolumeRule    `yaml:"volume"`
	Freshness     *FreshnessRule `yaml:"freshness"`
	SchemaChanged *bool          `yaml:"schema_changed"` // default on
}

// RefusedRule: a run refused more than MaxRows rows, or more than
// MaxRatio of the rows it read.
type RefusedRule struct {
	MaxRows  int64   `yaml:"max_rows"`
	MaxRatio float64 `yaml:"max_ratio"`
}

// Volume actions.
const (
	ActionNotify = "notify"
	ActionPause  = "pause"
	ActionOff    = "off"
)

// VolumeRule: a run's rows outside [Lower×median, Upper×median] of the
// last 30 successful runs' (once MinRuns of them exist).
type VolumeRule struct {
	Lower   float64 `yaml:"lower"`    // default 0.5
	Upper   float64 `yaml:"upper"`    // default 3
	MinRuns int     `yaml:"min_runs"` // default 5
	Action  string  `yaml:"action"`   // notify (default), pause, off
}

// FreshnessRule: no new rows for longer than MaxAge.
type FreshnessRule struct {
	MaxAge Duration `yaml:"max_age"`
}

// alertSecretKey matches the alert values that may carry a token: they
// must hold a ${VAR} (expand.go refuses a literal).
var alertSecretKey = regexp.MustCompile(`^projects\[\d+\]\.alerts\.destinations\[\d+\]\.(url|headers\..+)$`)

var destName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (a *Alerts) validate(key, listen string) error {
	if a.BaseURL == "" {
		a.BaseURL = "http://" + listen
	}
	if u, err := url.Parse(a.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad(key+".base_url", "must be an http(s) URL such as https://tributary.example.com; got %q", a.BaseURL)
	}
	a.BaseURL = strings.TrimRight(a.BaseURL, "/")
	seen := map[string]string{}
	for i := range a.Destinations {
		d := &a.Destinations[i]
		k := fmt.Sprintf("%s.destinations[%d]", key, i)
		if !destName.MatchString(d.Name) {
			return bad(k+".name", "must be 1-64 letters, digits, '_', '.' or '-'; got %q", d.Name)
		}
		if prev, ok := seen[d.Name]; ok {
			return bad(k+".name", "%q is already used by %s", d.Name, prev)
		}
		seen[d.Name] = k
		switch d.Kind {
		case DestWebhook, DestSlack:
			u, err := url.Parse(d.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad(k+".url", "must be an http(s) URL (written with ${VAR})")
			}
			if len(d.Command) > 0 {
				return bad(k+".command", "is for kind command only")
			}
			if d.Kind == DestSlack && len(d.Headers) > 0 {
				return bad(k+".headers", "is for kind webhook only (a Slack URL carries its own token)")
			}
		case DestCommand:
			if len(d.Command) == 0 || strings.TrimSpace(d.Command[0]) == "" {
				return bad(k+".command", "must be the program and its arguments, e.g. [/usr/local/bin/notify, --channel, ops]")
			}
			if d.URL != "" || len(d.Headers) > 0 {
				return bad(k+".url", "url and headers are for kinds webhook and slack")
			}
		default:
			return bad(k+".kind", "must be webhook, slack or command; got %q", d.Kind)
		}
		if d.Timeout == 0 {
			d.Timeout = Duration(10 * time.Second)
		}
		if d.Timeout < Duration(time.Second) || d.Timeout > Duration(5*time.Minute) {
			return bad(k+".timeout", "must be between 1s and 5m")
		}
	}
	if err := a.Rules.validate(key + ".rules"); err != nil {
		return err
	}
	for id, r := range a.Imports {
		if err := r.validate(fmt.Sprintf("%s.imports.%s", key, id)); err != nil {
			return err
		}
	}
	r := &a.Retry
	if r.Attempts == 0 {
		r.Attempts = 16
	}
	if r.Base == 0 {
		r.Base = Duration(5 * time.Second)
	}
	if r.Max == 0 {
		r.Max = Duration(10 * time.Minute)
	}
	switch {
	case r.Attempts < 1 || r.Attempts > 100:
		return bad(key+".retry.attempts", "must be between 1 and 100")
	case r.Base < Duration(10*time.Millisecond):
		return bad(key+".retry.base", "must be at least 10ms")
	case r.Max < r.Base:
		return bad(key+".retry.max", "must be at least retry.base")
	}
	return nil
}

func (r *AlertRules) validate(key string) error {
	if f := r.Refused; f != nil {
		if f.MaxRows < 0 {
			return bad(key+".refused.max_rows", "must not be negative")
		}
		if f.MaxRatio < 0 || f.MaxRatio > 1 {
			return bad(key+".refused.max_ratio", "must be between 0 and 1")
		}
		if f.MaxRows == 0 && f.MaxRatio == 0 {
			return bad(key+".refused", "give max_rows, max_ratio or both")
		}
	}
	if v := r.Volume; v != nil {
		if v.Lower == 0 {
			v.Lower = 0.5
		}
		if v.Upper == 0 {
			v.Upper = 3
		}
		if v.MinRuns == 0 {
			v.MinRuns = 5
		}
		if v.Action == "" {
			v.Action = ActionNotify
		}
		switch {
		case v.Lower < 0 || v.Lower >= 1:
			return bad(key+".volume.lower", "must be at least 0 and below 1 (a fraction of the median)")
		case v.Upper <= 1:
			return bad(key+".volume.upper", "must be above 1 (a multiple of the median)")
		case v.MinRuns < 1 || v.MinRuns > 30:
			return bad(key+".volume.min_runs", "must be between 1 and 30")
		case v.Action != ActionNotify && v.Action != ActionPause && v.Action != ActionOff:
			return bad(key+".volume.action", "must be notify, pause or off; got %q", v.Action)
		}
	}
	if f := r.Freshness; f != nil && f.MaxAge < Duration(time.Minute) {
		return bad(key+".freshness.max_age", "must be at least 1m")
	}
	return nil
}

// Rules returns the rules of one import: the project's, each replaced by
// the import's own where it sets one.
func (a *Alerts) RulesFor(importID string) AlertRules {
	r := a.Rules
	o, ok := a.Imports[importID]
	if !ok {
		return r
	}
	if o.Failed != nil {
		r.Failed = o.Failed
	}
	if o.Refused != nil {
		r.Refused = o.Refused
	}
	if o.Volume != nil {
		r.Volume = o.Volume
	}
	if o.Freshness != nil {
		r.Freshness = o.Freshness
	}
	if o.SchemaChanged != nil {
		r.SchemaChanged = o.SchemaChanged
	}
	return r
}
