// Package alerts watches sync runs and tells people: rules (rules.go)
// turn a run's plan and end into alerts, which the store keeps in an
// outbox in the run's own transaction; a worker (deliver.go) hands them
// to webhooks, Slack-compatible incoming webhooks and command hooks,
// retrying with backoff. docs/monitoring.md is the user's reference.
package alerts

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Alert kinds.
const (
	KindRunFailed     = "run_failed"
	KindRunRecovered  = "run_recovered"
	KindRowsRefused   = "rows_refused"
	KindVolume        = "volume_anomaly"
	KindStale         = "freshness_stale"
	KindSchemaChanged = "schema_changed"
	KindResolved      = "resolved" // a rule's condition cleared (details.rule)
)

// Payload is the JSON body a webhook receives and a command reads on
// stdin; Slack destinations get it as text and blocks (slack below).
type Payload struct {
	ID          string         `json:"id"`
	Kind        string         `json:"kind"`
	Project     int64          `json:"project"`
	ProjectName string         `json:"project_name"`
	Import      string         `json:"import"`
	RunID       string         `json:"run_id,omitempty"`
	Status      string         `json:"status,omitempty"`
	Reason      string         `json:"reason,omitempty"`
	Message     string         `json:"message"`
	Action      string         `json:"action,omitempty"` // pause: the import was paused
	Counts      *Counts        `json:"counts,omitempty"`
	Details     map[string]any `json:"details,omitempty"`
	Links       Links          `json:"links"`
	RaisedAt    string         `json:"raised_at"`
}

// Counts are the run's figures.
type Counts struct {
	RowsRead  int64 `json:"rows_read"`
	Imported  int64 `json:"imported"`
	Duplicate int64 `json:"duplicate"`
	Refused   int64 `json:"refused"`
}

// Links lead to the run: its history in the app API, and the console.
type Links struct {
	Import  string `json:"import"`
	History string `json:"history"`
	Console string `json:"console"`
}

func links(base string, project int64, importID, runID string) Links {
	imp := fmt.Sprintf("%s/api/app/projects/%d/warehouse-sources/imports/%s", base, project, url.PathEscape(importID))
	console := fmt.Sprintf("%s/#imports/%s", base, url.PathEscape(importID))
	if runID != "" {
		console += "/runs/" + url.PathEscape(runID)
	}
	return Links{Import: imp, History: imp + "/history", Console: console}
}

func (p *Payload) encode(now time.Time) []byte {
	p.RaisedAt = now.UTC().Format(time.RFC3339)
	b, _ := json.Marshal(p) // plain values: cannot fail
	return b
}

// title is a one-line summary for chat.
func (p *Payload) title() string {
	icon := map[string]string{KindRunFailed: ":red_circle:", KindRunRecovered: ":large_green_circle:",
		KindResolved: ":large_green_circle:", KindSchemaChanged: ":large_blue_circle:"}[p.Kind]
	if icon == "" {
		icon = ":warning:"
	}
	return fmt.Sprintf("%s Tributary · %s · import %s: %s", icon, p.ProjectName, p.Import, strings.ReplaceAll(p.Kind, "_", " "))
}

// slack shapes a payload as a Slack incoming-webhook message: text for
// notifications and clients without blocks, blocks for the rest.
func slack(body []byte) ([]byte, error) {
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("alert body: %w", err)
	}
	text := p.title() + "\n" + p.Message
	fields := []map[string]string{}
	if p.RunID != "" {
		fields = append(fields, map[string]string{"type": "mrkdwn", "text": "*Run*\n" + p.RunID})
	}
	if p.Counts != nil {
		fields = append(fields, map[string]string{"type": "mrkdwn", "text": fmt.Sprintf("*Rows*\nread %d · imported %d · duplicate %d · refused %d",
			p.Counts.RowsRead, p.Counts.Imported, p.Counts.Duplicate, p.Counts.Refused)})
	}
	blocks := []map[string]any{
		{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": "*" + p.title() + "*\n" + p.Message}},
	}
	if len(fields) > 0 {
		blocks = append(blocks, map[string]any{"type": "section", "fields": fields})
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": []map[string]string{
		{"type": "mrkdwn", "text": fmt.Sprintf("<%s|Open in the console> · <%s|Run history (API)> · alert %s", p.Links.Console, p.Links.History, p.ID)},
	}})
	return json.Marshal(map[string]any{"text": text, "blocks": blocks})
}
