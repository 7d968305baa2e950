package export

import (
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/where"
)

// The expression language itself is tested in ingest/where; this checks
// what export adds: the built-in fields it prints inside "properties".
func TestWhereOnEvents(t *testing.T) {
	ev := &store.Event{Name: "Buy", DistinctID: "u1", InsertID: "i1", TimeMs: 1_700_000_000_500, IngestMs: 1_700_000_001_000,
		Props: []byte(`{"plan":"pro","n":3,"ok":true,"city":"Köln"}`)}
	cases := []struct {
		expr string
		want bool
	}{
		{`properties["plan"] == "pro"`, true},
		{`properties["n"] > 2 and properties["ok"] == true`, true},
		{`properties["distinct_id"] == "u1"`, true},
		{`properties["distinct_id"] in ["u0", "u1"]`, true},
		{`properties["$insert_id"] == "i1"`, true},
		{`properties["time"] == 1700000000`, true},
		{`properties["time"] >= 1700000000 and properties["time"] < 1700000001`, true},
		{`properties["mp_processing_time_ms"] == 1700000001000`, true},
		{`properties["missing"] != "x"`, true},
		{`properties["city"] == "Köln" and properties["distinct_id"] != "u2"`, true},
	}
	var row EventRow
	for _, tc := range cases {
		e, err := where.Parse(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		row.Reset(ev)
		if got := e.Match(&row); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
	}

	// No $insert_id: the property is absent, not "".
	noID := *ev
	noID.InsertID, noID.Props = "", []byte(`not json`)
	row.Reset(&noID)
	if e, _ := where.Parse(`defined(properties["$insert_id"]) or defined(properties["plan"])`); e.Match(&row) {
		t.Error("an event without $insert_id or parseable props matched defined()")
	}
}

func TestEventRowDoesNotAllocate(t *testing.T) {
	ev := &store.Event{DistinctID: "u1", TimeMs: 1_700_000_000_500, Props: []byte(`{"plan":"pro","n":3}`)}
	e, err := where.Parse(`properties["plan"] == "pro" and properties["distinct_id"] == "u1" and properties["time"] > 0`)
	if err != nil {
		t.Fatal(err)
	}
	var row EventRow
	if n := testing.AllocsPerRun(100, func() {
		row.Reset(ev)
		if !e.Match(&row) {
			t.Fatal("no match")
		}
	}); n != 0 {
		t.Fatalf("%.0f allocations per event", n)
	}
}
