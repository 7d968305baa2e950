package bigquery

import (
	"context"
	"fmt"
	"strings"

	bq "cloud.google.com/go/bigquery"

	"github.com/tributary-dev/tributary/connectors"
)

// checkQuery refuses a user's query (already cleaned) that is not one
// SELECT, before any job runs it. A query job runs a whole script, so a
// query that closes the subquery it is wrapped in could append DML; the
// checks are layered because the emulator answers dry runs without a
// statement type:
//   - a `;` outside literals and comments means a script;
//   - the dry run's statementType, when the service reports one, must be
//     SELECT (BigQuery's own parser);
//   - the query always runs wrapped in a subquery, where anything but a
//     SELECT does not parse.
func (s *Source) checkQuery(ctx context.Context, op, sql string) error {
	refuse := func(why string) error {
		return connectors.Permanent(fmt.Errorf("%w: %w", &connectors.FieldError{Field: "table_params.query",
			Msg: "must be one SELECT statement; " + why}, connectors.ErrRefused))
	}
	if hasStatementSeparator(sql) {
		return refuse("it holds several (a ; outside quotes)")
	}
	stats, err := s.dryRun(ctx, sql)
	if err != nil {
		return classify(ctx, op, err)
	}
	if stats != nil && stats.StatementType != "" && stats.StatementType != "SELECT" {
		return refuse("BigQuery parses it as " + stats.StatementType)
	}
	return nil
}

// dryRun validates sql without running it (free); the statistics are
// nil when the service reports none.
func (s *Source) dryRun(ctx context.Context, sql string) (*bq.QueryStatistics, error) {
	q := s.rest.Query(sql)
	q.DryRun = true
	q.Location = s.location
	job, err := q.Run(ctx)
	if err != nil {
		return nil, err
	}
	st := job.LastStatus()
	if st == nil {
		return nil, nil
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	if st.Statistics == nil {
		return nil, nil
	}
	qs, _ := st.Statistics.Details.(*bq.QueryStatistics)
	return qs, nil
}

// hasStatementSeparator reports a `;` outside GoogleSQL string literals,
// quoted identifiers and comments. A backslash protects the next byte in
// every literal, raw ones included (a raw literal cannot end in an odd
// number of backslashes), as quotedLen has it.
func hasStatementSeparator(q string) bool {
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == ';':
			return true
		case c == '\'' || c == '"' || c == '`':
			i += quotedLen(q[i:]) - 1
		case c == '#' || c == '-' && strings.HasPrefix(q[i:], "--"):
			if n := strings.IndexByte(q[i:], '\n'); n >= 0 {
				i += n
			} else {
				return false
			}
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			if n := strings.Index(q[i+2:], "*/"); n >= 0 {
				i += n + 3
			} else {
				return false
			}
		}
	}
	return false
}
