package snowflake

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	sf "github.com/snowflakedb/gosnowflake"

	"github.com/tributary-dev/tributary/connectors"
)

var dialect = connectors.Dialect{Placeholder: func(int) string { return "?" }}

// from renders the FROM clause of t.
func from(t connectors.Table) (string, error) {
	if t.Query != "" {
		// Its own line: a trailing -- comment cannot swallow the ")".
		return "(" + t.Query + "\n) AS q", nil
	}
	return tableRef(t.Name)
}

// tableRef quotes a possibly qualified table name part by part, resolving
// each as Snowflake resolves identifiers: a part in double quotes is
// exact, an unquoted one is upper-cased. Quoting everything keeps a name
// from being read as SQL.
func tableRef(name string) (string, error) {
	parts, err := nameParts(name)
	if err != nil {
		return "", err
	}
	for i, p := range parts {
		parts[i] = connectors.QuoteIdent(p)
	}
	return strings.Join(parts, "."), nil
}

// nameParts resolves the parts of a possibly qualified table name.
func nameParts(name string) ([]string, error) {
	var parts []string
	s := strings.TrimSpace(name)
	for s != "" {
		var part string
		if s[0] == '"' {
			end := 1
			for ; end < len(s); end++ {
				if s[end] == '"' {
					if end+1 < len(s) && s[end+1] == '"' {
						end++
						continue
					}
					break
				}
			}
			if end >= len(s) {
				return nil, badName(name)
			}
			part, s = strings.ReplaceAll(s[1:end], `""`, `"`), strings.TrimSpace(s[end+1:])
		} else {
			end := strings.IndexByte(s, '.')
			if end < 0 {
				end = len(s)
			}
			part, s = strings.ToUpper(strings.TrimSpace(s[:end])), strings.TrimSpace(s[end:])
		}
		if part == "" {
			return nil, badName(name)
		}
		parts = append(parts, part)
		if s != "" {
			if s[0] != '.' || len(s) == 1 {
				return nil, badName(name)
			}
			s = strings.TrimSpace(s[1:])
		}
	}
	if len(parts) == 0 || len(parts) > 3 {
		return nil, badName(name)
	}
	return parts, nil
}

func badName(name string) error {
	return fmt.Errorf("%w: table %q is not [database.][schema.]table", connectors.ErrBadRequest, name)
}

// Read streams req's rows as Arrow record batches.
//
// The result arrives as Snowflake's result chunks: the first inline in
// the query response, the rest downloaded one at a time as fn consumes
// them, so at most one chunk is held whatever the table size.
func (s *Source) Read(ctx context.Context, req connectors.ReadRequest, fn func(arrow.RecordBatch) error) error {
	if err := req.Validate(); err != nil {
		return err
	}
	ref, err := from(req.Table)
	if err != nil {
		return err
	}
	query, args := connectors.SelectSQL(dialect, ref, req)
	op := "read " + req.Table.String()
	err = s.query(ctx, query, args, false, func(rows driver.Rows, cols []column) error {
		return batches(ctx, rows, cols, fn)
	})
	var fe fnError
	if errors.As(err, &fe) {
		return fe.err
	}
	return classify(ctx, op, err)
}

// batches hands over a result's rows as converted record batches.
func batches(ctx context.Context, rows driver.Rows, cols []column, fn func(arrow.RecordBatch) error) error {
	sr, ok := rows.(sf.SnowflakeRows)
	if !ok {
		return fmt.Errorf("driver rows %T have no Arrow batches", rows)
	}
	bs, err := sr.GetArrowBatches()
	if err != nil {
		return err
	}
	schema := schemaOf(cols)
	for _, b := range bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, err := b.WithContext(ctx).Fetch()
		if err != nil {
			return err
		}
		if err := emit(schema, cols, *recs, fn); err != nil {
			return err
		}
	}
	return nil
}

// fnError carries the callback's own error out unclassified.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// emit converts and hands over one chunk's records, releasing them all.
func emit(schema *arrow.Schema, cols []column, recs []arrow.RecordBatch, fn func(arrow.RecordBatch) error) error {
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, raw := range recs {
		if raw.NumRows() == 0 {
			continue
		}
		rec, err := convert(schema, cols, raw)
		if err != nil {
			return connectors.Permanent(err)
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return fnError{err}
		}
	}
	return nil
}

// query runs one statement on a dedicated connection and hands the
// driver's rows to use. Results are asked for as raw Arrow batches with
// Snowflake's decimals and timestamp structs untouched: the driver would
// otherwise convert timestamps value by value through time.Time and
// NUMBER(p,s) to float64.
func (s *Source) query(ctx context.Context, query string, args []any, describeOnly bool, use func(driver.Rows, []column) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			a = v.UTC() // bound as TIMESTAMP_NTZ: UTC wall-clock time
		case int:
			a = int64(v)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	qctx := sf.WithArrowBatches(sf.WithHigherPrecision(sf.WithArrowBatchesTimestampOption(ctx, sf.UseOriginalTimestamp)))
	// One statement per request, whatever the account or user allows: a
	// query that closes the subquery it is wrapped in and adds statements
	// of its own fails before any of them runs.
	qctx, _ = sf.WithMultiStatement(qctx, 1)
	if describeOnly {
		qctx = sf.WithDescribeOnly(qctx)
	}
	return conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot query", dc)
		}
		rows, err := qc.QueryContext(qctx, query, named)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, err := columnsOf(rows)
		if err != nil {
			return err
		}
		return use(rows, cols)
	})
}
