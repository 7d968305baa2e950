package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/connectors"
)

// Discover returns t's Arrow schema (from a zero-row Arrow query, so the
// types are exactly what Read will produce), the catalog's nullability and
// the primary key.
func (s *Source) Discover(ctx context.Context, t connectors.Table) (*connectors.Schema, error) {
	if (t.Name == "") == (t.Query == "") {
		return nil, fmt.Errorf("%w: exactly one of table or query", connectors.ErrBadRequest)
	}
	f := from(t)
	out := &connectors.Schema{}
	table := t.Query == "" && !isPath(t.Name)
	err := s.run(ctx, t, func(conn *sql.Conn) error {
		err := arrowQuery(ctx, conn, "SELECT * FROM "+f+" LIMIT 0", nil, func(rr recordReader) error {
			for _, fld := range rr.Schema().Fields() {
				out.Columns = append(out.Columns, connectors.Column{Name: fld.Name, Type: fld.Type, Nullable: true})
			}
			return nil
		})
		if err != nil {
			return err
		}
		describe := "DESCRIBE SELECT * FROM " + f
		if table {
			describe = "DESCRIBE " + f
		}
		i := 0
		err = queryRows(ctx, conn, describe, nil, func(rows *sql.Rows) error {
			for rows.Next() {
				var name, typ string
				var null, key, def, extra sql.NullString
				if err := rows.Scan(&name, &typ, &null, &key, &def, &extra); err != nil {
					return fmt.Errorf("duckdb source: describe %s: %w", t, err)
				}
				if i < len(out.Columns) && out.Columns[i].Name == name {
					out.Columns[i].SourceType = typ
					out.Columns[i].Nullable = !(table && null.String == "NO")
				}
				if table && key.String == "PRI" {
					out.PrimaryKey = append(out.PrimaryKey, name)
				}
				i++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if table && len(out.PrimaryKey) > 1 {
			// DESCRIBE lists key columns in table order; the key's own order
			// is what tie-breaking and $insert_id derivation must use.
			if pk, err := primaryKey(ctx, conn, t.Name); err == nil && len(pk) > 0 {
				out.PrimaryKey = pk
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func primaryKey(ctx context.Context, conn *sql.Conn, name string) ([]string, error) {
	parts := strings.Split(name, ".")
	table := parts[len(parts)-1]
	schema := "main"
	if len(parts) >= 2 {
		schema = parts[len(parts)-2]
	}
	var cols []any
	err := conn.QueryRowContext(ctx, `SELECT constraint_column_names FROM duckdb_constraints()
		WHERE constraint_type = 'PRIMARY KEY' AND schema_name = $1 AND table_name = $2`, schema, table).Scan(&cols)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprint(c)
	}
	return out, nil
}
