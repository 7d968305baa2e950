package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
)

func TestRetriesRideFailures(t *testing.T) {
	// No retries: the column stays the plain failures array.
	plain := fill(store.Run{ID: "r"}, run.Stats{})
	if string(plain.Failures) != "[]" {
		t.Fatalf("failures without retries: %s", plain.Failures)
	}
	if f, rs := SplitFailures(plain.Failures); string(f) != "[]" || len(rs) != 0 || rs == nil {
		t.Fatalf("split of a plain array: %s %v", f, rs)
	}
	at := time.Unix(1_800_000_000, 0)
	st := run.Stats{RetryLog: []run.Retry{{At: at, Error: errors.New("connection reset").Error()}}}
	r := fill(store.Run{ID: "r"}, st)
	f, rs := SplitFailures(r.Failures)
	if string(f) != "[]" || len(rs) != 1 || rs[0].At != at.Unix() || rs[0].Error != "connection reset" {
		t.Fatalf("split: %s %+v (column %s)", f, rs, r.Failures)
	}
}
