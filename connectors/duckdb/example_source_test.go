package duckdb_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/duckdb"
)

// A connectors.Source in three calls: Discover describes a table, Read
// streams its rows as Arrow record batches (here only those past a
// watermark, in its order), Close releases it. The source is DuckDB in
// memory reading a CSV file under the operator's allowed_paths.
func Example_source() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "duckdb-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "events.csv")
	csv := "id,event,user_id\n1,Signed up,u1\n2,Purchase,u1\n3,Signed up,u2\n"
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		panic(err)
	}

	var src connectors.Source
	src, err = duckdb.Open(ctx, map[string]string{}, connectors.Options{AllowedPaths: []string{dir}})
	if err != nil {
		panic(err)
	}
	defer src.Close()

	table := connectors.Table{Name: file}
	schema, err := src.Discover(ctx, table)
	if err != nil {
		panic(err)
	}
	for _, c := range schema.Columns {
		fmt.Println(c.Name, c.Type)
	}
	req := connectors.ReadRequest{Table: table, OrderBy: []string{"id"},
		After: &connectors.Watermark{Columns: []string{"id"}, Values: []any{int64(1)}}}
	err = src.Read(ctx, req, func(rec arrow.RecordBatch) error {
		for row := 0; row < int(rec.NumRows()); row++ {
			fmt.Println(rec.Column(0).ValueStr(row), rec.Column(1).ValueStr(row), rec.Column(2).ValueStr(row))
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// id int64
	// event utf8
	// user_id utf8
	// 2 Purchase u1
	// 3 Signed up u2
}
