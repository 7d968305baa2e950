package mapping

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// benchSchema is the 12-column table: string, int, float, bool,
// timestamp, date, decimal, JSON, STRUCT, list and a NULL-heavy column,
// plus the user id.
var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "event_type", Type: arrow.BinaryTypes.String},
	{Name: "user_id", Type: arrow.BinaryTypes.String},
	{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int64},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	{Name: "active", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32},
	{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}},
	{Name: "props", Type: arrow.BinaryTypes.String},
	{Name: "shipping", Type: arrow.StructOf(
		arrow.Field{Name: "city", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "zip", Type: arrow.PrimitiveTypes.Int32})},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	{Name: "coupon", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func benchBatch(n int, seed int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer b.Release()
	events := []string{"Page View", "Add To Cart", "Purchase", "Sign Up"}
	cities := []string{"Berlin", "Zürich", "São Paulo", "Oslo"}
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := 0; i < n; i++ {
		k := seed*int64(n) + int64(i)
		b.Field(0).(*array.StringBuilder).Append(events[k%4])
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("user-%d", k%100_000))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(base + k*1_000_003))
		b.Field(3).(*array.Int64Builder).Append(k % 17)
		b.Field(4).(*array.Float64Builder).Append(float64(k%1000) / 7)
		b.Field(5).(*array.BooleanBuilder).Append(k%3 == 0)
		b.Field(6).(*array.Date32Builder).Append(arrow.Date32(20300 + k%60))
		b.Field(7).(*array.Decimal128Builder).Append(decimal128.FromI64(k % 100_000))
		b.Field(8).(*array.StringBuilder).Append(fmt.Sprintf(`{"plan":"pro","page":{"path":"/p/%d","ref":"search"},"n":%d}`, k%50, k%9))
		sb := b.Field(9).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(cities[k%4])
		sb.FieldBuilder(1).(*array.Int32Builder).Append(int32(10000 + k%90000))
		lb := b.Field(10).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("a")
		lb.ValueBuilder().(*array.StringBuilder).Append("b")
		if k%10 == 0 {
			b.Field(11).(*array.StringBuilder).Append("SAVE10")
		} else {
			b.Field(11).AppendNull()
		}
	}
	return b.NewRecordBatch()
}

func benchMapper(b testing.TB) *Mapper {
	im := &importspec.Import{ID: "bench", ImportType: importspec.EventStream, EventColumnName: "event_type",
		TimeColumnName: "event_time", UserColumnName: "user_id", JSONPropertiesColumnName: "props"}
	cs := &connectors.Schema{}
	for _, f := range benchSchema.Fields() {
		st := "VARCHAR"
		if f.Name == "props" {
			st = "JSON"
		}
		cs.Columns = append(cs.Columns, connectors.Column{Name: f.Name, Type: f.Type, SourceType: st})
	}
	m, err := New(Options{Import: im, Project: importspec.Project{ID: 1, Mode: config.IDSimplified}, RunID: "run", Schema: cs}, benchSchema)
	if err != nil {
		panic(err) // a fixed schema: cannot fail
	}
	return m
}

// BenchmarkMap is the mapping engine alone: Arrow batch in, records out.
func BenchmarkMap(b *testing.B) {
	const rows = 8192
	rec := benchBatch(rows, 0)
	defer rec.Release()
	m := benchMapper(b)
	var out Records
	m.Map(rec, &out) // warm the buffers
	b.ResetTimer()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		out.Reset()
		m.Map(rec, &out)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	report(b, rows, out.Len())
	reportCPU(b, rows, cpu)
}

// BenchmarkMapValidate adds the /import validator every record passes:
// its one-pass path for the mapper's canonical records trusting the
// mapper's vouching (what a sync runs), the same reading each record in
// full (unvouched), and (general) the parse-and-re-encode path every other
// record takes.
func BenchmarkMapValidate(b *testing.B) {
	b.Run("vouched", func(b *testing.B) { benchMapValidate(b, Validator{}) })
	b.Run("unvouched", func(b *testing.B) { benchMapValidate(b, Validator{unvouched: true}) })
	b.Run("general", func(b *testing.B) { benchMapValidate(b, Validator{general: true}) })
}

func benchMapValidate(b *testing.B, v Validator) {
	const rows = 8192
	rec := benchBatch(rows, 0)
	defer rec.Release()
	m := benchMapper(b)
	var out Records
	var batch store.Batch
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	b.ResetTimer()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		out.Reset()
		batch.Events = batch.Events[:0]
		m.Map(rec, &out)
		if errs := v.Events(1, now, &out, 0, &batch); len(errs) > 0 {
			b.Fatal(errs[0])
		}
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	report(b, rows, out.Len())
	reportCPU(b, rows, cpu)
}

func report(b *testing.B, rows, mapped int) {
	if mapped != rows {
		b.Fatalf("mapped %d of %d rows", mapped, rows)
	}
	total := float64(b.N) * float64(rows)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/row")
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the process's user+system CPU time. The wall-clock figures
// above swing with whatever else the (shared) machine runs; CPU time per
// row is the steadier yardstick. It includes the GC's background work.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, rows int, cpu time.Duration) {
	if cpu <= 0 {
		return
	}
	total := float64(b.N) * float64(rows)
	b.ReportMetric(float64(cpu.Nanoseconds())/total, "cpu-ns/row")
	b.ReportMetric(total/cpu.Seconds(), "rows/cpu-s")
}
