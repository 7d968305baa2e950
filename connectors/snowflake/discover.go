package snowflake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sort"
	"strconv"

	"github.com/tributary-dev/tributary/connectors"
)

// Discover describes t. Its columns and their Arrow types come from a
// describe-only run of the statement Read would run (compiled, not
// executed, so no warehouse time is spent), through the same mapping as
// Read; for a table, DESCRIBE TABLE supplies NOT NULL flags and the type
// as declared, and SHOW PRIMARY KEYS the key in key order.
func (s *Source) Discover(ctx context.Context, t connectors.Table) (*connectors.Schema, error) {
	if (t.Name == "") == (t.Query == "") {
		return nil, fmt.Errorf("%w: exactly one of table or query", connectors.ErrBadRequest)
	}
	ref, err := from(t)
	if err != nil {
		return nil, err
	}
	op := "discover " + t.String()
	out := &connectors.Schema{}
	err = s.query(ctx, "SELECT * FROM "+ref, nil, true, func(_ driver.Rows, cols []column) error {
		for _, c := range cols {
			// A query's columns stay nullable (outer joins); a table's
			// flags come from its catalog below.
			out.Columns = append(out.Columns, connectors.Column{Name: c.name, Type: c.typ, Nullable: true, SourceType: c.sourceType()})
		}
		return nil
	})
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	if t.Query != "" {
		return out, nil
	}
	if err := s.describeTable(ctx, ref, out); err != nil {
		return nil, classify(ctx, op, err)
	}
	if out.PrimaryKey, err = s.primaryKey(ctx, ref); err != nil {
		return nil, classify(ctx, op, err)
	}
	return out, nil
}

// describeTable applies DESCRIBE TABLE's `null?` and `type` columns.
func (s *Source) describeTable(ctx context.Context, ref string, out *connectors.Schema) error {
	rows, err := s.textRows(ctx, "DESCRIBE TABLE "+ref)
	if err != nil {
		return err
	}
	byName := make(map[string]map[string]string, len(rows))
	for _, r := range rows {
		byName[r["name"]] = r
	}
	for i, c := range out.Columns {
		if r, ok := byName[c.Name]; ok {
			out.Columns[i].Nullable = r["null?"] != "N"
			if r["type"] != "" {
				out.Columns[i].SourceType = r["type"]
			}
		}
	}
	return nil
}

// primaryKey lists the key columns in key_sequence order; Snowflake
// records the constraint without enforcing it.
func (s *Source) primaryKey(ctx context.Context, ref string) ([]string, error) {
	rows, err := s.textRows(ctx, "SHOW PRIMARY KEYS IN TABLE "+ref)
	if err != nil {
		return nil, err
	}
	type keyCol struct {
		name string
		seq  int
	}
	var key []keyCol
	for _, r := range rows {
		seq, err := strconv.Atoi(r["key_sequence"])
		if err != nil {
			return nil, fmt.Errorf("SHOW PRIMARY KEYS: key_sequence %q: %w", r["key_sequence"], err)
		}
		key = append(key, keyCol{r["column_name"], seq})
	}
	sort.Slice(key, func(i, j int) bool { return key[i].seq < key[j].seq })
	var names []string
	for _, k := range key {
		names = append(names, k.name)
	}
	return names, nil
}

// textRows runs a SHOW or DESCRIBE command and returns its rows keyed by
// column name, since Snowflake adds columns to these outputs over time.
func (s *Source) textRows(ctx context.Context, query string) ([]map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]string, len(names))
		for i, n := range names {
			m[n] = vals[i].String
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
