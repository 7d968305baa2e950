package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	duckdbdrv "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors"
)

// confine takes away everything a source does not need, once its
// database file is open: the file system outside the allowed paths
// (which also stops ATTACH, COPY … TO and INSTALL), extension loading,
// and then any change of these settings. They are database-wide, so
// every connection of the pool is bound by them. dbPath is the database
// file ("" in memory).
func confine(ctx context.Context, db *sql.DB, dbPath string, opts connectors.Options) error {
	var dirs, files []string
	for _, p := range opts.AllowedPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			files = append(files, p)
		} else {
			// A trailing separator keeps /data/in from admitting /data/inbox.
			dirs = append(dirs, strings.TrimSuffix(p, string(os.PathSeparator))+string(os.PathSeparator))
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Sources of one file in one process share DuckDB's database instance
	// (its instance cache): a second one finds it confined already, which
	// is fine only under the same limits, or being confined by another
	// source right now, which it waits out.
	var lastErr error
	applied := false
	for try := 0; try < 100; try++ {
		if try > 0 && !applied {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		var locked, external bool
		var curDirs, curFiles []any
		var temp string
		err = conn.QueryRowContext(ctx, `SELECT current_setting('lock_configuration'), current_setting('enable_external_access'),
			current_setting('allowed_directories')::VARCHAR[], current_setting('allowed_paths')::VARCHAR[], current_setting('temp_directory')`).
			Scan(&locked, &external, &curDirs, &curFiles, &temp)
		if err != nil {
			return fmt.Errorf("confine: %w", err)
		}
		if locked {
			// DuckDB adds its own files: the temp directory to the allowed
			// directories, the database file and its WAL files to the paths.
			if abs, err := filepath.Abs(temp); err == nil {
				temp = abs // a relative one is held absolute
			}
			tempDir := strings.TrimSuffix(temp, string(os.PathSeparator)) + string(os.PathSeparator)
			own := func(p string) bool { return p == tempDir || dbPath != "" && strings.HasPrefix(p, dbPath) }
			if external || !sameSet(curDirs, dirs, own) || !sameSet(curFiles, files, own) {
				return fmt.Errorf("confine: %w: the file is open in this process under other limits", connectors.ErrRefused)
			}
			return nil
		}
		if !external {
			continue // another source is confining the instance
		}
		// Checked once more when applied: another source may have set
		// its own lists between these SETs, or begun confining it first.
		lastErr = apply(ctx, conn, dirs, files)
		applied = lastErr == nil
	}
	return fmt.Errorf("confine: %w", lastErr)
}

func apply(ctx context.Context, conn *sql.Conn, dirs, files []string) error {
	for _, stmt := range []string{
		"SET allowed_directories = " + list(dirs),
		"SET allowed_paths = " + list(files),
		"SET enable_external_access = false",
		"SET autoload_known_extensions = false",
		"SET autoinstall_known_extensions = false",
		"SET allow_community_extensions = false",
		"SET lock_configuration = true",
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// sameSet reports whether cur holds exactly want, apart from DuckDB's own.
func sameSet(cur []any, want []string, own func(string) bool) bool {
	seen := map[string]bool{}
	for _, v := range cur {
		if str, _ := v.(string); !own(str) {
			seen[str] = true
		}
	}
	for _, w := range want {
		if !seen[w] {
			return false
		}
		delete(seen, w)
	}
	return len(seen) == 0
}

// list renders strings as a DuckDB list literal.
func list(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]::VARCHAR[]"
}

// run checks what t names and calls fn on a connection inside a
// read-only transaction, so not even a SELECT can change the database
// (nextval on a read_only: false file).
func (s *Source) run(ctx context.Context, t connectors.Table, fn func(*sql.Conn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("duckdb source: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION READ ONLY"); err != nil {
		return classify(err)
	}
	// Rolled back on a fresh context: a cancelled one must still end the
	// transaction before the connection goes back to the pool.
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // nothing was written
	if err := s.checkTable(ctx, conn, t); err != nil {
		return err
	}
	return fn(conn)
}

// checkTable refuses a query that is not one SELECT and a file name
// outside the allowed paths, with errors naming the import's field.
// DuckDB would refuse the files too; this says why in the user's terms.
func (s *Source) checkTable(ctx context.Context, conn *sql.Conn, t connectors.Table) error {
	if t.Query != "" {
		if err := parseOneSelect(ctx, conn, t.Query); err != nil {
			return err
		}
		return nil
	}
	if !isPath(t.Name) {
		return nil
	}
	real, err := connectors.ResolvePath(globBase(t.Name))
	if err != nil || !s.opts.Allowed(real) {
		return connectors.Permanent(fmt.Errorf("%w: %w", &connectors.FieldError{Field: "table_params.table",
			Msg: fmt.Sprintf("%s is not under the server's allowed_paths", t.Name)}, connectors.ErrRefused))
	}
	return nil
}

// parseOneSelect runs query through DuckDB's parser only
// (json_serialize_sql parses and serialises SELECTs, and refuses any
// other statement): preparing it instead would bind it, and binding
// alone has effects (EXPORT DATABASE creates its directory).
func parseOneSelect(ctx context.Context, conn *sql.Conn, query string) error {
	var text string
	if err := conn.QueryRowContext(ctx, "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", query).Scan(&text); err != nil {
		return classify(err)
	}
	var parsed struct {
		Error        bool              `json:"error"`
		ErrorType    string            `json:"error_type"`
		ErrorMessage string            `json:"error_message"`
		Statements   []json.RawMessage `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &parsed); err != nil {
		return fmt.Errorf("duckdb source: parse the query: %w", err)
	}
	msg := ""
	switch {
	case parsed.Error && parsed.ErrorType == "not implemented":
		msg = "must be one SELECT statement (DuckDB's parser found another kind of statement in it)"
	case parsed.Error:
		msg = "must be one SELECT statement DuckDB can parse: " + parsed.ErrorMessage
	case len(parsed.Statements) != 1:
		msg = fmt.Sprintf("must be one SELECT statement; it holds %d", len(parsed.Statements))
	default:
		return nil
	}
	return connectors.Permanent(fmt.Errorf("%w: %w", &connectors.FieldError{Field: "table_params.query", Msg: msg}, connectors.ErrRefused))
}

// globBase is the directory a glob's matches all lie in (the path
// itself when it has no wildcard).
func globBase(p string) string {
	i := strings.IndexAny(p, "*?[{")
	if i < 0 {
		return p
	}
	return filepath.Dir(p[:i] + "x")
}

// oneSelect is the last gate before a statement runs: it prepares query,
// which DuckDB refuses for more than one statement without running any
// (a query runs all but the last), and refuses any type but SELECT. Only
// statements built around a parse-checked query or a quoted name reach
// it, so what it binds is a SELECT.
func oneSelect(dc any, query string) error {
	c, ok := dc.(driver.Conn)
	if !ok {
		return fmt.Errorf("duckdb source: driver connection %T", dc)
	}
	st, err := c.Prepare(query)
	if err != nil {
		var de *duckdbdrv.Error
		if !errors.As(err, &de) && strings.Contains(err.Error(), "multi-statement") {
			return fmt.Errorf("duckdb source: %w: several statements; give one SELECT", connectors.ErrRefused)
		}
		return classify(err)
	}
	defer st.Close()
	ds, ok := st.(*duckdbdrv.Stmt)
	if !ok {
		return fmt.Errorf("duckdb source: driver statement %T", st)
	}
	typ, err := ds.StatementType()
	if err != nil {
		return classify(err)
	}
	if typ != duckdbdrv.STATEMENT_TYPE_SELECT {
		return fmt.Errorf("duckdb source: %w: a %s statement; give one SELECT", connectors.ErrRefused, typeName(typ))
	}
	return nil
}

func typeName(t duckdbdrv.StmtType) string {
	names := map[duckdbdrv.StmtType]string{
		duckdbdrv.STATEMENT_TYPE_INSERT: "INSERT", duckdbdrv.STATEMENT_TYPE_UPDATE: "UPDATE",
		duckdbdrv.STATEMENT_TYPE_DELETE: "DELETE", duckdbdrv.STATEMENT_TYPE_CREATE: "CREATE",
		duckdbdrv.STATEMENT_TYPE_DROP: "DROP", duckdbdrv.STATEMENT_TYPE_ALTER: "ALTER",
		duckdbdrv.STATEMENT_TYPE_COPY: "COPY", duckdbdrv.STATEMENT_TYPE_ATTACH: "ATTACH",
		duckdbdrv.STATEMENT_TYPE_DETACH: "DETACH", duckdbdrv.STATEMENT_TYPE_LOAD: "LOAD/INSTALL",
		duckdbdrv.STATEMENT_TYPE_SET: "SET", duckdbdrv.STATEMENT_TYPE_VARIABLE_SET: "SET VARIABLE",
		duckdbdrv.STATEMENT_TYPE_PRAGMA: "PRAGMA", duckdbdrv.STATEMENT_TYPE_CALL: "CALL",
		duckdbdrv.STATEMENT_TYPE_EXPLAIN: "EXPLAIN", duckdbdrv.STATEMENT_TYPE_EXPORT: "EXPORT",
		duckdbdrv.STATEMENT_TYPE_TRANSACTION: "transaction", duckdbdrv.STATEMENT_TYPE_CREATE_FUNC: "CREATE FUNCTION",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("non-SELECT (type %d)", t)
}
