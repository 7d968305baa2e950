package sfserver

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Column declares one column of a table in Snowflake's terms.
type Column struct {
	Name string
	// Type is a Snowflake type as written in DDL: NUMBER(12,2), INT,
	// FLOAT, VARCHAR, BOOLEAN, DATE, TIME, TIMESTAMP_NTZ(9),
	// TIMESTAMP_LTZ(6), TIMESTAMP_TZ(3), VARIANT, OBJECT, ARRAY, BINARY.
	Type       string
	NotNull    bool
	PrimaryKey bool
}

// sfType is a column type as the wire protocol describes it: the rowtype
// name (fixed, text, timestamp_ntz, …) with precision and scale.
type sfType struct {
	name      string // rowtype name, lower case
	ddl       string // as DESCRIBE TABLE prints it
	precision int
	scale     int
}

var typeRE = regexp.MustCompile(`^([A-Z_]+)(?:\((\d+)(?:,\s*(\d+))?\))?$`)

// parseType normalises a DDL type the way Snowflake does (INT is
// NUMBER(38,0), STRING is VARCHAR(16777216), …).
func parseType(ddl string) (sfType, error) {
	m := typeRE.FindStringSubmatch(strings.ToUpper(strings.TrimSpace(ddl)))
	if m == nil {
		return sfType{}, fmt.Errorf("sfserver: cannot parse type %q", ddl)
	}
	arg := func(s string, def int) int {
		if s == "" {
			return def
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	switch m[1] {
	case "NUMBER", "DECIMAL", "NUMERIC":
		p, s := arg(m[2], 38), arg(m[3], 0)
		return sfType{"fixed", fmt.Sprintf("NUMBER(%d,%d)", p, s), p, s}, nil
	case "INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "BYTEINT":
		return sfType{"fixed", "NUMBER(38,0)", 38, 0}, nil
	case "FLOAT", "FLOAT4", "FLOAT8", "DOUBLE", "REAL":
		return sfType{name: "real", ddl: "FLOAT"}, nil
	case "VARCHAR", "STRING", "TEXT", "CHAR":
		n := arg(m[2], 16777216)
		return sfType{name: "text", ddl: fmt.Sprintf("VARCHAR(%d)", n), precision: n}, nil
	case "BOOLEAN":
		return sfType{name: "boolean", ddl: "BOOLEAN"}, nil
	case "DATE":
		return sfType{name: "date", ddl: "DATE"}, nil
	case "TIME":
		s := arg(m[2], 9)
		return sfType{name: "time", ddl: fmt.Sprintf("TIME(%d)", s), scale: s}, nil
	case "TIMESTAMP_NTZ", "DATETIME", "TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP_TZ":
		name := strings.ToLower(m[1])
		if name == "datetime" || name == "timestamp" {
			name = "timestamp_ntz" // the default TIMESTAMP_TYPE_MAPPING
		}
		s := arg(m[2], 9)
		return sfType{name: name, ddl: fmt.Sprintf("%s(%d)", strings.ToUpper(name), s), scale: s}, nil
	case "VARIANT", "OBJECT", "ARRAY":
		return sfType{name: strings.ToLower(m[1]), ddl: m[1]}, nil
	case "BINARY", "VARBINARY":
		n := arg(m[2], 8388608)
		return sfType{name: "binary", ddl: fmt.Sprintf("BINARY(%d)", n), precision: n}, nil
	}
	return sfType{}, fmt.Errorf("sfserver: unsupported type %q", ddl)
}

// duckType is how a Snowflake type is stored in the DuckDB behind the
// server. TIMESTAMP_TZ keeps the instant only; the wire carries the
// server's configured offset (see Config.TZOffsetMinutes).
func (t sfType) duckType() string {
	switch t.name {
	case "fixed":
		return fmt.Sprintf("DECIMAL(%d,%d)", t.precision, t.scale)
	case "real":
		return "DOUBLE"
	case "boolean":
		return "BOOLEAN"
	case "date":
		return "DATE"
	case "time":
		return "TIME"
	case "timestamp_ntz":
		return "TIMESTAMP"
	case "timestamp_ltz", "timestamp_tz":
		return "TIMESTAMPTZ"
	case "binary":
		return "BLOB"
	}
	return "VARCHAR" // text and the semi-structured types, as JSON text
}

// table is a catalog entry.
type table struct {
	db, schema, name string
	cols             []Column
	types            []sfType
	track            tracking // change tracking state (changes.go)
}

func (t *table) key() string { return t.db + "." + t.schema + "." + t.name }

func (t *table) quoted() string {
	return quote(t.db) + "." + quote(t.schema) + "." + quote(t.name)
}

func (t *table) column(name string) (int, bool) {
	for i, c := range t.cols {
		if c.Name == name {
			return i, true
		}
	}
	return -1, false
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// splitName parses a possibly qualified identifier with Snowflake's rules:
// unquoted parts are upper-cased, quoted parts kept exactly.
func splitName(name string) ([]string, error) {
	var parts []string
	s := strings.TrimSpace(name)
	for {
		var part string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated identifier in %s", name)
			}
			part, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, '.')
			if end < 0 {
				end = len(s)
			}
			part, s = strings.ToUpper(strings.TrimSpace(s[:end])), s[end:]
		}
		parts = append(parts, part)
		s = strings.TrimSpace(s)
		if s == "" {
			break
		}
		if s[0] != '.' {
			return nil, fmt.Errorf("bad identifier %s", name)
		}
		s = strings.TrimSpace(s[1:])
	}
	if len(parts) > 3 {
		return nil, fmt.Errorf("too many name parts in %s", name)
	}
	return parts, nil
}

