package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tributary-dev/tributary/connectors"
)

// Discover describes t. Its columns come from preparing the statement
// Read would run (so the Arrow types are exactly what Read produces, for
// queries too); a table's NOT NULL flags and primary key come from
// pg_catalog, matched by the relation and column numbers the server
// reports for each result column rather than by name.
func (s *Source) Discover(ctx context.Context, t connectors.Table) (*connectors.Schema, error) {
	if (t.Name == "") == (t.Query == "") {
		return nil, fmt.Errorf("%w: exactly one of table or query", connectors.ErrBadRequest)
	}
	op := "discover " + t.String()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	defer release(ctx, conn, false)
	if err := beginReadOnly(ctx, conn); err != nil {
		return nil, classify(ctx, op, err)
	}
	defer rollback(conn)
	sd, err := conn.Conn().PgConn().Prepare(ctx, "", "SELECT * FROM "+from(t), nil)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	out := &connectors.Schema{Columns: make([]connectors.Column, len(sd.Fields))}
	for i, f := range sd.Fields {
		c := newColumn(f.Name, f.DataTypeOID, f.TypeModifier)
		out.Columns[i] = connectors.Column{Name: f.Name, Type: c.typ, Nullable: true}
	}
	if err := sourceTypes(ctx, conn, sd.Fields, out.Columns); err != nil {
		return nil, classify(ctx, op, err)
	}
	if t.Query != "" {
		return out, nil // a query's columns stay nullable (outer joins)
	}
	if err := catalog(ctx, conn, t.Name, sd.Fields, out); err != nil {
		return nil, classify(ctx, op, err)
	}
	return out, nil
}

// sourceTypes names each column's type as the catalog spells it
// (numeric(12,2), character varying(40), an enum's name), in one round
// trip.
func sourceTypes(ctx context.Context, conn *pgxpool.Conn, fields []pgconn.FieldDescription, cols []connectors.Column) error {
	if len(fields) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]any, 0, 2*len(fields))
	b.WriteString("SELECT pg_catalog.format_type(v.o, v.m) FROM (VALUES ")
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		args = append(args, f.DataTypeOID, f.TypeModifier)
		fmt.Fprintf(&b, "($%d::oid, $%d::int4, %d)", len(args)-1, len(args), i)
	}
	b.WriteString(") AS v(o, m, n) ORDER BY v.n")
	rows, err := conn.Query(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for i := 0; rows.Next() && i < len(cols); i++ {
		if err := rows.Scan(&cols[i].SourceType); err != nil {
			return err
		}
	}
	return rows.Err()
}

// catalog fills in a table's NOT NULL flags and primary key (in key
// order, from pg_constraint.conkey, which Redshift keeps too). A view's
// columns stay nullable: the catalog records no NOT NULL for them.
func catalog(ctx context.Context, conn *pgxpool.Conn, name string, fields []pgconn.FieldDescription, out *connectors.Schema) error {
	rel := connectors.QuoteTable(name)
	rows, err := conn.Query(ctx, `SELECT a.attrelid, a.attnum, a.attname, a.attnotnull
		FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`, rel)
	if err != nil {
		return err
	}
	var relOID uint32
	notNull := map[int16]bool{}
	names := map[int16]string{}
	for rows.Next() {
		var num int16
		var attName string
		var nn bool
		if err := rows.Scan(&relOID, &num, &attName, &nn); err != nil {
			rows.Close()
			return err
		}
		notNull[num], names[num] = nn, attName
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, f := range fields {
		if f.TableOID == relOID && notNull[int16(f.TableAttributeNumber)] {
			out.Columns[i].Nullable = false
		}
	}
	var key []int16
	err = conn.QueryRow(ctx, `SELECT c.conkey FROM pg_catalog.pg_constraint c
		WHERE c.conrelid = $1::regclass AND c.contype = 'p'`, rel).Scan(&key)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	for _, num := range key {
		out.PrimaryKey = append(out.PrimaryKey, names[num])
	}
	return nil
}
