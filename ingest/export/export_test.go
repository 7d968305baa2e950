package export

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func TestAppendEventShape(t *testing.T) {
	e := &store.Event{Name: "Sign \"up\"", DistinctID: "u-1", TimeMs: 1_602_611_311_999, InsertID: "abc",
		Props: []byte(`{"plan":"pro","n":[1,2]}`), IngestMs: 1_602_625_711_874}
	got := string(AppendEvent(nil, e, false))
	want := `{"event":"Sign \"up\"","properties":{"time":1602611311,"distinct_id":"u-1","$insert_id":"abc","mp_processing_time_ms":1602625711874,"plan":"pro","n":[1,2]}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	e.InsertID, e.Props = "", []byte(`{ }`)
	got = string(AppendEvent(nil, e, true))
	want = `{"event":"Sign \"up\"","properties":{"time":1602611311999,"distinct_id":"u-1","mp_processing_time_ms":1602625711874}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Fatal(err)
	}
}

func TestParseRequest(t *testing.T) {
	ok, err := ParseRequest(3, url.Values{"from_date": {"2024-01-01"}, "to_date": {"2024-01-31"},
		"event": {`["a","b"]`}, "limit": {"10"}, "where": {`properties["x"]=="y"`}, "time_in_ms": {"true"}})
	if err != nil || ok.Project != 3 || len(ok.Events) != 2 || ok.Limit != 10 || ok.Where == nil || !ok.TimeInMs {
		t.Fatalf("%+v %v", ok, err)
	}
	// The official Go SDK sends a bare event name.
	bare, err := ParseRequest(3, url.Values{"from_date": {"2024-01-01"}, "to_date": {"2024-01-31"}, "event": {"page_view"}})
	if err != nil || len(bare.Events) != 1 || bare.Events[0] != "page_view" {
		t.Fatalf("bare event name: %+v %v", bare.Events, err)
	}
	bad := []url.Values{
		{"to_date": {"2024-01-01"}},
		{"from_date": {"2024-01-02"}, "to_date": {"2024-01-01"}},
		{"from_date": {"2024/01/01"}, "to_date": {"2024-01-01"}},
		{"from_date": {"2024-01-01"}, "to_date": {"2024-01-01"}, "event": {`["a"`}},
		{"from_date": {"2024-01-01"}, "to_date": {"2024-01-01"}, "limit": {"100001"}},
		{"from_date": {"2024-01-01"}, "to_date": {"2024-01-01"}, "where": {"x =="}},
	}
	for _, q := range bad {
		if _, err := ParseRequest(1, q); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%v: err = %v", q, err)
		}
	}
}
