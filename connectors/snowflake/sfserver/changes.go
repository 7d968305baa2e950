package sfserver

// Change tracking, as Snowflake documents it: once ALTER TABLE … SET
// CHANGE_TRACKING = TRUE has run, every DML statement on the table is
// recorded, and a query's CHANGES(INFORMATION => DEFAULT) AT(…) [END(…)]
// clause returns the net row-level delta between the two points, with
// METADATA$ACTION (INSERT or DELETE), METADATA$ISUPDATE (the two halves
// of an updated row) and METADATA$ROW_ID (a row's id, kept by updates).
// A row inserted and deleted within the interval is not reported; an
// update is its old values as DELETE and its new ones as INSERT.
//
// The log: each tracked table has a DuckDB table of the rows a statement
// removed (DELETE) and the rows it added (INSERT), found by comparing the
// table before and after the statement by DuckDB's rowid, which an update
// keeps and an insert never reuses. The delta of an interval is, per row
// id, its first record if that is a DELETE (the row as it was) and its
// last if that is an INSERT (the row as it is).
//
// Errors are Snowflake's: a point before the table was created or older
// than its DATA_RETENTION_TIME_IN_DAYS is 000707, a point at which change
// tracking was off is 091930.

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// tracking is a table's identity and change tracking state.
type tracking struct {
	id            int64     // a recreated table has a new id (and row ids)
	created       time.Time // SHOW TABLES created_on
	on            bool      // CHANGE_TRACKING
	since         time.Time // when tracking was last turned on
	retentionDays int       // DATA_RETENTION_TIME_IN_DAYS (default 1)
}

// now is the server's clock at DuckDB's precision, so a version is never
// later than a CURRENT_TIMESTAMP read after it.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// logSchema holds the change logs of a database's tables: in the table's
// own database, since a DuckDB transaction writes to one database only.
const logSchema = `"sfserver$changes"`

func (t *table) logTable() string {
	return quote(t.db) + "." + logSchema + "." + quote(fmt.Sprintf("c_%d", t.track.id))
}

// beforeTable holds a table's rows while a statement changes it.
func (t *table) beforeTable() string {
	return quote(t.db) + "." + logSchema + "." + quote(fmt.Sprintf("before_%d", t.track.id))
}

