package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestHistoryAsOfQueries: export's where and segmentation's where and on
// read properties["$user.plan"] as of each event's time from the user's
// History-table versions: an event exactly at a start sees that version,
// one before the first version sees none; the exported lines are the
// stored events, without $user properties.
func TestHistoryAsOfQueries(t *testing.T) {
	e := newQueryEnv(t)
	ctx := context.Background()
	// u1: free from day 0 10:00, pro from day 1 00:00; u2: team from day 0.
	if err := e.st.HistoryApply(ctx, qSimple, "hist", "", []store.HistoryVersion{
		{ID: "u1", StartMs: at(0, 10, 0), Props: []byte(`{"plan":"free"}`)},
		{ID: "u1", StartMs: at(1, 0, 0), Props: []byte(`{"plan":"pro","seats":3}`)},
		{ID: "u2", StartMs: at(0, 0, 0), Props: []byte(`{"plan":"team"}`)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	// Another import's version of u1 that started later wins its names.
	if err := e.st.HistoryApply(ctx, qSimple, "hist2", "", []store.HistoryVersion{
		{ID: "u1", StartMs: at(1, 12, 0), Props: []byte(`{"plan":"enterprise"}`)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	ev := func(user string, ms int64, id string) store.Event {
		return storetest.NewEvent(qSimple, "buy", user, ms, id, `{"n":1}`)
	}
	e.write(store.Batch{Project: qSimple, Events: []store.Event{
		ev("u1", at(0, 9, 59), "before-first"), // no version yet
		ev("u1", at(0, 10, 0), "at-free"),      // exactly at the first start
		ev("u1", at(0, 23, 59), "free-late"),
		ev("u1", at(1, 0, 0), "at-pro"), // exactly at the second start
		ev("u1", at(1, 13, 0), "enterprise"),
		ev("u2", at(1, 5, 0), "team"),
		ev("u3", at(1, 5, 0), "no-history"),
	}})

	exported := func(where string) string {
		t.Helper()
		q := url.Values{"from_date": {"2024-03-01"}, "to_date": {"2024-03-02"}, "where": {where}}
		r := e.call(http.MethodGet, "/api/2.0/export", q, qSecret1, "")
		if r.Status != http.StatusOK {
			t.Fatalf("export %s: HTTP %d %s", where, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "$user.") {
			t.Errorf("exported lines carry $user properties: %s", r.Body)
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(string(r.Body)), "\n") {
			if i := strings.Index(line, `"$insert_id":"`); i >= 0 {
				rest := line[i+len(`"$insert_id":"`):]
				ids = append(ids, rest[:strings.IndexByte(rest, '"')])
			}
		}
		return strings.Join(ids, " ")
	}
	for where, want := range map[string]string{
		`properties["$user.plan"] == "free"`:       "at-free free-late",
		`properties["$user.plan"] == "pro"`:        "at-pro",
		`properties["$user.plan"] == "enterprise"`: "enterprise",
		`not defined(properties["$user.plan"])`:    "before-first no-history",
		// hist2 has no seats: hist's current version still gives them.
		`properties["$user.seats"] == 3`: "at-pro enterprise",
		`user["$user.plan"] == "team"`:   "team",
	} {
		if got := exported(where); got != want {
			t.Errorf("export where %s: %q, want %q", where, got, want)
		}
	}

	seg := segmentation(t, e, qSecret1, url.Values{"event": {"buy"}, "from_date": {"2024-03-01"}, "to_date": {"2024-03-02"},
		"on": {`properties["$user.plan"]`}, "where": {`properties["n"] == 1`}})
	want := "free:2024-03-01=2 undefined:2024-03-01=1 enterprise:2024-03-02=1 pro:2024-03-02=1 team:2024-03-02=1 undefined:2024-03-02=1"
	if got := seg.flat(); got != want {
		t.Errorf("segmentation on $user.plan:\n got %s\nwant %s", got, want)
	}
}
