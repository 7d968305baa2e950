package storetest

import (
	"context"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func histories(t *testing.T, s store.Store) store.Histories {
	t.Helper()
	h, ok := s.(store.Histories)
	if !ok {
		t.Fatalf("%T does not implement store.Histories", s)
	}
	return h
}

// asOf returns the props of the import's version current at atMs, or
// "none".
func asOf(t *testing.T, h store.Histories, imp, gk, id string, atMs int64) string {
	t.Helper()
	got := "none"
	if err := h.HistoryAsOf(context.Background(), 1, imp, gk, []string{id, "absent"}, atMs, func(v store.HistoryVersion) error {
		if v.ID != id || v.GroupKey != gk {
			t.Errorf("as of for %q/%s returned %q/%s", gk, id, v.GroupKey, v.ID)
		}
		got = string(v.Props)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// testHistoryVersions: History versions are inserted, updated (same key,
// new props) and deleted; an as-of lookup picks the latest start ≤ the
// time (a time exactly at a start picks that version, a time before the
// first version none); imports, users and groups stay apart; a repeated
// key in one apply keeps the last; the versions survive a reopen and
// drop with their import.
func testHistoryVersions(t *testing.T, hn Harness) {
	hd := open(t, hn)
	ctx := context.Background()
	h := histories(t, hd.s)
	v := func(gk, id string, start int64, props string) store.HistoryVersion {
		return store.HistoryVersion{GroupKey: gk, ID: id, StartMs: start, Props: []byte(props)}
	}
	if err := h.HistoryApply(ctx, 1, "imp", "", []store.HistoryVersion{
		v("", "u1", 1000, `{"plan":"free"}`),
		v("", "u1", 2000, `{"plan":"pro"}`),
		v("", "u1", 3000, `{"plan":"team"}`),
		v("", "u1", 3000, `{"plan":"enterprise"}`), // repeated key: the last wins
		v("company", "u1", 1000, `{"size":5}`),
		v("", "u2", 1500, `{}`),
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.HistoryApply(ctx, 1, "other", "", []store.HistoryVersion{v("", "u1", 500, `{"region":"eu"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gk, id string
		at     int64
		want   string
	}{
		{"", "u1", 999, "none"}, // before the first version
		{"", "u1", 1000, `{"plan":"free"}`},
		{"", "u1", 1999, `{"plan":"free"}`},
		{"", "u1", 2000, `{"plan":"pro"}`},
		{"", "u1", 1 << 50, `{"plan":"enterprise"}`},
		{"company", "u1", 2500, `{"size":5}`},
		{"", "u2", 1500, `{}`},
		{"", "u3", 5000, "none"},
	} {
		if got := asOf(t, h, "imp", c.gk, c.id, c.at); got != c.want {
			t.Errorf("as of %d of %q/%s: %s, want %s", c.at, c.gk, c.id, got, c.want)
		}
	}
	// Several profiles in one call, each with its own current version.
	many := map[string]string{}
	if err := h.HistoryAsOf(ctx, 1, "imp", "", []string{"u1", "u2", "u3"}, 1500, func(v store.HistoryVersion) error {
		many[v.ID] = string(v.Props)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(many) != 2 || many["u1"] != `{"plan":"free"}` || many["u2"] != `{}` {
		t.Errorf("as of 1500 for u1, u2, u3: %v", many)
	}
	// Update one version, delete another (and one that never existed).
	if err := h.HistoryApply(ctx, 1, "imp", "", []store.HistoryVersion{v("", "u1", 1000, `{"plan":"trial"}`)},
		[]store.HistoryVersion{v("", "u1", 2000, ""), v("", "u9", 1, "")}); err != nil {
		t.Fatal(err)
	}
	if got := asOf(t, h, "imp", "", "u1", 2500); got != `{"plan":"trial"}` {
		t.Errorf("after deleting the version at 2000, as of 2500: %s, want the updated first version", got)
	}
	hd.reopen(t)
	h = histories(t, hd.s)
	type seen struct {
		imp   string
		start int64
		props string
	}
	var got []seen
	if err := h.HistoryProfile(ctx, 1, "", "u1", func(imp string, v store.HistoryVersion) error {
		got = append(got, seen{imp, v.StartMs, string(v.Props)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []seen{{"imp", 1000, `{"plan":"trial"}`}, {"imp", 3000, `{"plan":"enterprise"}`}, {"other", 500, `{"region":"eu"}`}}
	if len(got) != len(want) {
		t.Fatalf("versions of u1 after reopen: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("version %d of u1: %v, want %v", i, got[i], want[i])
		}
	}
	if err := h.HistoryDrop(ctx, 1, "imp"); err != nil {
		t.Fatal(err)
	}
	if got := asOf(t, h, "imp", "", "u1", 1<<50); got != "none" {
		t.Errorf("after drop: %s", got)
	}
	if got := asOf(t, h, "other", "", "u1", 1<<50); got != `{"region":"eu"}` {
		t.Errorf("drop of one import removed another's versions: %s", got)
	}
}
