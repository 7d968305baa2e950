// Package bqread is test support: a BigQuery Storage Read API server over
// an in-memory DuckDB database.
//
// It speaks BigQuery's real Storage Read gRPC protocol
// (google.cloud.bigquery.storage.v1.BigQueryRead: CreateReadSession and
// ReadRows with Arrow IPC schema and record-batch messages), because the
// real service cannot run here and the emulator's Storage Read API is not
// usable with the current client (a session without read options crashes
// it; with options it frames each batch as a whole IPC stream). A
// connector under test therefore runs its real client library against it.
//
// What it honours, as BigQuery does: selected fields (sent in table order,
// whatever their order in the request), a row restriction (translated from
// GoogleSQL to DuckDB, see restriction.go), up to max_stream_count streams
// over disjoint row ranges, no streams for an empty table, ReadRows from an
// offset, and NOT_FOUND / INVALID_ARGUMENT errors. Tables live in DuckDB
// schemas named after their datasets; the project is not checked.
package bqread

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"github.com/tributary-dev/tributary/internal/duckarrow"
	"net"
	"strings"
	"sync"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server is one Storage Read API endpoint on 127.0.0.1.
type Server struct {
	storagepb.UnimplementedBigQueryReadServer

	// Resolve, when set, loads a table the database does not hold yet
	// (e.g. a query's result table, copied from the REST emulator).
	Resolve func(ctx context.Context, project, dataset, table string) error
	// Fault, when set, may fail a call with a gRPC status: method is
	// "CreateReadSession" or "ReadRows", sent the rows sent so far on this
	// ReadRows call (-1 before the first batch).
	Fault func(method, table string, sent int64) error
	// MinStreamRows is the fewest rows worth a stream of its own.
	MinStreamRows int64

	db  *sql.DB
	gs  *grpc.Server
	lis net.Listener

	mu      sync.Mutex
	streams map[string]*streamDef
	seq     int
}

type streamDef struct {
	table  string
	query  string
	schema *arrow.Schema
	head   int // length of the schema message at the start of a stream
}

