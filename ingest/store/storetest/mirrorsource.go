package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// testMirrorSources: Mirror imports' sources are noted (the last note
// wins), listed in order, survive a reopen and are forgotten one by one.
func testMirrorSources(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	ms, ok := hd.s.(store.MirrorSources)
	if !ok {
		t.Fatalf("%T does not implement store.MirrorSources", hd.s)
	}
	for _, s := range []store.MirrorSource{
		{Project: 2, Import: "a", Source: []byte(`{"connection":"wh"}`)},
		{Project: 1, Import: "b", Source: []byte(`{"old":true}`)},
		{Project: 1, Import: "b", Source: []byte(`{"connection":"wh2"}`)},
		{Project: 1, Import: "a", Source: []byte(`{}`)},
	} {
		if err := ms.MirrorNoteSource(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	hd.reopen(t)
	ms = hd.s.(store.MirrorSources)
	if err := ms.MirrorForgetSource(ctx, 1, "a"); err != nil {
		t.Fatal(err)
	}
	if err := ms.MirrorForgetSource(ctx, 9, "none"); err != nil {
		t.Fatal(err)
	}
	got, err := ms.MirrorSources(ctx)
	want := []store.MirrorSource{{Project: 1, Import: "b", Source: []byte(`{"connection":"wh2"}`)}, {Project: 2, Import: "a", Source: []byte(`{"connection":"wh"}`)}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("sources %+v, %v; want %+v", got, err, want)
	}
}
