package duckstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
)

// A write is durable when Write returns; an event whose dedup key is
// already stored is counted as a duplicate and not stored again; a scan
// streams a project's events of a time range in time order.
func Example_writeScan() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "duckstore-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := duckstore.Open(ctx, filepath.Join(dir, "tributary.duckdb"), duckstore.Options{MemoryLimit: "256MB", Threads: 1})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	event := func(name, user string, timeMs int64, insertID string) store.Event {
		return store.Event{Name: name, DistinctID: user, TimeMs: timeMs, InsertID: insertID, Props: []byte(`{"plan":"pro"}`),
			Key: store.DedupKey(1, name, user, timeMs, insertID)}
	}
	signup := event("Signed up", "u1", 1_700_000_000_000, "a1")
	purchase := event("Purchase", "u1", 1_700_000_060_000, "a2")
	res, err := st.Write(ctx, []store.Batch{{Project: 1, Events: []store.Event{purchase, signup}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("inserted", res.Inserted, "duplicates", res.Duplicates)
	// The same purchase again, as a retrying client would send it.
	res, err = st.Write(ctx, []store.Batch{{Project: 1, Events: []store.Event{purchase}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("inserted", res.Inserted, "duplicates", res.Duplicates)

	err = st.ScanEvents(ctx, store.Scan{Project: 1, FromMs: 1_700_000_000_000, ToMs: 1_700_000_120_000}, func(e *store.Event) error {
		fmt.Println(e.TimeMs, e.Name, e.DistinctID, string(e.Props))
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// inserted 2 duplicates 0
	// inserted 0 duplicates 1
	// 1700000000000 Signed up u1 {"plan":"pro"}
	// 1700000060000 Purchase u1 {"plan":"pro"}
}