// lookup resolves name against the session's database and schema.
func (s *Server) lookup(sess *session, name string) (*table, error) {
	parts, err := splitName(name)
	if err != nil {
		return nil, err
	}
	full := parts
	switch len(parts) {
	case 1:
		full = []string{sess.database, sess.schema, parts[0]}
	case 2:
		full = []string{sess.database, parts[0], parts[1]}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tables[strings.Join(full, ".")]
	if !ok {
		return nil, &sfError{code: "002003", state: "42S02",
			msg: fmt.Sprintf("SQL compilation error:\nObject '%s' does not exist or not authorized.", strings.Join(full, "."))}
	}
	return t, nil
}

// CreateTable makes table name (one to three parts, unquoted parts upper
// cased as Snowflake does) and inserts rows. Row values are Go values
// DuckDB can cast to the column: int64, float64, bool, string (also for
// NUMBER, DATE and JSON), time.Time, []byte, nil.
func (s *Server) CreateTable(ctx context.Context, name string, cols []Column, rows [][]any) error {
	t, err := s.define(ctx, name, cols)
	if err != nil {
		return err
	}
	for start := 0; start < len(rows); start += 500 {
		chunk := rows[start:min(start+500, len(rows))]
		var tuples []string
		var args []any
		for _, r := range chunk {
			marks := make([]string, len(r))
			for i, v := range r {
				args = append(args, v)
				marks[i] = "CAST(? AS " + t.types[i].duckType() + ")"
			}
			tuples = append(tuples, "("+strings.Join(marks, ", ")+")")
		}
		if _, err := s.db.ExecContext(ctx, "INSERT INTO "+t.quoted()+" VALUES "+strings.Join(tuples, ", "), args...); err != nil {
			return fmt.Errorf("sfserver: insert into %s: %w", t.key(), err)
		}
	}
	return nil
}

// CreateTableAs makes table name and fills it with the rows of a DuckDB
// SELECT (for generated series), cast to the declared columns.
func (s *Server) CreateTableAs(ctx context.Context, name string, cols []Column, duckSelect string) error {
	t, err := s.define(ctx, name, cols)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "INSERT INTO "+t.quoted()+" "+duckSelect); err != nil {
		return fmt.Errorf("sfserver: fill %s: %w", t.key(), err)
	}
	return nil
}

func (s *Server) define(ctx context.Context, name string, cols []Column) (*table, error) {
	parts, err := splitName(name)
	if err != nil {
		return nil, err
	}
	t := &table{db: s.cfg.Database, schema: s.cfg.Schema, cols: cols}
	switch len(parts) {
	case 1:
		t.name = parts[0]
	case 2:
		t.schema, t.name = parts[0], parts[1]
	default:
		t.db, t.schema, t.name = parts[0], parts[1], parts[2]
	}
	// Primary keys stay in the catalog only: Snowflake does not enforce
	// them either, and an index would slow the multi-million-row fixtures.
	var defs []string
	for _, c := range cols {
		ty, err := parseType(c.Type)
		if err != nil {
			return nil, err
		}
		t.types = append(t.types, ty)
		d := quote(c.Name) + " " + ty.duckType()
		if c.NotNull {
			d += " NOT NULL"
		}
		defs = append(defs, d)
	}
	if _, err := s.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quote(t.db)+"."+quote(t.schema)); err != nil {
		return nil, fmt.Errorf("sfserver: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE "+t.quoted()+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return nil, fmt.Errorf("sfserver: create %s: %w", t.key(), err)
	}
	s.mu.Lock()
	s.seq++
	t.track = tracking{id: int64(s.seq), created: now(), retentionDays: 1}
	s.tables[t.key()] = t
	s.mu.Unlock()
	return t, nil
}
