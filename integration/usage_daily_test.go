package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// checkDailyUsage reads the daily usage of the last two days (so that a
// test crossing midnight still adds up) and compares its sums by source.
func checkDailyUsage(t *testing.T, s *server, want map[string]int64) {
	t.Helper()
	path := usagePath(mainID) + "/daily"
	if r := s.do(t, request{Method: http.MethodGet, Path: path, Query: url.Values{"days": {"0"}}, Auth: asOwner}); r.Status != http.StatusBadRequest {
		t.Fatalf("daily usage of 0 days: %s, want 400", r)
	}
	if r := s.do(t, request{Method: http.MethodGet, Path: path, Auth: noAuth}); r.Status != http.StatusUnauthorized {
		t.Fatalf("daily usage without credentials: %s, want 401", r)
	}
	r := s.do(t, request{Method: http.MethodGet, Path: path, Query: url.Values{"days": {"2"}}, Auth: basicAuth(analystSA, analystSec)})
	var b struct {
		Status  string `json:"status"`
		Results struct {
			Days []struct {
				Day     string           `json:"day"`
				Total   int64            `json:"total"`
				Sources map[string]int64 `json:"sources"`
			} `json:"days"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil || r.Status != http.StatusOK || b.Status != "ok" || len(b.Results.Days) != 2 {
		t.Fatalf("daily usage: %s (%v)", r, err)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	if last := b.Results.Days[1].Day; last != today && last != time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly) {
		t.Fatalf("daily usage ends on %s, want today (%s)", last, today)
	}
	got := map[string]int64{}
	for _, d := range b.Results.Days {
		var sum int64
		for src, n := range d.Sources {
			got[src] += n
			sum += n
		}
		if sum != d.Total {
			t.Fatalf("day %s: total %d, sources add up to %d", d.Day, d.Total, sum)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("daily usage by source: %v, want %v", got, want)
	}
}

// sendAPIEvents stores 5 events through /import and 3 through /track, so
// the console's overview has every API source in its chart.
func sendAPIEvents(t *testing.T, s *server) {
	t.Helper()
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), events("console-import", 5)), 5)
	at := time.Now().Add(-time.Hour)
	trk := []map[string]any{trackEvent("console-t1", mainToken, at), trackEvent("console-t2", mainToken, at), trackEvent("console-t3", mainToken, at)}
	wantBody(t, s.track(t, http.MethodPost, nil, "application/json", mustJSON(t, trk), nil), "1")
}
