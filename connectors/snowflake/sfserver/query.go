package sfserver

import (
	"compress/gzip"
	"context"
	"database/sql/driver"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tributary-dev/tributary/internal/duckarrow"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// sfError is a failed statement as Snowflake reports it.
type sfError struct{ code, state, msg string }

func (e *sfError) Error() string { return e.code + ": " + e.msg }

type bindParam struct {
	Type  string  `json:"type"`
	Value *string `json:"value"`
}

type execRequest struct {
	SQLText      string               `json:"sqlText"`
	DescribeOnly bool                 `json:"describeOnly"`
	Bindings     map[string]bindParam `json:"bindings"`
	Parameters   map[string]any       `json:"parameters"`
}

// query is one statement, from request to its result table.
type query struct {
	id, requestID string
	sess          *session
	sql           string
	args          []any
	describeOnly  bool
	remaining     int // "still running" answers left
	aborted       bool
	resp          map[string]any // the final answer, once run
	cols          []resultCol
	total         int64
	qrmk          string
}

func (q *query) resultTable() string { return "memory.results." + quote("r_"+q.id) }

func (s *Server) queryRequest(w http.ResponseWriter, r *http.Request, se *session) {
	var req execRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.stats.Queries++
	s.seq++
	q := &query{id: fmt.Sprintf("01b2c3d4-0000-%04x-0000-%012x", se.id, s.seq), requestID: r.URL.Query().Get("requestId"),
		sess: se, sql: strings.TrimSpace(req.SQLText), describeOnly: req.DescribeOnly, qrmk: s.newToken()}
	s.queries[q.id], s.byReq[q.requestID] = q, q
	se.results = append(se.results, q.id)
	if isSelect(q.sql) && !q.describeOnly {
		q.remaining = s.polls
	}
	s.mu.Unlock()
	args, err := bindArgs(req.Bindings)
	if err != nil {
		writeJSON(w, errorResponse(q, &sfError{"002049", "22000", "SQL compilation error: " + err.Error()}))
		return
	}
	if err := s.checkStatementCount(r.Context(), q.sql, req.Parameters); err != nil {
		writeJSON(w, errorResponse(q, err))
		return
	}
	q.args = args
	if q.remaining > 0 {
		writeJSON(w, running(q))
		return
	}
	writeJSON(w, s.finish(r.Context(), q))
}

// checkStatementCount does what Snowflake does with MULTI_STATEMENT_COUNT
// (the request's parameter, else the account's: 1, or 0 with
// Config.AnyStatementCount; 0 allows any number): a request with another
// number of statements fails before any of them runs.
func (s *Server) checkStatementCount(ctx context.Context, sql string, params map[string]any) *sfError {
	want := 1
	if s.cfg.AnyStatementCount {
		want = 0
	}
	if v, ok := params["MULTI_STATEMENT_COUNT"]; ok {
		switch n := v.(type) {
		case float64:
			want = int(n)
		case string:
			want, _ = strconv.Atoi(n)
		}
	}
	if want == 0 {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return &sfError{"000603", "XX000", err.Error()}
	}
	defer conn.Close()
	several := false
	_ = conn.Raw(func(dc any) error {
		// DuckDB's parser refuses to prepare several statements at once
		// and runs none of them; any other error is the statement's own,
		// reported when it runs.
		st, err := dc.(driver.Conn).Prepare(sql)
		if err == nil {
			st.Close()
		}
		several = err != nil && strings.Contains(err.Error(), "multi-statement")
		return nil
	})
	if several == (want == 1) {
		got := "1"
		if several {
			got = "more than 1"
		}
		return &sfError{"000008", "0A000", fmt.Sprintf("Actual statement count %s did not match the desired statement count %d.", got, want)}
	}
	return nil
}

func running(q *query) map[string]any {
	return map[string]any{"code": "333333", "message": "Query execution in progress.", "success": true,
		"data": map[string]any{"queryId": q.id, "getResultUrl": "/queries/" + q.id + "/result", "progressDesc": nil, "queryAbortsAfterSecs": 300}}
}

// result answers the driver's polls of a statement still running.
func (s *Server) result(w http.ResponseWriter, r *http.Request, _ *session) {
	s.mu.Lock()
	q, known := s.queries[r.PathValue("id")]
	s.mu.Unlock()
	if !known {
		writeJSON(w, map[string]any{"code": "000709", "message": "Statement not found.", "success": false})
		return
	}
	s.mu.Lock()
	if q.remaining > 0 && !q.aborted {
		q.remaining--
		s.stats.Polls++
		s.mu.Unlock()
		select {
		case <-time.After(pollWait):
		case <-r.Context().Done():
			return
		}
		writeJSON(w, running(q))
		return
	}
	s.mu.Unlock()
	writeJSON(w, s.finish(r.Context(), q))
}

func (s *Server) monitor(w http.ResponseWriter, r *http.Request, _ *session) {
	s.mu.Lock()
	q, known := s.queries[r.PathValue("id")]
	status := "RUNNING"
	switch {
	case !known:
		status = "FAILED_WITH_ERROR"
	case q.aborted:
		status = "ABORTED"
	case q.resp != nil:
		status = "SUCCESS"
	}
	s.mu.Unlock()
	ok(w, map[string]any{"queries": []map[string]any{{"id": r.PathValue("id"), "status": status}}})
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request, _ *session) {
	var body struct {
		RequestID string `json:"requestId"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	q, known := s.byReq[body.RequestID]
	running := known && q.resp == nil && !q.aborted
	if running {
		q.aborted = true
		s.stats.Aborts++
	}
	s.mu.Unlock()
	if !running {
		writeJSON(w, map[string]any{"code": "000605", "message": "Identified SQL statement is not currently executing.", "success": false})
		return
	}
	ok(w, nil)
}

// finish runs q once and returns its final answer.
func (s *Server) finish(ctx context.Context, q *query) map[string]any {
	s.mu.Lock()
	if q.resp != nil || q.aborted {
		defer s.mu.Unlock()
		if q.aborted {
			return errorResponse(q, &sfError{"000604", "57014", "SQL execution canceled"})
		}
		return q.resp
	}
	s.mu.Unlock()
	resp, err := s.run(ctx, q)
	if err != nil {
		var se *sfError
		if !errors.As(err, &se) {
			se = duckError(err)
		}
		resp = errorResponse(q, se)
	}
	s.mu.Lock()
	q.resp = resp
	s.mu.Unlock()
	return resp
}

func errorResponse(q *query, e *sfError) map[string]any {
	return map[string]any{"code": e.code, "message": e.msg, "success": false,
		"data": map[string]any{"queryId": q.id, "sqlState": e.state, "errorCode": e.code, "internalError": false}}
}

// duckError maps DuckDB's error classes to the Snowflake errors the same
// mistakes produce.
func duckError(err error) *sfError {
	var de *duckdb.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdb.ErrorTypeCatalog:
			if strings.Contains(de.Msg, "Table with name") {
				return &sfError{"002003", "42S02", "SQL compilation error: Object does not exist or not authorized: " + de.Msg}
			}
			return &sfError{"000904", "42000", "SQL compilation error: invalid identifier: " + de.Msg}
		case duckdb.ErrorTypeBinder:
			return &sfError{"000904", "42000", "SQL compilation error: invalid identifier: " + de.Msg}
		case duckdb.ErrorTypeParser:
			return &sfError{"001003", "42000", "SQL compilation error: syntax error: " + de.Msg}
		case duckdb.ErrorTypeConversion, duckdb.ErrorTypeInvalidInput:
			return &sfError{"100038", "22018", "Numeric value is not recognized: " + de.Msg}
		}
	}
	return &sfError{"000603", "XX000", "SQL execution internal error: " + err.Error()}
}

var (
	fromRE     = regexp.MustCompile(`(?is)\bFROM\s+((?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)){0,2})`)
	describeRE = regexp.MustCompile(`(?is)^(?:DESCRIBE|DESC)\s+(?:TABLE|VIEW)\s+(.+?)\s*;?$`)
	showPKRE   = regexp.MustCompile(`(?is)^SHOW\s+PRIMARY\s+KEYS\s+IN\s+TABLE\s+(.+?)\s*;?$`)
)

func isSelect(sql string) bool {
	u := strings.ToUpper(sql)
	return strings.HasPrefix(u, "SELECT") || strings.HasPrefix(u, "WITH") || strings.HasPrefix(u, "(")
}

// run executes q: catalog commands from the catalog, anything else in
// DuckDB into a result table that chunks are then cut from.
func (s *Server) run(ctx context.Context, q *query) (map[string]any, error) {
	if m := describeRE.FindStringSubmatch(q.sql); m != nil {
		return s.describeTable(q, m[1])
	}
	if m := showPKRE.FindStringSubmatch(q.sql); m != nil {
		return s.showPrimaryKeys(q, m[1])
	}
	if m := showTablesRE.FindStringSubmatch(q.sql); m != nil {
		return s.showTables(q, m[1], m[2])
	}
	if m := alterTableRE.FindStringSubmatch(q.sql); m != nil {
		return s.alterTable(ctx, q, m[1], m[2], m[3])
	}
	if strings.HasPrefix(strings.ToUpper(q.sql), "ALTER SESSION") {
		return jsonResult(q, nil, nil), nil
	}
	if !isSelect(q.sql) {
		return nil, &sfError{"001003", "42000", "SQL compilation error: unsupported statement for sfserver"}
	}
	// A CHANGES clause is answered from the table's change log
	// (changes.go) and the statement rewritten to read that.
	stmt, base, err := s.changesQuery(ctx, q)
	if err != nil {
		return nil, err
	}
	changes := base != nil
	for _, m := range fromRE.FindAllStringSubmatch(stmt, -1) {
		if changes {
			break // the delta table is not in the catalog
		}
		t, err := s.lookup(q.sess, m[1])
		if err != nil {
			return nil, err
		}
		if base == nil {
			base = t
		}
	}
	if q.describeOnly {
		stmt = "SELECT * FROM (" + stmt + ") AS d LIMIT 0"
	}
	err = s.materialize(ctx, q, stmt)
	if changes {
		_, _ = s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+deltaTable(q))
	}
	if err != nil {
		return nil, err
	}
	var fields []arrow.Field
	err = s.arrowQuery(ctx, "SELECT * FROM "+q.resultTable()+" LIMIT 0", nil, func(rr array.RecordReader) error {
		fields = rr.Schema().Fields()
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		c := resultCol{name: f.Name, t: inferType(f.Type), nullable: true}
		if base != nil {
			if i, ok := base.column(f.Name); ok && typeMatches(base.types[i], f.Type) {
				c.t, c.nullable, c.table = base.types[i], !base.cols[i].NotNull, base
				// A CHANGES query's deletes may null any column.
				c.nullable = c.nullable || changes
			}
		}
		q.cols = append(q.cols, c)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+q.resultTable()).Scan(&q.total); err != nil {
		return nil, err
	}
	inline := min(q.total, int64(s.cfg.InlineRows))
	data := map[string]any{"queryId": q.id, "queryResultFormat": "arrow", "total": q.total, "returned": q.total,
		"rowtype": rowTypes(q.cols), "parameters": []any{}, "statementTypeId": 4096,
		"finalDatabaseName": q.sess.database, "finalSchemaName": q.sess.schema}
	if inline > 0 {
		b, err := s.encodeRange(ctx, q, 0, inline)
		if err != nil {
			return nil, err
		}
		data["rowsetBase64"] = base64.StdEncoding.EncodeToString(b)
	}
	var chunks []map[string]any
	for off, n := inline, 0; off < q.total; off, n = off+int64(s.cfg.ChunkRows), n+1 {
		rows := min(q.total-off, int64(s.cfg.ChunkRows))
		chunks = append(chunks, map[string]any{"url": fmt.Sprintf("%s/chunks/%s/%d", s.http.URL, q.id, n),
			"rowCount": rows, "uncompressedSize": rows * 64, "compressedSize": rows * 16})
	}
	if len(chunks) > 0 {
		data["chunks"], data["qrmk"] = chunks, q.qrmk
	}
	return map[string]any{"data": data, "code": nil, "message": nil, "success": true}, nil
}

// materialize runs stmt in the session's database and schema, so
// unqualified names resolve as in Snowflake, into q's result table.
func (s *Server) materialize(ctx context.Context, q *query, stmt string) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "USE "+quote(q.sess.database)+"."+quote(q.sess.schema)); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "CREATE TABLE "+q.resultTable()+" AS "+stmt, q.args...)
	return err
}

// typeMatches tells whether DuckDB's result type is still the stored
// column's (a CAST in the query makes it a computed column).
func typeMatches(t sfType, dt arrow.DataType) bool {
	return inferType(dt).name == t.name || (t.name == "timestamp_tz" && dt.ID() == arrow.TIMESTAMP) ||
		(t.name != "fixed" && t.name != "real" && inferType(dt).name == "text" && dt.ID() == arrow.STRING)
}

func rowTypes(cols []resultCol) []map[string]any {
	out := make([]map[string]any, len(cols))
	for i, c := range cols {
		out[i] = c.rowType()
	}
	return out
}

// chunk serves one result chunk, gzipped like Snowflake's stage files.
func (s *Server) chunk(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	q, known := s.queries[r.PathValue("id")]
	s.mu.Unlock()
	n, err := strconv.Atoi(r.PathValue("n"))
	if !known || err != nil || r.Header.Get("x-amz-server-side-encryption-customer-key") != q.qrmk {
		http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
		return
	}
	from := int64(min(q.total, int64(s.cfg.InlineRows))) + int64(n)*int64(s.cfg.ChunkRows)
	b, err := s.encodeRange(r.Context(), q, from, min(q.total, from+int64(s.cfg.ChunkRows)))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.stats.Chunks++
	s.mu.Unlock()
	if s.cfg.PlainChunks {
		_, _ = w.Write(b)
		return
	}
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	_, _ = zw.Write(b)
	_ = zw.Close()
}

// encodeRange encodes result rows [from, to) in the wire format.
func (s *Server) encodeRange(ctx context.Context, q *query, from, to int64) ([]byte, error) {
	var out []byte
	err := s.arrowQuery(ctx, "SELECT * FROM "+q.resultTable()+" WHERE rowid >= ? AND rowid < ? ORDER BY rowid", []any{from, to},
		func(rr array.RecordReader) error {
			var recs []arrow.RecordBatch
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			for rr.Next() {
				rec := rr.RecordBatch()
				rec.Retain()
				recs = append(recs, rec)
			}
			if err := rr.Err(); err != nil {
				return err
			}
			var err error
			out, err = encode(q.cols, recs, s.cfg.TZOffsetMinutes)
			return err
		})
	return out, err
}

func (s *Server) arrowQuery(ctx context.Context, query string, args []any, use func(array.RecordReader) error) error {
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
		rr, err := ar.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rr.Release()
		return use(rr)
	})
}
