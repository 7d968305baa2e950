package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/internal/arrowmem"
)

// A batch ends at whichever limit comes first: enough rows to amortise
// the callback, few enough bytes that wide rows cannot balloon memory.
const (
	batchRows  = 8192
	batchBytes = 8 << 20
)

var dialect = connectors.Dialect{Placeholder: connectors.DollarPlaceholder}

// from renders the FROM clause of t. The query's own line keeps a
// trailing -- comment from swallowing the closing parenthesis.
func from(t connectors.Table) string {
	if t.Query != "" {
		return "(" + t.Query + "\n) AS q"
	}
	return connectors.QuoteTable(t.Name)
}

// Read streams req's rows as Arrow record batches.
//
// The statement runs through the extended protocol with binary results:
// the server streams DataRow messages as the executor produces them, pgx
// hands each row's raw bytes over without copying, and TCP flow control
// holds the server back while a batch is in fn, so neither side ever
// holds more than a batch and the socket buffers. Unlike COPY, this binds
// the watermark as parameters and works on servers without COPY TO
// STDOUT (Redshift).
func (s *Source) Read(ctx context.Context, req connectors.ReadRequest, fn func(arrow.RecordBatch) error) error {
	if err := req.Validate(); err != nil {
		return err
	}
	query, args := connectors.SelectSQL(dialect, from(req.Table), req)
	op := "read " + req.Table.String()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(ctx, op, err)
	}
	stopped := false
	defer func() { release(ctx, conn, stopped) }()
	if err := beginReadOnly(ctx, conn); err != nil {
		return classify(ctx, op, err)
	}
	// Rolled back even after a stop, so the backend is idle, not idle in
	// an aborted transaction, by the time release closes the connection.
	defer rollback(conn)
	pc := conn.Conn().PgConn()
	sd, err := pc.Prepare(ctx, "", query, nil)
	if err != nil {
		return classify(ctx, op, err)
	}
	cols := make([]column, len(sd.Fields))
	formats := make([]int16, len(sd.Fields))
	for i, f := range sd.Fields {
		cols[i] = newColumn(f.Name, f.DataTypeOID, f.TypeModifier)
		formats[i] = cols[i].format
	}
	params, paramFormats, err := encodeParams(conn.Conn().TypeMap(), sd.ParamOIDs, args)
	if err != nil {
		return err
	}

	// qctx is cancelled to stop the query early: pgx then sends the
	// server a cancel request and rr.Close drains until it is confirmed,
	// so no backend keeps running a query nobody reads.
	qctx, stop := context.WithCancel(ctx)
	defer stop()
	rr := pc.ExecStatement(qctx, sd, params, paramFormats, formats)
	done, err := stream(ctx, cols, rr, fn)
	if !done {
		stop()
		rr.Close()
		stopped = true
	}
	if err != nil {
		var fe fnError
		if errors.As(err, &fe) {
			return fe.err
		}
		return classify(ctx, op, err)
	}
	return nil
}

