package sfserver

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// bindArgs decodes the driver's bindings ({"1": {type, value}}) into Go
// values for DuckDB, in order.
func bindArgs(b map[string]bindParam) ([]any, error) {
	keys := make([]int, 0, len(b))
	for k := range b {
		n, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("named binding %q not supported", k)
		}
		keys = append(keys, n)
	}
	sort.Ints(keys)
	args := make([]any, len(keys))
	for i, k := range keys {
		p := b[strconv.Itoa(k)]
		if p.Value == nil {
			continue
		}
		v := *p.Value
		var err error
		switch p.Type {
		case "FIXED":
			args[i], err = strconv.ParseInt(v, 10, 64)
		case "REAL":
			args[i], err = strconv.ParseFloat(v, 64)
		case "BOOLEAN":
			args[i], err = strconv.ParseBool(v)
		case "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ":
			ns, perr := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			args[i], err = time.Unix(0, ns).UTC(), perr
		case "DATE":
			ms, perr := strconv.ParseInt(v, 10, 64)
			args[i], err = time.UnixMilli(ms).UTC(), perr
		case "BINARY":
			args[i], err = hex.DecodeString(v)
		default:
			args[i] = v
		}
		if err != nil {
			return nil, fmt.Errorf("binding %d (%s %q): %w", k, p.Type, v, err)
		}
	}
	return args, nil
}

// jsonResult answers with a JSON rowset of text columns, as Snowflake
// does for SHOW and DESCRIBE.
func jsonResult(q *query, names []string, rows [][]*string) map[string]any {
	rt := make([]map[string]any, len(names))
	for i, n := range names {
		rt[i] = resultCol{name: n, t: sfType{name: "text", precision: 16777216}, nullable: true}.rowType()
	}
	if rows == nil {
		rows = [][]*string{}
	}
	return map[string]any{"code": nil, "message": nil, "success": true, "data": map[string]any{
		"queryId": q.id, "queryResultFormat": "json", "rowtype": rt, "rowset": rows,
		"total": len(rows), "returned": len(rows), "parameters": []any{}}}
}

func (s *Server) describeTable(q *query, name string) (map[string]any, error) {
	t, err := s.lookup(q.sess, name)
	if err != nil {
		return nil, err
	}
	names := []string{"name", "type", "kind", "null?", "default", "primary key", "unique key", "check", "expression", "comment", "policy name", "privacy domain"}
	yn := func(b bool) *string {
		v := map[bool]string{true: "Y", false: "N"}[b]
		return &v
	}
	var rows [][]*string
	for i, c := range t.cols {
		n, ty, kind := c.Name, t.types[i].ddl, "COLUMN"
		rows = append(rows, []*string{&n, &ty, &kind, yn(!c.NotNull), nil, yn(c.PrimaryKey), yn(false), nil, nil, nil, nil, nil})
	}
	return jsonResult(q, names, rows), nil
}

func (s *Server) showPrimaryKeys(q *query, name string) (map[string]any, error) {
	t, err := s.lookup(q.sess, name)
	if err != nil {
		return nil, err
	}
	names := []string{"created_on", "database_name", "schema_name", "table_name", "column_name", "key_sequence", "constraint_name", "rely", "comment"}
	var rows [][]*string
	created, constraint, rely := "2026-01-01 00:00:00.000 +0000", "SYS_CONSTRAINT_"+strings.ToLower(t.name), "false"
	seq := 0
	for _, c := range t.cols {
		if !c.PrimaryKey {
			continue
		}
		seq++
		col, k := c.Name, strconv.Itoa(seq)
		rows = append(rows, []*string{&created, &t.db, &t.schema, &t.name, &col, &k, &constraint, &rely, nil})
	}
	// Snowflake lists keys in no particular order; reverse them so a
	// reader that ignores key_sequence is caught.
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	return jsonResult(q, names, rows), nil
}
