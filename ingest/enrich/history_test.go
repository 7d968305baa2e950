package enrich

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// countingHistories is the real store, counting profile loads.
type countingHistories struct {
	store.Histories
	loads atomic.Int64
}

func (c *countingHistories) HistoryProfile(ctx context.Context, project int64, groupKey, id string, fn func(string, store.HistoryVersion) error) error {
	c.loads.Add(1)
	return c.Histories.HistoryProfile(ctx, project, groupKey, id, fn)
}

// TestHistoryApply: only "$user." names activate it; values come from
// the version current at the time; an event's own property of the name
// wins; a user's versions are loaded once per query.
func TestHistoryApply(t *testing.T) {
	st, _, _ := setup(t)
	ctx := context.Background()
	if err := st.HistoryApply(ctx, 1, "h", "", []store.HistoryVersion{
		{ID: "u1", StartMs: 100, Props: []byte(`{"plan":"free","n":1}`)},
		{ID: "u1", StartMs: 200, Props: []byte(`{"plan":"pro"}`)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if NewHistory(st, 1, "plan", "user.plan") != nil {
		t.Fatal("a History without $user. names")
	}
	if NewHistory(nil, 1, "$user.plan") != nil {
		t.Fatal("a History without a store")
	}
	c := &countingHistories{Histories: st}
	h := NewHistory(c, 1, "$user.plan", "$user.n", "$user.plan", "$user.absent")
	for _, tc := range []struct {
		at         int64
		props, out string
	}{
		{99, `{}`, `{}`},
		{100, `{}`, `{"$user.plan":"free","$user.n":1}`},
		{199, `{"a":1}`, `{"a":1,"$user.plan":"free","$user.n":1}`},
		{200, `{"a":1}`, `{"a":1,"$user.plan":"pro"}`},
		{300, `{"$user.plan":"own"}`, `{"$user.plan":"own","$user.plan":"pro"}`}, // where reads the first: the event's
	} {
		got, err := h.Apply(ctx, "u1", tc.at, []byte(tc.props))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.out {
			t.Errorf("at %d: %s, want %s", tc.at, got, tc.out)
		}
	}
	if got, _ := h.Apply(ctx, "nobody", 150, []byte(`{"a":1}`)); string(got) != `{"a":1}` {
		t.Errorf("a user without versions: %s", got)
	}
	if n := c.loads.Load(); n != 2 {
		t.Errorf("%d profile loads for two users, want 2", n)
	}
}
