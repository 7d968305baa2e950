package mapping_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/internal/config"
)

// The mapping engine turns an Arrow record batch into /import records
// (JSON objects) as an import file's column rules say: here the event
// name, time and user id come from columns, and every other column
// becomes a property. The derived $insert_id is a digest of the row's
// stable inputs, so a re-read row is deduplicated.
func Example() {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event_type", Type: arrow.BinaryTypes.String},
		{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "user_id", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"Signed up", "Purchase"}, nil)
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1_700_000_000_000_000, 1_700_000_060_000_000}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"u1", "u1"}, nil)
	b.Field(3).(*array.Float64Builder).AppendValues([]float64{0, 9.5}, []bool{false, true})
	rec := b.NewRecordBatch()
	defer rec.Release()

	im := &importspec.Import{ID: "app-events", ImportType: importspec.EventStream,
		EventColumnName: "event_type", TimeColumnName: "event_time", UserColumnName: "user_id"}
	cols := &connectors.Schema{}
	for _, f := range schema.Fields() {
		cols.Columns = append(cols.Columns, connectors.Column{Name: f.Name, Type: f.Type, Nullable: f.Nullable})
	}
	m, err := mapping.New(mapping.Options{Import: im, Project: importspec.Project{ID: 1, Mode: config.IDSimplified},
		RunID: "run-1", Schema: cols}, schema)
	if err != nil {
		panic(err)
	}
	var out mapping.Records
	m.Map(rec, &out)
	for i := 0; i < out.Len(); i++ {
		fmt.Println(string(out.Record(i)))
	}
	// The NULL amount is left out; the $warehouse_import properties name
	// the import and the run.

	// Output:
	// {"event":"Signed up","properties":{"time":1700000000000,"distinct_id":"u1","$insert_id":"595ed98f-63fe-bfe8-bc95-23e72668d50d","$user_id":"u1","$warehouse_import_id":"app-events","$warehouse_import_job_id":"run-1","$import":true,"$source":"warehouse-import"}}
	// {"event":"Purchase","properties":{"time":1700000060000,"distinct_id":"u1","$insert_id":"cbe4ad4a-1398-39d3-6c6a-3bd2ed073fcd","$user_id":"u1","amount":9.5,"$warehouse_import_id":"app-events","$warehouse_import_job_id":"run-1","$import":true,"$source":"warehouse-import"}}
}