var (
	showTablesRE = regexp.MustCompile(`(?is)^SHOW\s+TABLES(?:\s+LIKE\s+'((?:[^']|'')*)')?(?:\s+IN\s+SCHEMA(?:\s+(.+?))?)?\s*;?$`)
	alterTableRE = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(.+?)\s+SET\s+(CHANGE_TRACKING|DATA_RETENTION_TIME_IN_DAYS)\s*=\s*(\w+)\s*;?$`)
	changesRE    = regexp.MustCompile(`(?is)\bFROM\s+((?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)(?:\s*\.\s*(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)){0,2})\s+CHANGES\s*\(\s*INFORMATION\s*=>\s*(\w+)\s*\)\s*AT\s*\(\s*(\w+)\s*=>\s*([^()]*(?:\([^()]*\))?)\s*\)(?:\s*END\s*\(\s*(\w+)\s*=>\s*([^()]*(?:\([^()]*\))?)\s*\))?`)
	ltzRE        = regexp.MustCompile(`(?i)^TO_TIMESTAMP_LTZ\(\s*(\d+)\s*,\s*(\d)\s*\)$`)
)

// point evaluates an AT or END point: TIMESTAMP => TO_TIMESTAMP_LTZ(n, scale)
// or OFFSET => seconds relative to now.
func point(kind, expr string) (time.Time, error) {
	expr = strings.TrimSpace(expr)
	switch strings.ToUpper(kind) {
	case "TIMESTAMP":
		m := ltzRE.FindStringSubmatch(expr)
		if m == nil {
			break
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			break
		}
		scale, _ := strconv.Atoi(m[2])
		ns := n
		for i := scale; i < 9; i++ {
			ns *= 10
		}
		return time.Unix(0, ns).UTC(), nil
	case "OFFSET":
		sec, err := strconv.ParseFloat(expr, 64)
		if err == nil {
			return now().Add(time.Duration(sec * float64(time.Second))), nil
		}
	}
	return time.Time{}, &sfError{"001003", "42000", fmt.Sprintf("SQL compilation error: sfserver supports %s => TO_TIMESTAMP_LTZ(<integer>, <scale>) or OFFSET => <seconds>, not %s", kind, expr)}
}

// changesQuery answers a CHANGES clause: it computes the delta into a
// table of the results schema (dropped once the result is made; see
// deltaTable) and returns q's SQL reading that instead, with the table
// queried. Without a CHANGES clause it returns q's SQL and
// a nil table.
func (s *Server) changesQuery(ctx context.Context, q *query) (string, *table, error) {
	m := changesRE.FindStringSubmatchIndex(q.sql)
	if m == nil {
		return q.sql, nil, nil
	}
	sub := func(i int) string {
		if m[2*i] < 0 {
			return ""
		}
		return q.sql[m[2*i]:m[2*i+1]]
	}
	t, err := s.lookup(q.sess, sub(1))
	if err != nil {
		return "", nil, err
	}
	if !strings.EqualFold(sub(2), "DEFAULT") {
		return "", nil, &sfError{"001003", "42000", "SQL compilation error: sfserver supports CHANGES(INFORMATION => DEFAULT) only"}
	}
	from, err := point(sub(3), sub(4))
	if err != nil {
		return "", nil, err
	}
	to := now()
	if sub(5) != "" {
		if to, err = point(sub(5), sub(6)); err != nil {
			return "", nil, err
		}
	}
	s.mu.Lock()
	tr := t.track
	s.mu.Unlock()
	horizon := now().AddDate(0, 0, -tr.retentionDays)
	if from.Before(tr.created) || from.Before(horizon) {
		return "", nil, &sfError{"000707", "02000", fmt.Sprintf("Time travel data is not available for table %s. The requested time is either beyond the allowed time travel period or before the object creation time.", t.name)}
	}
	if !tr.on || from.Before(tr.since) {
		return "", nil, &sfError{"091930", "2F003", fmt.Sprintf("SQL compilation error: Change tracking is not enabled or has been missing for the time range requested on table '%s'.", t.key())}
	}
	s.mu.Lock()
	cols := make([]string, len(t.cols))
	for i, c := range t.cols {
		cols[i] = quote(c.Name)
	}
	s.mu.Unlock()
	delta := deltaTable(q)
	// The interval is (from, to]: AT's state already holds what
	// committed at from, and END is inclusive.
	_, err = s.db.ExecContext(ctx, "CREATE TABLE "+delta+" AS SELECT "+strings.Join(cols, ", ")+`,
		"$a" AS "METADATA$ACTION",
		count(*) OVER (PARTITION BY "$r") = 2 AS "METADATA$ISUPDATE",
		printf('%016x%024x', `+strconv.FormatInt(tr.id, 10)+`, "$r") AS "METADATA$ROW_ID"
		FROM (SELECT *,
			row_number() OVER (PARTITION BY "$r" ORDER BY "$v", "$n", "$a" = 'INSERT') AS "$first",
			row_number() OVER (PARTITION BY "$r" ORDER BY "$v" DESC, "$n" DESC, "$a" = 'INSERT' DESC) AS "$last"
			FROM `+t.logTable()+` WHERE "$v" > ? AND "$v" <= ?)
		WHERE ("$first" = 1 AND "$a" = 'DELETE') OR ("$last" = 1 AND "$a" = 'INSERT')
		ORDER BY "$r", "$a"`, from.UnixMicro(), to.UnixMicro())
	if err != nil {
		return "", nil, err
	}
	return q.sql[:m[0]] + "FROM " + delta + q.sql[m[1]:], t, nil
}

func deltaTable(q *query) string { return "memory.results." + quote("d_"+q.id) }

// ensureLog creates t's change log.
func (s *Server) ensureLog(ctx context.Context, t *table) error {
	defs := []string{`"$v" BIGINT`, `"$n" BIGINT`, `"$a" VARCHAR`, `"$r" BIGINT`}
	for i, c := range t.cols {
		defs = append(defs, quote(c.Name)+" "+t.types[i].duckType())
	}
	if _, err := s.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quote(t.db)+"."+logSchema); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+t.logTable()+" ("+strings.Join(defs, ", ")+")")
	return err
}

// alterTable sets CHANGE_TRACKING or DATA_RETENTION_TIME_IN_DAYS.
func (s *Server) alterTable(ctx context.Context, q *query, name, prop, value string) (map[string]any, error) {
	t, err := s.lookup(q.sess, name)
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(prop) {
	case "CHANGE_TRACKING":
		on, err := strconv.ParseBool(value)
		if err != nil {
			return nil, &sfError{"002041", "22023", "SQL compilation error: invalid value [" + value + "] for parameter 'CHANGE_TRACKING'"}
		}
		if on {
			if err := s.ensureLog(ctx, t); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		if on && !t.track.on {
			t.track.since = now()
		}
		t.track.on = on
		s.mu.Unlock()
	default:
		days, err := strconv.Atoi(value)
		if err != nil || days < 0 || days > 90 {
			return nil, &sfError{"002041", "22023", "SQL compilation error: invalid value [" + value + "] for parameter 'DATA_RETENTION_TIME_IN_DAYS'"}
		}
		s.mu.Lock()
		t.track.retentionDays = days
		s.mu.Unlock()
	}
	status := "Statement executed successfully."
	return jsonResult(q, []string{"status"}, [][]*string{{&status}}), nil
}

// showTables lists the tables matching like (SQL LIKE, case-insensitive)
// in scope (IN SCHEMA [name]; no name or no IN is the session's schema),
// with the columns of
// Snowflake's SHOW TABLES the connector reads.
func (s *Server) showTables(q *query, like, scope string) (map[string]any, error) {
	db, schema := q.sess.database, q.sess.schema
	if scope != "" {
		parts, err := splitName(scope)
		if err != nil {
			return nil, err
		}
		switch len(parts) {
		case 1:
			schema = parts[0]
		default:
			db, schema = parts[0], parts[1]
		}
	}
	pattern := ".*"
	if like != "" {
		var b strings.Builder
		for _, r := range strings.ReplaceAll(like, "''", "'") {
			switch r {
			case '%':
				b.WriteString(".*")
			case '_':
				b.WriteString(".")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		pattern = b.String()
	}
	re, err := regexp.Compile("(?is)^" + pattern + "$")
	if err != nil {
		return nil, err
	}
	names := []string{"created_on", "name", "database_name", "schema_name", "kind", "comment", "cluster_by", "rows", "bytes", "owner", "retention_time", "automatic_clustering", "change_tracking", "is_external"}
	str := func(v string) *string { return &v }
	var rows [][]*string
	s.mu.Lock()
	for _, t := range s.tables {
		if t.db != db || t.schema != schema || !re.MatchString(t.name) {
			continue
		}
		ct := map[bool]string{true: "ON", false: "OFF"}[t.track.on]
		created := fmt.Sprintf("%d.%09d", t.track.created.Unix(), t.track.created.Nanosecond())
		rows = append(rows, []*string{str(created), str(t.name), str(t.db), str(t.schema), str("TABLE"), str(""), str(""),
			nil, nil, str("SYSADMIN"), str(strconv.Itoa(t.track.retentionDays)), str("OFF"), str(ct), str("N")})
	}
	s.mu.Unlock()
	res := jsonResult(q, names, rows)
	// created_on is a TIMESTAMP_LTZ, sent as JSON rowsets send one:
	// seconds since the epoch with nine fraction digits.
	rt := res["data"].(map[string]any)["rowtype"].([]map[string]any)
	rt[0] = resultCol{name: "created_on", t: sfType{name: "timestamp_ltz", scale: 9}, nullable: true}.rowType()
	return res, nil
}

// Exec runs a DML statement (DuckDB SQL: INSERT, UPDATE, DELETE,
// TRUNCATE) against table name, resolved in the default database and
// schema, as the warehouse's own users change their tables; the statement
// itself also runs there, so it names the table as it likes. When the
// table's change tracking is on, the rows it changed are recorded for
// CHANGES queries, at a time after the statement committed. Statements
// run one at a time.
func (s *Server) Exec(ctx context.Context, name, stmt string, args ...any) error {
	t, err := s.lookup(&session{database: s.cfg.Database, schema: s.cfg.Schema}, name)
	if err != nil {
		return err
	}
	s.dml.Lock()
	defer s.dml.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	s.mu.Lock()
	tracked := t.track.on
	s.seq++
	n := s.seq
	s.mu.Unlock()
	if _, err := conn.ExecContext(ctx, "USE "+quote(s.cfg.Database)+"."+quote(s.cfg.Schema)); err != nil {
		return err
	}
	if !tracked {
		if _, err := conn.ExecContext(ctx, stmt, args...); err != nil {
			return fmt.Errorf("sfserver: %s: %w", stmt, err)
		}
		return nil
	}
	// The statement commits before its rows are compared: inside its
	// transaction, the rows it inserts have provisional rowids.
	before := t.beforeTable()
	if _, err := conn.ExecContext(ctx, `CREATE OR REPLACE TABLE `+before+` AS SELECT rowid AS "$r", * FROM `+t.quoted()); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+before) //nolint:errcheck // a leftover is replaced next time
	if _, err := conn.ExecContext(ctx, stmt, args...); err != nil {
		return fmt.Errorf("sfserver: %s: %w", stmt, err)
	}
	v := now().UnixMicro()
	after := `SELECT rowid, * FROM ` + t.quoted()
	for _, sql := range []string{
		"BEGIN",
		"INSERT INTO " + t.logTable() + " SELECT ?, ?, 'DELETE', * FROM (SELECT * FROM " + before + " EXCEPT ALL " + after + ")",
		"INSERT INTO " + t.logTable() + " SELECT ?, ?, 'INSERT', * FROM (" + after + " EXCEPT ALL SELECT * FROM " + before + ")",
		"COMMIT",
	} {
		var a []any
		if strings.HasPrefix(sql, "INSERT") {
			a = []any{v, n}
		}
		if _, err := conn.ExecContext(ctx, sql, a...); err != nil {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			return fmt.Errorf("sfserver: log changes of %s: %w", t.key(), err)
		}
	}
	return nil
}

// AddColumn adds a column to table name (ALTER TABLE … ADD COLUMN).
func (s *Server) AddColumn(ctx context.Context, name string, c Column) error {
	t, err := s.lookup(&session{database: s.cfg.Database, schema: s.cfg.Schema}, name)
	if err != nil {
		return err
	}
	ty, err := parseType(c.Type)
	if err != nil {
		return err
	}
	s.dml.Lock()
	defer s.dml.Unlock()
	for _, tab := range []string{t.quoted(), t.logTable()} {
		if _, err := s.db.ExecContext(ctx, "ALTER TABLE IF EXISTS "+tab+" ADD COLUMN "+quote(c.Name)+" "+ty.duckType()); err != nil {
			return fmt.Errorf("sfserver: add column to %s: %w", t.key(), err)
		}
	}
	s.mu.Lock()
	t.cols, t.types = append(t.cols, c), append(t.types, ty)
	s.mu.Unlock()
	return nil
}

// DropTable drops table name; CreateTable may then make a new one of the
// same name, with a new id and creation time.
func (s *Server) DropTable(ctx context.Context, name string) error {
	t, err := s.lookup(&session{database: s.cfg.Database, schema: s.cfg.Schema}, name)
	if err != nil {
		return err
	}
	s.dml.Lock()
	defer s.dml.Unlock()
	for _, tab := range []string{t.quoted(), t.logTable()} {
		if _, err := s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+tab); err != nil {
			return fmt.Errorf("sfserver: drop %s: %w", t.key(), err)
		}
	}
	s.mu.Lock()
	delete(s.tables, t.key())
	s.mu.Unlock()
	return nil
}
