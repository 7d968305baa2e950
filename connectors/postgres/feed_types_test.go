package postgres

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// TestFeedTypes: every type of the type table (types_test.go) that the
// feed takes comes out of the stream as Read reads it, for inserts and
// for updates; the types Read takes as text (enums aside) make the feed
// unavailable instead.
func TestFeedTypes(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TYPE mood AS ENUM ('sad', 'happy')")
	text := []string{"iv", "ip", "tm"} // interval, inet, time: read as text
	var cases []typeCase
	for _, c := range typeCases {
		if !slices.Contains(text, c.name) {
			cases = append(cases, c)
		}
	}
	ddl := "CREATE TABLE types (row int PRIMARY KEY"
	for _, c := range cases {
		ddl += ", " + c.name + " " + c.ddl
	}
	db.exec(t, ddl+")")
	src := db.open(t)
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "types"}, Key: []string{"row"}}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })
	for r := 0; r < 3; r++ {
		ins := "INSERT INTO types VALUES (" + strconv.Itoa(r)
		for _, c := range cases {
			ins += ", " + c.lits[r]
		}
		db.exec(t, ins+")")
	}
	// Rows 10..12 are rows 0..2 updated in place from the other rows,
	// so every value also travels in an update.
	db.exec(t, "INSERT INTO types (row) VALUES (10), (11), (12)")
	set := ""
	for i, c := range cases {
		if i > 0 {
			set += ", "
		}
		set += c.name + " = s." + c.name
	}
	db.exec(t, "UPDATE types d SET "+set+" FROM types s WHERE d.row = s.row + 10")
	m := mirror{}
	_, ops := changes(t, src, f, pos, m, 0)
	if len(ops) != 9 {
		t.Errorf("ops %q", ops)
	}
	equalState(t, m, tableState(t, src, "types", 0))

	var schemaOK bool
	_, _ = src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
		schemaOK = rec.Schema().Field(1).Name == "row" && rec.NumCols() == int64(len(cases)+2)
		return nil
	})
	if !schemaOK {
		t.Error("change batch columns are not $op and the table's")
	}

	db.exec(t, "CREATE TABLE textual (id int PRIMARY KEY, iv interval, ip inet, tm time)")
	for _, col := range text {
		g := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "textual"}, Key: []string{"id"}, Columns: []string{col}}
		_, err := src.StartFeed(ctx, g)
		_ = src.DropFeed(ctx, g)
		if !errors.Is(err, connectors.ErrFeedUnavailable) {
			t.Errorf("a feed of a %s column: %v, want ErrFeedUnavailable", col, err)
		}
	}
}
