package amplitude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Request is one migration request: the JSON body of POST /amplitude, or
// the flags of `tributary migrate amplitude`.
type Request struct {
	Credentials Credentials
	Token       string // the target project's token
	StartDate   string // YYYY-MM-DD, UTC, inclusive; "" = see Hours
	EndDate     string
	DryRun      bool
	Region      string // "" or "US": Amplitude's US host; "EU": its EU host and an EU project
}

// RequestError is a refused request and the HTTP status that says why.
type RequestError struct {
	Status int
	Msg    string
	// RetryAfter, when set, is sent as the Retry-After header (a 429).
	RetryAfter time.Duration
}

func (e *RequestError) Error() string { return e.Msg }

func refuse(status int, format string, args ...any) *RequestError {
	return &RequestError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// Limits of the migration service (spec §4.5, §8; Amplitude's export).
const (
	// MaxEvents: the service is for migrations under 15 million events.
	MaxEvents = 15_000_000
	// MaxRangeDays is the longest range Amplitude's Export API accepts.
	MaxRangeDays = 365
	// DefaultRangeDays applies when no date is given.
	DefaultRangeDays = 30
)

// fields of the body: each with its public-doc alias (decisions.md).
var bodyFields = [...]struct{ name, alias string }{
	{"SOURCE_API_KEY", "AMPLITUDE_API_KEY"},
	{"SOURCE_API_SECRET", "AMPLITUDE_API_SECRET"},
	{"TARGET_TOKEN", "MIXPANEL_TOKEN"},
	{"START_DATE", ""},
	{"END_DATE", ""},
	{"DRY_RUN", ""},
	{"REGION", ""},
}

// ParseRequest decodes a POST /amplitude body. Unknown fields are refused:
// a misspelt START_DATE would otherwise silently migrate the default range.
func ParseRequest(body []byte) (Request, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return Request{}, refuse(http.StatusBadRequest, "the body must be a JSON object, e.g. "+
			`{"SOURCE_API_KEY":"…","SOURCE_API_SECRET":"…","TARGET_TOKEN":"…","START_DATE":"2024-01-01","END_DATE":"2024-01-31"}`)
	}
	if dec.More() {
		return Request{}, refuse(http.StatusBadRequest, "the body must be one JSON object")
	}
	var unknown []string
	for k := range raw {
		if !slices.ContainsFunc(bodyFields[:], func(f struct{ name, alias string }) bool { return k == f.name || k == f.alias }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return Request{}, refuse(http.StatusBadRequest, "unknown field %q; the fields are SOURCE_API_KEY, SOURCE_API_SECRET, TARGET_TOKEN, START_DATE, END_DATE, DRY_RUN and REGION", unknown[0])
	}
	var vals [len(bodyFields)]string
	var missing []string
	for i, f := range bodyFields {
		if f.name == "DRY_RUN" {
			continue
		}
		v, err := stringField(raw, f.name, f.alias)
		if err != nil {
			return Request{}, err
		}
		vals[i] = v
		if i < 3 && v == "" {
			missing = append(missing, f.name+" (or "+f.alias+")")
		}
	}
	if len(missing) > 0 {
		return Request{}, refuse(http.StatusBadRequest, "missing or empty required field: %s", strings.Join(missing, ", "))
	}
	r := Request{
		Credentials: Credentials{APIKey: vals[0], APISecret: vals[1]},
		Token:       vals[2], StartDate: vals[3], EndDate: vals[4], Region: vals[6],
	}
	if v, ok := raw["DRY_RUN"]; ok && string(v) != "null" {
		switch strings.ToLower(strings.Trim(string(v), `"`)) {
		case "true":
			r.DryRun = true
		case "false":
		default:
			return Request{}, refuse(http.StatusBadRequest, "DRY_RUN must be true or false, got %s", truncateText(string(v), 40))
		}
	}
	return r, nil
}

// stringField reads a string field or its alias; giving both with
// different values is ambiguous and refused.
func stringField(raw map[string]json.RawMessage, name, alias string) (string, error) {
	get := func(k string) (string, bool, error) {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false, refuse(http.StatusBadRequest, "%s must be a string", k)
		}
		return strings.TrimSpace(s), true, nil
	}
	a, okA, err := get(name)
	if err != nil || alias == "" {
		return a, err
	}
	b, okB, err := get(alias)
	if err != nil {
		return "", err
	}
	if okA && okB && a != b {
		return "", refuse(http.StatusBadRequest, "%s and its alias %s are both given, with different values", name, alias)
	}
	if okA {
		return a, nil
	}
	return b, nil
}

// amplitudeRegion normalises REGION: "US" or "EU".
func (r Request) amplitudeRegion() (string, error) {
	switch strings.ToUpper(strings.TrimSpace(r.Region)) {
	case "", "US":
		return "US", nil
	case "EU":
		return "EU", nil
	}
	return "", refuse(http.StatusBadRequest, "REGION must be EU (Amplitude's and the project's EU data residency) or US, got %q", truncateText(r.Region, 20))
}

const dateLayout = "2006-01-02"

// Hours resolves the request's dates to the hours to export, first and
// last inclusive, in UTC. With no dates: the 30 days before now, ending
// with the last complete hour. With only START_DATE: up to now. With only
// END_DATE: the 30 days ending that day. The end never goes past the last
// complete hour, since Amplitude has nothing later.
func (r Request) Hours(now time.Time) (start, end time.Time, err error) {
	lastHour := now.UTC().Truncate(time.Hour).Add(-time.Hour)
	parse := func(name, v string) (time.Time, error) {
		t, err := time.Parse(dateLayout, v)
		if err != nil {
			return t, refuse(http.StatusBadRequest, "%s must be a date as YYYY-MM-DD, got %q", name, truncateText(v, 40))
		}
		return t, nil
	}
	var startDay, endDay time.Time
	switch {
	case r.StartDate == "" && r.EndDate == "":
		return lastHour.Add(-(DefaultRangeDays*24 - 1) * time.Hour), lastHour, nil
	case r.StartDate == "":
		if endDay, err = parse("END_DATE", r.EndDate); err != nil {
			return
		}
		startDay = endDay.AddDate(0, 0, -(DefaultRangeDays - 1))
	default:
		if startDay, err = parse("START_DATE", r.StartDate); err != nil {
			return
		}
		endDay = lastHour.Truncate(24 * time.Hour)
		if r.EndDate == "" && startDay.After(endDay) {
			return start, end, refuse(http.StatusBadRequest, "START_DATE %s is in the future: Amplitude has no data for it yet", startDay.Format(dateLayout))
		}
		if r.EndDate != "" {
			if endDay, err = parse("END_DATE", r.EndDate); err != nil {
				return
			}
		}
	}
	if endDay.Before(startDay) {
		return start, end, refuse(http.StatusBadRequest, "END_DATE %s is before START_DATE %s", endDay.Format(dateLayout), startDay.Format(dateLayout))
	}
	if days := int(endDay.Sub(startDay).Hours()/24) + 1; days > MaxRangeDays {
		return start, end, refuse(http.StatusBadRequest, "the range is %d days; Amplitude exports at most %d days per request, so migrate it in parts", days, MaxRangeDays)
	}
	start, end = startDay, endDay.Add(23*time.Hour)
	if end.After(lastHour) {
		end = lastHour
	}
	if end.Before(start) {
		return start, end, refuse(http.StatusBadRequest, "START_DATE %s has no complete hour yet", startDay.Format(dateLayout))
	}
	return start, end, nil
}
