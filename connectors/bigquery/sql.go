package bigquery

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/connectors"
)

// quoteIdent backtick-quotes one GoogleSQL identifier. Backslash escapes
// apply inside backticks, so both the backslash and the backtick are escaped.
func quoteIdent(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "`" + strings.ReplaceAll(s, "`", "\\`") + "`"
}

// quoteString renders s as a GoogleSQL string literal.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\x00`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// predicate renders the watermark as a GoogleSQL boolean expression,
// (c1 > v1) OR (c1 = v1 AND c2 > v2) OR ..., the same shape as
// connectors.SelectSQL. BigQuery has no bind parameters in a Storage Read
// row restriction, so values become literals; types (column name → BigQuery
// type, may be nil) pick the literal's type, so a DATETIME column is
// compared with a DATETIME and not a TIMESTAMP (which BigQuery refuses).
func predicate(w *connectors.Watermark, types map[string]string) (string, error) {
	if w == nil {
		return "", nil
	}
	lits := make([]string, len(w.Values))
	for i, v := range w.Values {
		l, err := literal(v, types[w.Columns[i]])
		if err != nil {
			return "", fmt.Errorf("%w: watermark column %s: %v", connectors.ErrBadRequest, w.Columns[i], err)
		}
		lits[i] = l
	}
	var b strings.Builder
	for i := range w.Columns {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(")
		for j := 0; j < i; j++ {
			fmt.Fprintf(&b, "%s = %s AND ", quoteIdent(w.Columns[j]), lits[j])
		}
		fmt.Fprintf(&b, "%s %s %s)", quoteIdent(w.Columns[i]), w.Op(i), lits[i])
	}
	return b.String(), nil
}

const (
	tsLayout   = "2006-01-02 15:04:05.999999"
	dateLayout = "2006-01-02"
)

// literal renders a watermark value for a column of BigQuery type typ.
// With typ unknown (a query's column), times become untyped string
// literals, which GoogleSQL coerces to the column's DATE, DATETIME or
// TIMESTAMP: written in UTC without an offset, they mean the same instant
// for TIMESTAMP (UTC by default) and UTC wall-clock time for DATETIME.
func literal(v any, typ string) (string, error) {
	if v == nil {
		return "", fmt.Errorf("NULL watermark")
	}
	switch typ {
	case "TIMESTAMP", "DATETIME", "DATE":
		t, err := asTime(v)
		if err != nil {
			return "", err
		}
		if typ == "DATE" {
			return "DATE '" + t.Format(dateLayout) + "'", nil
		}
		if typ == "TIMESTAMP" {
			return "TIMESTAMP '" + t.Format(tsLayout) + "+00:00'", nil
		}
		return "DATETIME '" + t.Format(tsLayout) + "'", nil
	case "NUMERIC", "BIGNUMERIC":
		s, err := decimalString(v)
		if err != nil {
			return "", err
		}
		return typ + " '" + s + "'", nil
	case "BYTES":
		b, ok := v.([]byte)
		if !ok {
			return "", fmt.Errorf("%T for a BYTES column", v)
		}
		return "FROM_BASE64('" + base64.StdEncoding.EncodeToString(b) + "')", nil
	}
	switch x := v.(type) {
	case time.Time:
		x = x.UTC()
		if typ == "" && x.Equal(x.Truncate(24*time.Hour)) {
			return quoteString(x.Format(dateLayout)), nil
		}
		return quoteString(x.Format(tsLayout)), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case float64:
		return floatLiteral(x)
	case float32:
		return floatLiteral(float64(x))
	case bool:
		return strconv.FormatBool(x), nil
	case string:
		if typ == "INT64" || typ == "FLOAT64" {
			if _, err := strconv.ParseFloat(x, 64); err != nil {
				return "", fmt.Errorf("%q for a %s column", x, typ)
			}
			return "CAST(" + quoteString(x) + " AS " + typ + ")", nil
		}
		return quoteString(x), nil
	case []byte:
		return "FROM_BASE64('" + base64.StdEncoding.EncodeToString(x) + "')", nil
	}
	return "", fmt.Errorf("unsupported watermark value %T", v)
}

func floatLiteral(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("non-finite watermark %v", f)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0" // keeps it a FLOAT64 literal rather than an INT64 one
	}
	return s, nil
}

func asTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", dateLayout} {
			if t, err := time.Parse(layout, x); err == nil {
				return t.UTC(), nil
			}
		}
		return time.Time{}, fmt.Errorf("%q is not a date or time", x)
	}
	return time.Time{}, fmt.Errorf("%T is not a date or time", v)
}

func decimalString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		if _, ok := new(big.Rat).SetString(x); !ok {
			return "", fmt.Errorf("%q is not a number", x)
		}
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return floatLiteral(x)
	case *big.Rat:
		return x.FloatString(38), nil
	}
	return "", fmt.Errorf("%T for a NUMERIC column", v)
}

// selectSQL builds the query that materialises an ordered or limited read
// (or any read of a query): BigQuery's Storage Read API neither orders
// nor limits, so ORDER BY and LIMIT run in a query job.
func selectSQL(from string, req connectors.ReadRequest, types map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("SELECT ")
	if len(req.Columns) == 0 {
		b.WriteString("*")
	}
	for i, c := range req.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c))
	}
	b.WriteString(" FROM " + from)
	where, err := predicate(req.After, types)
	if err != nil {
		return "", err
	}
	if where != "" {
		b.WriteString(" WHERE " + where)
	}
	for i, c := range req.OrderBy {
		if i == 0 {
			b.WriteString(" ORDER BY ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c))
	}
	if req.Limit > 0 {
		fmt.Fprintf(&b, " LIMIT %d", req.Limit)
	}
	return b.String(), nil
}