// release returns conn to the pool, unless a statement on it was
// cancelled: a cancel request may then still be on its way to the
// backend, and must not hit the next statement of whoever reuses it.
func release(ctx context.Context, conn *pgxpool.Conn, stopped bool) {
	if !stopped && ctx.Err() == nil {
		conn.Release()
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn.Hijack().Close(cctx)
}

// fnError carries the callback's own error out of stream unclassified.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// stream decodes rr's rows into batches for fn. done reports that the
// statement ran to its end (rr is closed); otherwise the caller must
// stop it.
func stream(ctx context.Context, cols []column, rr *pgconn.ResultReader, fn func(arrow.RecordBatch) error) (done bool, err error) {
	// Each batch is built on the buffers of the batches before it, which
	// fn has released (a batch is only valid during fn).
	rb := array.NewRecordBuilder(new(arrowmem.Pool), schema(cols))
	defer rb.Release()
	app := make([]appender, len(cols))
	for i := range cols {
		app[i] = bind(&cols[i], rb.Field(i))
	}
	hints := make([]sizeHint, len(cols))
	rows, size := 0, 0
	emit := func(last bool) error {
		for i := range hints {
			hints[i].record(rb.Field(i))
		}
		rec := rb.NewRecordBatch()
		defer rec.Release()
		if !last {
			// The next batch will likely be like this one: size the
			// builders once instead of growing them by doubling.
			for i := range hints {
				hints[i].apply(rb.Field(i))
			}
		}
		rows, size = 0, 0
		if err := fn(rec); err != nil {
			return fnError{err}
		}
		return ctx.Err()
	}
	for rr.NextRow() {
		vals := rr.Values()
		if len(vals) != len(app) {
			return false, fmt.Errorf("row of %d values for %d columns", len(vals), len(app))
		}
		for i, v := range vals {
			if err := app[i](v); err != nil {
				return false, err
			}
			size += len(v)
		}
		rows++
		if rows == batchRows || size >= batchBytes {
			if err := emit(false); err != nil {
				return false, err
			}
		}
	}
	// NextRow is false once the statement concluded, well or not; only
	// Close tells which, and a failed statement's last rows are not sent.
	if _, err := rr.Close(); err != nil {
		return true, err
	}
	if rows > 0 {
		return true, emit(true)
	}
	return true, ctx.Err()
}

// encodeParams encodes the watermark values for the parameter types the
// server inferred. Strings go as text so the server parses them for any
// column type, as pgx itself does; times are made UTC first because a
// timestamp without time zone holds UTC wall-clock time here.
func encodeParams(m *pgtype.Map, oids []uint32, args []any) ([][]byte, []int16, error) {
	if len(oids) != len(args) {
		return nil, nil, fmt.Errorf("%w: statement has %d parameters, %d values given", connectors.ErrBadRequest, len(oids), len(args))
	}
	vals := make([][]byte, len(args))
	formats := make([]int16, len(args))
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			a = t.UTC()
		}
		f := m.FormatCodeForOID(oids[i])
		if _, ok := a.(string); ok {
			f = pgtype.TextFormatCode
		}
		buf, err := m.Encode(oids[i], f, a, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: watermark value %v (%T): %v", connectors.ErrBadRequest, a, a, err)
		}
		if buf == nil {
			return nil, nil, fmt.Errorf("%w: watermark value %d is NULL", connectors.ErrBadRequest, i+1)
		}
		vals[i], formats[i] = buf, f
	}
	return vals, formats, nil
}

// sizeHint remembers how many values (and bytes of variable-width data,
// and list elements) a builder held in the last batch.
type sizeHint struct {
	n, data int
	elems   *sizeHint
}

func (h *sizeHint) record(b array.Builder) {
	h.n = b.Len()
	switch x := b.(type) {
	case *array.StringBuilder:
		h.data = x.DataLen()
	case *array.BinaryBuilder:
		h.data = x.DataLen()
	case *array.ListBuilder:
		if h.elems == nil {
			h.elems = &sizeHint{}
		}
		h.elems.record(x.ValueBuilder())
	}
}

func (h *sizeHint) apply(b array.Builder) {
	b.Reserve(h.n)
	switch x := b.(type) {
	case *array.StringBuilder:
		x.ReserveData(h.data)
	case *array.BinaryBuilder:
		x.ReserveData(h.data)
	case *array.ListBuilder:
		h.elems.apply(x.ValueBuilder())
	}
}

// Count implements connectors.Counter: the rows req selects, for an ETA.
func (s *Source) Count(ctx context.Context, req connectors.ReadRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	req.OrderBy = nil
	query, args := connectors.SelectSQL(dialect, from(req.Table), req)
	op := "count " + req.Table.String()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, classify(ctx, op, err)
	}
	defer release(ctx, conn, false)
	if err := beginReadOnly(ctx, conn); err != nil {
		return 0, classify(ctx, op, err)
	}
	defer rollback(conn)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM ("+query+") AS c", args...).Scan(&n); err != nil {
		return 0, classify(ctx, op, err)
	}
	return n, nil
}
