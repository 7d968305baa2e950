package mapping

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/internal/config"
)

// TestJSONColumnNotObject: a JSON column (not the JSON-properties one)
// whose value is not an object keeps its text under the column's name;
// an object is flattened. Rows differing only there stay distinct events
// (their derived $insert_ids differ). A table column renamed to the JSON
// column's name wins, as it does against names read from rows.
func TestJSONColumnNotObject(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event_type", Type: arrow.BinaryTypes.String},
		{Name: "event_time", Type: arrow.PrimitiveTypes.Int64},
		{Name: "user_id", Type: arrow.BinaryTypes.String},
		{Name: "meta", Type: arrow.BinaryTypes.String},
		{Name: "note", Type: arrow.BinaryTypes.String},
	}, nil)
	conn := &connectors.Schema{}
	for _, f := range schema.Fields() {
		st := "TEXT"
		if f.Name == "meta" {
			st = "JSONB"
		}
		conn.Columns = append(conn.Columns, connectors.Column{Name: f.Name, Type: f.Type, SourceType: st})
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	metas := []string{`"hello"`, `[1,2]`, `{"a":1}`, `7`}
	for _, v := range metas {
		b.Field(0).(*array.StringBuilder).Append("E")
		b.Field(1).(*array.Int64Builder).Append(1_700_000_000_000)
		b.Field(2).(*array.StringBuilder).Append("u1")
		b.Field(3).(*array.StringBuilder).Append(v)
		b.Field(4).(*array.StringBuilder).Append("n")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	im := &importspec.Import{ID: "x", ProjectID: 1, ImportType: importspec.EventStream, SyncMode: importspec.FullSync,
		TableParams: connTable("t"), EventColumnName: "event_type", TimeColumnName: "event_time", UserColumnName: "user_id"}
	m, err := New(Options{Import: im, Project: importspec.Project{ID: 1, Mode: config.IDSimplified}, RunID: "r", Schema: conn, CommonTags: true}, schema)
	if err != nil {
		t.Fatal(err)
	}
	var out Records
	m.Map(rec, &out)
	want := []string{`"meta":"\"hello\""`, `"meta":"[1,2]"`, `"meta.a":1`, `"meta":"7"`}
	ids := map[string]bool{}
	for i := range out.Len() {
		r := string(out.Record(i))
		if !strings.Contains(r, want[i]) {
			t.Errorf("row %d: %s lacks %s", i, r, want[i])
		}
		ids[string(out.Key(i))] = true
	}
	if len(out.Errs) != 0 || len(ids) != len(metas) {
		t.Errorf("errors %v; %d distinct insert ids for %d rows", out.Errs, len(ids), len(metas))
	}

	im.PropertyMappings = map[string]string{"note": "meta"}
	m, err = New(Options{Import: im, Project: importspec.Project{ID: 1, Mode: config.IDSimplified}, RunID: "r", Schema: conn, CommonTags: true}, schema)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	m.Map(rec, &out)
	if r := string(out.Record(0)); strings.Count(r, `"meta":`) != 1 || !strings.Contains(r, `"meta":"n"`) {
		t.Errorf("a column renamed to meta must win once: %s", r)
	}
}
