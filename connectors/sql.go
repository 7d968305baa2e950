package connectors

import (
	"fmt"
	"strings"
)

// Dialect is what SQL generation needs to know about a warehouse.
type Dialect struct {
	// Placeholder returns the bind marker of the i-th (1-based) argument:
	// "$1" for Postgres and DuckDB, "?" for Snowflake.
	Placeholder func(i int) string
}

// QuoteIdent double-quotes one identifier (ANSI; Postgres, Redshift,
// DuckDB and Snowflake all accept it).
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteTable quotes a possibly qualified name ("schema.table"), part by part.
func QuoteTable(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = QuoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// DollarPlaceholder is the Postgres/DuckDB bind style.
func DollarPlaceholder(i int) string { return fmt.Sprintf("$%d", i) }

// SelectSQL builds the statement for req over from (an already quoted table
// reference or a parenthesised query). The watermark predicate is expanded
// into ORs of equalities instead of a row-value comparison, because
// Redshift and Snowflake do not compare row values.
func SelectSQL(d Dialect, from string, req ReadRequest) (string, []any) {
	var b strings.Builder
	b.WriteString("SELECT ")
	if len(req.Columns) == 0 {
		b.WriteString("*")
	} else {
		for i, c := range req.Columns {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(QuoteIdent(c))
		}
	}
	b.WriteString(" FROM ")
	b.WriteString(from)
	var args []any
	if w := req.After; w != nil {
		b.WriteString(" WHERE ")
		// (c1 > v1) OR (c1 = v1 AND c2 > v2) OR ...
		for i := range w.Columns {
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(")
			for j := 0; j < i; j++ {
				args = append(args, w.Values[j])
				fmt.Fprintf(&b, "%s = %s AND ", QuoteIdent(w.Columns[j]), d.Placeholder(len(args)))
			}
			args = append(args, w.Values[i])
			fmt.Fprintf(&b, "%s %s %s)", QuoteIdent(w.Columns[i]), w.Op(i), d.Placeholder(len(args)))
		}
	}
	if len(req.OrderBy) > 0 {
		b.WriteString(" ORDER BY ")
		for i, c := range req.OrderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(QuoteIdent(c))
		}
	}
	if req.Limit > 0 {
		fmt.Fprintf(&b, " LIMIT %d", req.Limit)
	}
	return b.String(), args
}
