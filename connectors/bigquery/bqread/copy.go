package bqread

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math/big"
	"strings"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	duckdb "github.com/duckdb/duckdb-go/v2"
	"google.golang.org/api/iterator"
)

// CopyFrom copies a table's schema and rows from BigQuery's REST API (in
// tests, the emulator) into the server's database, so both APIs serve the
// same table. It is meant as a Resolve hook: tables the REST side holds
// (fixtures, query results) become readable through the Storage Read API.
// fix, when set, may correct each row as read (see the caller's reasons).
func (s *Server) CopyFrom(ctx context.Context, client *bq.Client, project, dataset, table string, fix func(bq.Schema, []bq.Value) error) error {
	t := client.DatasetInProject(project, dataset).Table(table)
	md, err := t.Metadata(ctx)
	if err != nil {
		return err
	}
	return s.Load(ctx, dataset, table, md.Schema, func(yield func([]bq.Value) error) error {
		it := t.Read(ctx)
		for {
			var row []bq.Value
			err := it.Next(&row)
			if err == iterator.Done {
				return nil
			}
			if err != nil {
				return err
			}
			if fix != nil {
				if err := fix(md.Schema, row); err != nil {
					return err
				}
			}
			if err := yield(row); err != nil {
				return err
			}
		}
	})
}

// Load creates dataset.table with schema's columns and appends the rows
// rows yields, given as the BigQuery client library reads them.
func (s *Server) Load(ctx context.Context, dataset, table string, schema bq.Schema, rows func(yield func([]bq.Value) error) error) error {
	defs := make([]string, len(schema))
	for i, f := range schema {
		defs[i] = ident(f.Name) + " " + DuckType(f)
	}
	if _, err := s.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident(dataset)); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE "+Table(dataset, table)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppender(dc.(driver.Conn), "", dataset, table)
		if err != nil {
			return err
		}
		err = rows(func(row []bq.Value) error {
			vals := make([]driver.Value, len(row))
			for i, v := range row {
				vals[i] = duckValue(schema[i], v, true)
			}
			return app.AppendRow(vals...)
		})
		if cerr := app.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// DuckType is the DuckDB type holding a BigQuery column the way the
// Storage Read API sends it in Arrow.
func DuckType(f *bq.FieldSchema) string {
	var t string
	switch f.Type {
	case bq.IntegerFieldType:
		t = "BIGINT"
	case bq.FloatFieldType:
		t = "DOUBLE"
	case bq.BooleanFieldType:
		t = "BOOLEAN"
	case bq.BytesFieldType:
		t = "BLOB"
	case bq.DateFieldType:
		t = "DATE"
	case bq.TimeFieldType:
		t = "TIME"
	case bq.TimestampFieldType:
		t = "TIMESTAMPTZ"
	case bq.DateTimeFieldType:
		t = "TIMESTAMP"
	case bq.NumericFieldType:
		t = "DECIMAL(38,9)"
	case bq.RecordFieldType:
		parts := make([]string, len(f.Schema))
		for i, sub := range f.Schema {
			parts[i] = ident(sub.Name) + " " + DuckType(sub)
		}
		t = "STRUCT(" + strings.Join(parts, ", ") + ")"
	default: // STRING, JSON, GEOGRAPHY; BIGNUMERIC does not fit DuckDB's DECIMAL
		t = "VARCHAR"
	}
	if f.Repeated {
		t += "[]"
	}
	return t
}

// duckValue converts a client-library value for the appender.
func duckValue(f *bq.FieldSchema, v bq.Value, top bool) any {
	if v == nil {
		return nil
	}
	if f.Repeated && top {
		list := v.([]bq.Value)
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = duckValue(f, e, false)
		}
		return out
	}
	switch x := v.(type) {
	case civil.Date:
		return x.In(time.UTC)
	case civil.DateTime:
		return x.In(time.UTC)
	case civil.Time:
		return time.Date(1970, 1, 1, x.Hour, x.Minute, x.Second, x.Nanosecond, time.UTC)
	case time.Time:
		return x.UTC()
	case *big.Rat:
		if f.Type == bq.NumericFieldType {
			scaled := new(big.Rat).Mul(x, new(big.Rat).SetInt64(1_000_000_000))
			return duckdb.Decimal{Width: 38, Scale: 9, Value: new(big.Int).Quo(scaled.Num(), scaled.Denom())}
		}
		return x.FloatString(38)
	case []bq.Value:
		m := make(map[string]any, len(x))
		for i, sub := range f.Schema {
			m[sub.Name] = duckValue(sub, x[i], true)
		}
		return m
	}
	return v
}

// Exec runs a statement on the server's database (fixtures that generate
// rows inside DuckDB).
func (s *Server) Exec(ctx context.Context, query string) error {
	if _, err := s.db.ExecContext(ctx, query); err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	return nil
}
