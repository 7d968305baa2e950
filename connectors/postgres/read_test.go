package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// TestWatermarkTypes pages by (timestamptz, text) and by (numeric), with
// watermark values of the Go types a sync persists, strings included.
func TestWatermarkTypes(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	db.exec(t, `CREATE TABLE ev (at timestamptz NOT NULL, k text NOT NULL, n numeric(8,2) NOT NULL, d date NOT NULL)`)
	db.exec(t, `INSERT INTO ev SELECT TIMESTAMPTZ '2026-01-01 00:00:00+00' + (i / 3) * INTERVAL '1 hour',
		'k' || (i % 3), i / 2.0, DATE '2026-01-01' + i / 5 FROM generate_series(0, 29) AS g(i)`)
	ctx := context.Background()
	read := func(w *connectors.Watermark, order ...string) [][]any {
		_, rows, err := sourcetest.Rows(ctx, src, connectors.ReadRequest{Table: connectors.Table{Name: "ev"},
			Columns: order, After: w, OrderBy: order})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	at := time.Date(2026, 1, 1, 4, 0, 0, 0, time.UTC)
	ist := time.FixedZone("IST", 5*3600+1800)
	cases := []struct {
		name  string
		w     *connectors.Watermark
		order []string
		want  int
	}{
		{"time.Time and string", &connectors.Watermark{Columns: []string{"at", "k"}, Values: []any{at, "k1"}}, []string{"at", "k"}, 30 - 12 - 2},
		{"time in another zone", &connectors.Watermark{Columns: []string{"at", "k"}, Values: []any{at.In(ist), "k1"}}, []string{"at", "k"}, 30 - 12 - 2},
		{"timestamp as text", &connectors.Watermark{Columns: []string{"at"}, Values: []any{"2026-01-01 09:30:00+05:30"}}, []string{"at"}, 30 - 15},
		{"numeric from float64", &connectors.Watermark{Columns: []string{"n"}, Values: []any{7.5}}, []string{"n"}, 30 - 16},
		{"numeric from int64", &connectors.Watermark{Columns: []string{"n"}, Values: []any{int64(7)}}, []string{"n"}, 30 - 15},
		{"date as text", &connectors.Watermark{Columns: []string{"d"}, Values: []any{"2026-01-03"}}, []string{"d"}, 30 - 15},
	}
	for _, c := range cases {
		if got := read(c.w, c.order...); len(got) != c.want {
			t.Errorf("%s: %d rows after %v, want %d", c.name, len(got), c.w.Values, c.want)
		}
	}
	err := src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Name: "ev"},
		After: &connectors.Watermark{Columns: []string{"at"}, Values: []any{"not a time"}}}, nil)
	if !connectors.IsPermanent(err) {
		t.Errorf("unparsable watermark: %v, want a permanent error", err)
	}
}

// TestBatchBounds checks both batch limits: rows, and bytes for wide rows.
func TestBatchBounds(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	db.exec(t, `CREATE TABLE narrow AS SELECT i FROM generate_series(1, 20000) AS g(i)`)
	db.exec(t, `CREATE TABLE wide AS SELECT i, repeat('x', 1 << 20) AS blob FROM generate_series(1, 20) AS g(i)`)
	sizes := func(table string) []int64 {
		var out []int64
		err := src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: table}}, func(rec arrow.RecordBatch) error {
			out = append(out, rec.NumRows())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := sizes("narrow"); !reflect.DeepEqual(got, []int64{8192, 8192, 3616}) {
		t.Errorf("narrow batches %v, want 8192, 8192, 3616", got)
	}
	if got := sizes("wide"); !reflect.DeepEqual(got, []int64{8, 8, 4}) {
		t.Errorf("1 MB rows: batches %v, want 8, 8, 4 (8 MB each)", got)
	}
}

// TestCancelServerSide cancels while the server is still computing, before
// any row is sent: only a cancel request can stop that, closing the
// socket would leave the backend running until it next writes.
func TestCancelServerSide(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	for _, stopBy := range []string{"context", "callback"} {
		ctx, cancel := context.WithCancel(context.Background())
		query := "SELECT pg_sleep(30) AS s"
		fn := func(arrow.RecordBatch) error { return nil }
		if stopBy == "callback" {
			// Rows flow, the callback gives up on the first batch, and the
			// server is about to sleep before row 9000.
			query = "SELECT i, pg_sleep(CASE WHEN i = 9000 THEN 30 ELSE 0 END) FROM generate_series(1, 10000) AS g(i)"
			fn = func(arrow.RecordBatch) error { return errors.New("enough") }
		} else {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
		start := time.Now()
		err := src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Query: query}}, fn)
		took := time.Since(start)
		cancel()
		if err == nil || (stopBy == "context" && !errors.Is(err, context.Canceled)) {
			t.Errorf("%s: err %v", stopBy, err)
		}
		if took > 5*time.Second {
			t.Errorf("%s: cancelled read took %v", stopBy, took)
		}
		if qs := db.activeQueries(t); len(qs) > 0 {
			t.Errorf("%s: still running after Read returned: %q", stopBy, qs)
		}
	}
	// The pool is still usable.
	if _, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: connectors.Table{Query: "SELECT 1 AS one"}}); err != nil || len(rows) != 1 {
		t.Fatalf("read after cancels: %v %v", rows, err)
	}
}

// TestConcurrentReads shares one source between goroutines.
func TestConcurrentReads(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	db.exec(t, `CREATE TABLE s AS SELECT i::bigint AS id, md5(i::text) AS h FROM generate_series(1, 50000) AS g(i)`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			err := src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: "s"}}, func(rec arrow.RecordBatch) error {
				n += rec.NumRows()
				return nil
			})
			if err == nil && n != 50000 {
				err = fmt.Errorf("read %d rows, want 50000", n)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
