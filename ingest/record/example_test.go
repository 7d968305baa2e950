package record_test

import (
	"fmt"
	"time"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

func Example_splitDecode() {
	body := []byte(`[
	  {"event":"Signed Up","properties":{"time":1748736000,"distinct_id":"u1","$insert_id":"a-1","plan":"pro"}},
	  {"event":"Signed Up","properties":{"time":"yesterday","distinct_id":"u2","$insert_id":"a-2"}}
	]`)
	recs, err := record.Split(body, false, record.DefaultLimits(), nil)
	if err != nil {
		fmt.Println(err) // the HTTP layer answers 400 or 413
		return
	}
	var d record.Decoder // usually taken from a sync.Pool
	var batch store.Batch
	fails := d.Decode(record.Options{
		Project: 7,
		Strict:  true,
		Now:     time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC),
	}, recs, &batch)
	for _, e := range batch.Events {
		fmt.Println(e.Name, e.DistinctID, e.TimeMs, e.InsertID, string(e.Props))
	}
	for _, f := range fails {
		fmt.Println(f.Index, f.InsertID, f.Field, f.Message)
	}
	// Output:
	// Signed Up u1 1748736000000 a-1 {"plan":"pro"}
	// 1 a-2 properties.time 'properties.time' is invalid: must be specified as seconds since epoch
}