// Start listens on a free local port and serves until Close.
func Start() (*Server, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	// TIMESTAMP columns then reach Arrow as timestamp[us, UTC], as from BigQuery.
	if _, err := db.Exec("SET GLOBAL TimeZone = 'UTC'"); err != nil {
		db.Close()
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Server{db: db, lis: lis, gs: grpc.NewServer(grpc.MaxSendMsgSize(128 << 20)),
		streams: map[string]*streamDef{}, MinStreamRows: 1024}
	storagepb.RegisterBigQueryReadServer(s.gs, s)
	go s.gs.Serve(lis)
	return s, nil
}

// Endpoint is the value for a connector's storage_endpoint (plain text).
func (s *Server) Endpoint() string { return "http://" + s.lis.Addr().String() }

// DB is the database the tables live in; a dataset is a schema.
func (s *Server) DB() *sql.DB { return s.db }

// Close stops serving (cancelling open streams) and drops every table.
func (s *Server) Close() {
	s.gs.Stop()
	s.db.Close()
}

func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Table is the DuckDB name of dataset.table.
func Table(dataset, table string) string { return ident(dataset) + "." + ident(table) }

func (s *Server) exists(ctx context.Context, dataset, table string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name = $2`, dataset, table).Scan(&n)
	return n > 0, err
}

// CreateReadSession plans the streams of a read.
func (s *Server) CreateReadSession(ctx context.Context, req *storagepb.CreateReadSessionRequest) (*storagepb.ReadSession, error) {
	rs := req.GetReadSession()
	if rs.GetDataFormat() != storagepb.DataFormat_ARROW {
		return nil, status.Error(codes.InvalidArgument, "this test server only sends ARROW")
	}
	parts := strings.Split(rs.GetTable(), "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "datasets" || parts[4] != "tables" {
		return nil, status.Errorf(codes.InvalidArgument, "invalid table name %q", rs.GetTable())
	}
	project, dataset, table := parts[1], parts[3], parts[5]
	if s.Fault != nil {
		if err := s.Fault("CreateReadSession", table, -1); err != nil {
			return nil, err
		}
	}
	ok, err := s.exists(ctx, dataset, table)
	if err == nil && !ok && s.Resolve != nil {
		if err = s.Resolve(ctx, project, dataset, table); err == nil {
			ok, err = s.exists(ctx, dataset, table)
		}
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "Not found: Table %s:%s.%s", project, dataset, table)
	}
	cols, err := s.columns(ctx, dataset, table, rs.GetReadOptions().GetSelectedFields())
	if err != nil {
		return nil, err
	}
	from := Table(dataset, table)
	where := "TRUE"
	if r := rs.GetReadOptions().GetRowRestriction(); r != "" {
		where = "(" + Restriction(r) + ")"
	}
	var total int64
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+from+" WHERE "+where).Scan(&total); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "row restriction %q: %v", rs.GetReadOptions().GetRowRestriction(), err)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+from).Scan(&total); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	query := "SELECT " + strings.Join(cols, ", ") + " FROM " + from + " WHERE " + where
	schema, head, err := s.schema(ctx, query+" AND FALSE")
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	n := int64(req.GetMaxStreamCount())
	if n <= 0 {
		n = 4
	}
	n = min(n, (total+s.MinStreamRows-1)/s.MinStreamRows)
	s.mu.Lock()
	s.seq++
	name := fmt.Sprintf("projects/%s/locations/us/sessions/s%d", project, s.seq)
	out := &storagepb.ReadSession{
		Name: name, Table: rs.GetTable(), DataFormat: storagepb.DataFormat_ARROW,
		Schema:            &storagepb.ReadSession_ArrowSchema{ArrowSchema: &storagepb.ArrowSchema{SerializedSchema: head}},
		ReadOptions:       rs.GetReadOptions(),
		EstimatedRowCount: total,
	}
	for i := int64(0); i < n; i++ {
		lo, hi := total*i/n, total*(i+1)/n
		sn := fmt.Sprintf("%s/streams/%d", name, i)
		// rowid numbers an append-only table's rows 0..n-1 in insertion
		// order, so ranges split it and one stream keeps the order.
		s.streams[sn] = &streamDef{table: table, schema: schema, head: len(head),
			query: fmt.Sprintf("%s AND rowid >= %d AND rowid < %d", query, lo, hi)}
		out.Streams = append(out.Streams, &storagepb.ReadStream{Name: sn})
	}
	s.mu.Unlock()
	return out, nil
}

// columns returns the quoted selected columns in table order.
func (s *Server) columns(ctx context.Context, dataset, table string, selected []string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, dataset, table)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, f := range selected {
		want[f] = true
	}
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if len(selected) == 0 || want[c] {
			cols = append(cols, ident(c))
			delete(want, c)
		}
	}
	for f := range want {
		return nil, status.Errorf(codes.InvalidArgument, "selected field %q is not in table %s", f, table)
	}
	return cols, rows.Err()
}

// schema runs query (which returns no rows) for its Arrow schema, and
// serialises the schema as the IPC message a session carries.
func (s *Server) schema(ctx context.Context, query string) (*arrow.Schema, []byte, error) {
	var schema *arrow.Schema
	err := s.arrow(ctx, query, func(rr array.RecordReader) error {
		schema = rr.Schema()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Close(); err != nil {
		return nil, nil, err
	}
	// Close wrote the schema and the 8-byte end-of-stream marker.
	return schema, buf.Bytes()[:buf.Len()-8], nil
}

// arrow runs query through DuckDB's Arrow interface on its own connection.
func (s *Server) arrow(ctx context.Context, query string, use func(array.RecordReader) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		ar, err := duckarrow.New(dc.(driver.Conn))
		if err != nil {
			return err
		}
		rr, err := ar.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rr.Release()
		return use(rr)
	})
}

// ReadRows streams one stream's rows from the requested offset.
func (s *Server) ReadRows(req *storagepb.ReadRowsRequest, stream storagepb.BigQueryRead_ReadRowsServer) error {
	s.mu.Lock()
	def := s.streams[req.GetReadStream()]
	s.mu.Unlock()
	if def == nil {
		return status.Errorf(codes.NotFound, "read stream %q not found", req.GetReadStream())
	}
	ctx := stream.Context()
	skip, sent := req.GetOffset(), int64(-1)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(def.schema))
	first := true
	err := s.arrow(ctx, def.query, func(rr array.RecordReader) error {
		for rr.Next() {
			rec := rr.RecordBatch()
			if skip >= rec.NumRows() {
				skip -= rec.NumRows()
				continue
			}
			if skip > 0 {
				rec = rec.NewSlice(skip, rec.NumRows())
				defer rec.Release()
				skip = 0
			}
			if s.Fault != nil {
				if err := s.Fault("ReadRows", def.table, sent); err != nil {
					return err
				}
			}
			buf.Reset()
			if err := w.Write(rec); err != nil {
				return err
			}
			b := buf.Bytes()
			if first {
				b, first = b[def.head:], false
			}
			resp := &storagepb.ReadRowsResponse{
				RowCount: rec.NumRows(),
				Rows: &storagepb.ReadRowsResponse_ArrowRecordBatch{ArrowRecordBatch: &storagepb.ArrowRecordBatch{
					SerializedRecordBatch: bytes.Clone(b), RowCount: rec.NumRows()}},
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
			sent = max(sent, 0) + rec.NumRows()
		}
		return rr.Err()
	})
	if _, ok := status.FromError(err); err != nil && !ok {
		return status.Error(codes.Internal, err.Error())
	}
	return err
}
