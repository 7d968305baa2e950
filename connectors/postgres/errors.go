package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/connectors"
)

// classify wraps err from operation op so a sync knows whether retrying
// can help: missing objects are ErrNotFound, and authentication,
// permission, TLS-verification and SQL errors are permanent. Connection
// resets, timeouts, server restarts and resource exhaustion stay
// unwrapped (transient). A cancelled ctx wins over whatever the server
// said about the cancellation.
func classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) {
			return fmt.Errorf("postgres source: %s: %w", op, err)
		}
		return fmt.Errorf("postgres source: %s: %w (%v)", op, ctxErr, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case refused(pgErr):
			return connectors.Permanent(fmt.Errorf("postgres source: %s: %w: %w", op, connectors.ErrRefused, err))
		case notFound[pgErr.Code]:
			return connectors.Permanent(fmt.Errorf("postgres source: %s: %w: %v", op, connectors.ErrNotFound, err))
		case permanentCode(pgErr.Code):
			return connectors.Permanent(fmt.Errorf("postgres source: %s: %w", op, err))
		}
		return fmt.Errorf("postgres source: %s: %w", op, err)
	}
	if tlsVerification(err) {
		return connectors.Permanent(fmt.Errorf("postgres source: %s: %w", op, err))
	}
	return fmt.Errorf("postgres source: %s: %w", op, err)
}

// refused reports what the database itself refused because a source
// runs one read-only SELECT: a write in the read-only transaction or an
// attempt to make it read-write, a privilege the role lacks, more than
// one statement or anything that does not parse inside the subquery a
// query is wrapped in (a DELETE, COPY, a data-modifying WITH).
func refused(e *pgconn.PgError) bool {
	switch e.Code {
	case "25006", // read_only_sql_transaction
		"25001", // active_sql_transaction: read-write mode set mid-transaction
		"42501", // insufficient_privilege
		"42601": // syntax_error, "cannot insert multiple commands" included
		return true
	case "0A000": // feature_not_supported
		return strings.Contains(e.Message, "data-modifying")
	}
	return false
}

// connectFailed logs why a connection failed and returns an error that
// does not say: only whether retrying may help and whether the database
// is missing (see OpenWith).
func connectFailed(ctx context.Context, log *slog.Logger, err error) error {
	full := classify(ctx, "connect", err)
	log.Warn("postgres source: cannot connect", "err", full)
	const msg = "postgres source: cannot connect (the server log has the cause)"
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", msg, ctx.Err())
	case errors.Is(full, connectors.ErrNotFound):
		return connectors.Permanent(fmt.Errorf("%s: %w", msg, connectors.ErrNotFound))
	case connectors.IsPermanent(full):
		return connectors.Permanent(errors.New(msg))
	}
	return errors.New(msg)
}

var notFound = map[string]bool{
	"42P01": true, // undefined_table
	"42703": true, // undefined_column
	"3F000": true, // invalid_schema_name
	"3D000": true, // invalid_catalog_name: the database does not exist
}

// permanentCode reports SQLSTATEs no retry can fix. Class 08 (connection),
// 40 (serialization, deadlock), 53 (resources), 55 (lock not available),
// 57 (operator intervention: shutdown, cancel) and XX (internal) are
// left transient.
func permanentCode(code string) bool {
	if len(code) < 2 {
		return false
	}
	switch code[:2] {
	case "28", // invalid authorization: bad password, no pg_hba entry
		"42", // syntax error or access rule violation, incl. insufficient privilege
		"22", // data exception: a watermark the column type cannot hold
		"0A": // feature not supported
		return true
	}
	return false
}

// tlsVerification reports a certificate the server presented but that
// does not verify, or a server without TLS under an sslmode that needs it:
// configuration, not weather.
func tlsVerification(err error) bool {
	var unknownAuth x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	if errors.As(err, &unknownAuth) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) {
		return true
	}
	return strings.Contains(err.Error(), "server refused TLS connection")
}
