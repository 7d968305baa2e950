package mapping

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func eventsImport() *importspec.Import {
	return &importspec.Import{
		ID: "demo-events", ProjectID: 1, ImportType: importspec.EventStream, SyncMode: importspec.TimeBased,
		TableParams:     connTable("main.app_events"),
		EventColumnName: "event_type", TimeColumnName: "event_time",
		UserColumnName: "user_id", DeviceColumnName: "device_id",
		InsertTimeColumnName: "loaded_at", JSONPropertiesColumnName: "props",
		PropertyMappings: map[string]string{"amount_usd": "Amount"},
		ExcludeColumns:   []string{"internal_note"},
	}
}

// golden compares got with testdata/name (rewritten under -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// mapWide maps the wide test batch with opt, as run "run-1".
func mapWide(t *testing.T, opt Options) *Records {
	t.Helper()
	opt.RunID, opt.Schema = "run-1", wideConnSchema()
	m, err := New(opt, wideSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := buildWide(wideRows())
	defer rec.Release()
	var out Records
	m.Map(rec, &out)
	return &out
}

func mapAll(t *testing.T, im *importspec.Import, simplified bool) (*Records, []byte) {
	t.Helper()
	out := mapWide(t, Options{Import: im, Project: importspec.Project{ID: 1, Mode: modeOf(simplified)}})
	var nd bytes.Buffer
	for i := 0; i < out.Len(); i++ {
		r := out.Record(i)
		if !json.Valid(r) {
			t.Fatalf("record %d is not JSON: %s", i, r)
		}
		nd.Write(r)
		nd.WriteByte('\n')
	}
	for _, e := range out.Errs {
		fmt.Fprintf(&nd, "# row %d: %s: %s\n", e.Row, e.Column, e.Message)
	}
	return out, nd.Bytes()
}

func TestGoldenEvents(t *testing.T) {
	out, nd := mapAll(t, eventsImport(), true)
	golden(t, "events.ndjson", nd)
	// Every mapped record passes the /import validator.
	var v Validator
	var batch store.Batch
	errs := v.Events(1, t0.Add(time.Hour), out, 0, &batch)
	if len(errs) != len(out.Errs) {
		t.Fatalf("validator refused mapped records: %+v", errs[len(out.Errs):])
	}
	if len(batch.Events) != out.Len() {
		t.Fatalf("validated %d events of %d", len(batch.Events), out.Len())
	}
}

func TestGoldenEventsOriginalIDMerge(t *testing.T) {
	im := eventsImport()
	im.UserColumnName, im.DeviceColumnName, im.DistinctIDColumnName = "", "", "user_id"
	im.EventColumnName, im.EventName = "", "App Event"
	_, nd := mapAll(t, im, false)
	golden(t, "events_original.ndjson", nd)
}

func TestGoldenProfiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		im   *importspec.Import
	}{
		{"people.ndjson", &importspec.Import{ID: "users", ImportType: importspec.People, UserColumnName: "user_id",
			ExcludeColumns: []string{"internal_note", "props"}}},
		{"groups.ndjson", &importspec.Import{ID: "companies", ImportType: importspec.Groups, GroupKey: "company_id",
			GroupIDColumn: "device_id"}},
		{"lookup.ndjson", &importspec.Import{ID: "items", ImportType: importspec.LookupTable, LookupTableID: "items",
			PropertyKeyColumnName: "id", JSONPropertiesColumnName: "props"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, nd := mapAll(t, tc.im, true)
			golden(t, tc.file, nd)
		})
	}
}

// With CommonTags the run's tags leave the records for Records.Common, and
// the validated events with the common properties spliced back are exactly
// those of the plain mapping.
func TestCommonTags(t *testing.T) {
	validate := func(common bool) ([]store.Event, []byte) {
		out := mapWide(t, Options{Import: eventsImport(), Project: importspec.Project{ID: 1, Mode: config.IDSimplified}, CommonTags: common})
		var v Validator
		var batch store.Batch
		if errs := v.Events(1, t0.Add(time.Hour), out, 0, &batch); len(errs) != len(out.Errs) {
			t.Fatalf("validator refused mapped records: %+v", errs[len(out.Errs):])
		}
		return batch.Events, batch.Common
	}
	plain, none := validate(false)
	split, common := validate(true)
	if none != nil || string(common) != `{"$warehouse_import_id":"demo-events","$warehouse_import_job_id":"run-1","$import":true,"$source":"warehouse-import"}` {
		t.Fatalf("common properties: %s without CommonTags, %s with", none, common)
	}
	if len(plain) != len(split) || len(plain) == 0 {
		t.Fatalf("%d events without CommonTags, %d with", len(plain), len(split))
	}
	for i := range plain {
		p, s := plain[i], split[i]
		if got := store.SpliceProps(nil, s.Props, common); string(got) != string(p.Props) || bytes.Contains(s.Props, []byte(`"$import"`)) {
			t.Fatalf("event %d: props %s spliced to %s, want %s", i, s.Props, got, p.Props)
		}
		if s.Key != p.Key || s.InsertID != p.InsertID || s.Name != p.Name || s.DistinctID != p.DistinctID || s.TimeMs != p.TimeMs {
			t.Fatalf("event %d differs beyond its props: %+v vs %+v", i, s, p)
		}
	}
}

// modeOf is the ID management a table-driven case's simplified flag names.
func modeOf(simplified bool) config.IDManagement {
	if simplified {
		return config.IDSimplified
	}
	return config.IDOriginal
}
