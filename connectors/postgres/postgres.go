// Package postgres is the PostgreSQL (and wire-compatible) warehouse
// source. Rows arrive in the binary wire format of the extended query
// protocol and are decoded straight into Arrow builders, column by column,
// without going through Go values; see read.go and decode.go.
//
// Types: int2/int4/int8 → int16/int32/int64; float4/float8 → float32/
// float64; bool; text, varchar, char (padded, as PostgreSQL prints it),
// name, json and jsonb → utf8 (JSON text as stored); uuid → utf8 in
// canonical form; bytea → binary; timestamp → timestamp[us] and
// timestamptz → timestamp[us, UTC]; date → date32; numeric(p,s) with
// p ≤ 38 → decimal128(p,s), other numerics → utf8 as PostgreSQL prints
// them ("NaN", "Infinity" included); arrays of these → list, a
// multi-dimensional array flattened in row-major order. Every other type
// is read in text format as utf8. Values Arrow cannot hold become NULL:
// ±infinity timestamps and dates, NaN in a decimal128 column, and
// timestamps after 294247-01-10.
package postgres

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tributary-dev/tributary/connectors"
)

// Kind is the `kind: postgres` source, logging nowhere.
func Kind() connectors.Kind { return KindWith(connectors.Options{}) }

// KindWith is the `kind: postgres` source; connection failures' causes go
// to opts.Log only (see OpenWith).
func KindWith(opts connectors.Options) connectors.Kind {
	return connectors.Kind{
		Name: "postgres",
		Doc:  "PostgreSQL, read through the binary protocol (tested with 15). Give either dsn or host and the other fields.",
		Fields: []connectors.Field{
			{Name: "dsn", Secret: true, Doc: "libpq connection string or postgres:// URL, as ${ENV} because it may carry a password. Excludes the other fields; without sslmode in it, verify-full applies."},
			{Name: "host", Doc: "Server host name (required without dsn)."},
			{Name: "port", Doc: "Server port (default 5432)."},
			{Name: "user", Doc: "Role to connect as."},
			{Name: "password", Secret: true, Doc: "Password of user, as ${ENV}."},
			{Name: "database", Doc: "Database name (default: the user name)."},
			{Name: "sslmode", Doc: "verify-full (default), verify-ca, require, or disable (local use only)."},
			{Name: "sslrootcert", Path: true, Doc: "CA certificate file for verify-full and verify-ca (default: the system roots)."},
			{Name: "publication", Doc: "Mirror sync only: an existing publication covering the mirrored tables, used instead of one Tributary creates (docs/imports.md)."},
		},
		Check: check,
		Open: func(ctx context.Context, f map[string]string) (connectors.Source, error) {
			return OpenWith(ctx, f, opts)
		},
	}
}

// readBufferSize is each connection's socket read buffer (see Open).
const readBufferSize = 256 << 10

var sslModes = []string{"verify-full", "verify-ca", "require", "disable"}

func check(f map[string]string) error {
	if f["dsn"] != "" {
		if err := checkPublication(f["publication"]); err != nil {
			return err
		}
		for _, k := range []string{"host", "port", "user", "password", "database", "sslmode", "sslrootcert"} {
			if f[k] != "" {
				return &connectors.FieldError{Field: "source." + k, Msg: "cannot be combined with dsn (put it in the dsn)"}
			}
		}
		return nil
	}
	if err := checkPublication(f["publication"]); err != nil {
		return err
	}
	if strings.TrimSpace(f["host"]) == "" {
		return &connectors.FieldError{Field: "source.host", Msg: "is required without dsn"}
	}
	if v := f["port"]; v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
			return &connectors.FieldError{Field: "source.port", Msg: fmt.Sprintf("%q is not a port number", v)}
		}
	}
	if v := f["sslmode"]; v != "" {
		ok := false
		for _, m := range sslModes {
			ok = ok || v == m
		}
		if !ok {
			// prefer and allow are refused: they fall back to plain text
			// silently, which is exactly what a default must not do.
			return &connectors.FieldError{Field: "source.sslmode", Msg: fmt.Sprintf("must be one of %s; got %q", strings.Join(sslModes, ", "), v)}
		}
	}
	return nil
}

// connString renders fields as a connection string for pgx. Field values
// are quoted, so a password with spaces or quotes cannot inject keywords.
func connString(f map[string]string) (string, error) {
	if dsn := f["dsn"]; dsn != "" {
		if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
			u, err := url.Parse(dsn)
			if err != nil {
				// url's error would echo the DSN, password included.
				return "", &connectors.FieldError{Field: "source.dsn", Msg: "is not a valid URL"}
			}
			q := u.Query()
			if q.Get("sslmode") == "" {
				q.Set("sslmode", "verify-full")
				u.RawQuery = q.Encode()
			}
			return u.String(), nil
		}
		// In keyword/value form a later keyword wins, so the DSN's own
		// sslmode, if any, overrides this default.
		return "sslmode=verify-full " + dsn, nil
	}
	kv := []string{"host", f["host"], "port", or(f["port"], "5432"), "sslmode", or(f["sslmode"], "verify-full")}
	for _, k := range []string{"user", "password", "sslrootcert"} {
		if f[k] != "" {
			kv = append(kv, k, f[k])
		}
	}
	if f["database"] != "" {
		kv = append(kv, "dbname", f["database"])
	}
	var b strings.Builder
	for i := 0; i < len(kv); i += 2 {
		v := strings.ReplaceAll(strings.ReplaceAll(kv[i+1], `\`, `\\`), `'`, `\'`)
		fmt.Fprintf(&b, "%s='%s' ", kv[i], v)
	}
	return strings.TrimSpace(b.String()), nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Source reads the tables of one PostgreSQL database.
type Source struct {
	pool *pgxpool.Pool
	// publication is the user's own publication for change feeds
	// (feed.go); empty: each feed creates its own.
	publication string
}

// Open is OpenWith without a log.
func Open(ctx context.Context, fields map[string]string) (*Source, error) {
	return OpenWith(ctx, fields, connectors.Options{})
}

// OpenWith connects with fields (see Kind) and checks the connection, so
// bad credentials fail here, permanently. The error of a failed
// connection says only that it failed, and the cause goes to opts.Log:
// errors reach the run history a project user reads, and "connection
// refused" against "unexpected EOF" would tell a closed port from an open
// one on whatever host the source names.
//
// Every statement runs in a read-only transaction (see tx.go); a
// superuser's read-only transaction still reads the server's files
// (pg_read_file), so connecting as one is logged as a warning.
func OpenWith(ctx context.Context, fields map[string]string, opts connectors.Options) (*Source, error) {
	if err := check(fields); err != nil {
		return nil, connectors.Permanent(err)
	}
	cs, err := connString(fields)
	if err != nil {
		return nil, connectors.Permanent(err)
	}
	cfg, err := pgxpool.ParseConfig(cs)
	if err != nil {
		// pgx's parse error quotes the connection string; keep only its kind.
		return nil, connectors.Permanent(fmt.Errorf("postgres source: invalid connection settings: %s", redactParseError(err)))
	}
	cfg.MaxConns = 4
	cfg.MaxConnIdleTime = 5 * time.Minute
	cc := cfg.ConnConfig
	cc.RuntimeParams["application_name"] = "tributary"
	// Text-format fallback columns (interval, timetz, …) then render the
	// same whatever the role's default time zone.
	cc.RuntimeParams["timezone"] = "UTC"
	// A cancelled context sends a cancel request, so the server stops the
	// query instead of computing it for a client that has gone; the
	// deadline is the fallback when the server does not answer.
	cc.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	// pgx reads the socket into an 8 KiB buffer, one read(2) per 8 KiB:
	// 130k of them for a 5M-row table, each dear on a virtual machine. A
	// larger buffer in front takes whatever the socket holds at once.
	cc.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, readBufferSize), w)
	}
	log := opts.Logger()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectFailed(ctx, log, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectFailed(ctx, log, err)
	}
	var super bool
	if err := pool.QueryRow(ctx, "SELECT usesuper FROM pg_catalog.pg_user WHERE usename = current_user").Scan(&super); err == nil && super {
		log.Warn("postgres source connects as a superuser: its queries can read the database server's files; give it a role with SELECT grants only",
			"host", cc.Host, "database", cc.Database, "user", cc.User)
	}
	return &Source{pool: pool, publication: fields["publication"]}, nil
}

// redactParseError keeps the reason of pgx's parse error and drops the
// connection string it quotes, whose password masking is best effort.
func redactParseError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "`: "); i >= 0 {
		return s[i+3:]
	}
	return "cannot parse"
}

// Close closes every connection.
func (s *Source) Close() error {
	s.pool.Close()
	return nil
}
