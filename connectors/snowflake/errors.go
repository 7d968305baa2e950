package snowflake

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sf "github.com/snowflakedb/gosnowflake"

	"github.com/tributary-dev/tributary/connectors"
)

// classify wraps err from operation op so a sync knows whether retrying
// can help. Failed logins, missing objects or grants, SQL errors and bad
// configuration are permanent, with a hint of what to fix; HTTP 5xx,
// network errors, timeouts and whatever else the driver reports stay
// unwrapped (transient). A cancelled ctx wins over what the driver said.
func classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) {
			return fmt.Errorf("snowflake source: %s: %w", op, err)
		}
		return fmt.Errorf("snowflake source: %s: %w (%v)", op, ctxErr, err)
	}
	var se *sf.SnowflakeError
	if !errors.As(err, &se) {
		return fmt.Errorf("snowflake source: %s: %w", op, err)
	}
	switch se.Number {
	case 8: // statement count mismatch: several statements
		return connectors.Permanent(fmt.Errorf("snowflake source: %s: %w: one SELECT only: %v", op, connectors.ErrRefused, err))
	case 1003: // syntax error: what is not a SELECT does not parse in the subquery
		return connectors.Permanent(fmt.Errorf("snowflake source: %s: %w: one SELECT only: %v", op, connectors.ErrRefused, err))
	}
	if hint, ok := notFound(se); ok {
		return connectors.Permanent(fmt.Errorf("snowflake source: %s: %w: %v (%s)", op, connectors.ErrNotFound, err, hint))
	}
	if hint, ok := permanent(se); ok {
		return connectors.Permanent(fmt.Errorf("snowflake source: %s: %w (%s)", op, err, hint))
	}
	return fmt.Errorf("snowflake source: %s: %w", op, err)
}

// notFound recognises missing tables, views, columns and schemas. Snowflake
// reports an object the role may not see as missing, so the hint names
// both causes.
func notFound(se *sf.SnowflakeError) (string, bool) {
	switch se.Number {
	case 2003, 2043: // object does not exist or not authorized
		return "check the name (unquoted parts are upper-cased) and that the role has USAGE on its database and schema and SELECT on it", true
	case 904: // invalid identifier: a column
		return "check the column names; quoted lower-case names must match exactly", true
	case 390201: // database given at login does not exist or not authorized
		return "check source.database and that the role has USAGE on it", true
	}
	return "", false
}

// permanent recognises errors no retry can fix.
func permanent(se *sf.SnowflakeError) (string, bool) {
	switch n := se.Number; {
	case n == 390100 || n == 390144 || n == 390106 || n == 390102 || n == 394304 || n == 394300 || n == 394301:
		// wrong password, invalid JWT (key not registered with ALTER
		// USER … SET RSA_PUBLIC_KEY, or clock skew), disabled or
		// locked user
		return "authentication failed: check source.user and its password or key pair", true
	case n == sf.ErrCodeFailedToConnect:
		// 401/403 at login: an unknown account answers so
		return "login refused: check source.account", true
	case n == 390189 || n == 390190 || n == 390186:
		return "the role is not granted to the user: check source.role", true
	case n == 606: // no active warehouse
		return "no warehouse: set source.warehouse or a default warehouse for the user, and grant USAGE on it", true
	case n == 3001 || n == 3003: // insufficient privileges
		return "insufficient privileges: grant the role SELECT on the table and USAGE on its database, schema and warehouse", true
	case n >= 260000 && n < 261000 && n != sf.ErrCodeServiceUnavailable && n != sf.ErrCodeIdpConnectionError:
		// the driver's own checks of the settings (empty account, bad
		// port, unparsable key, …)
		return "invalid connection settings", true
	}
	switch state := se.SQLState; {
	case strings.HasPrefix(state, "28"): // invalid authorization
		return "authentication failed", true
	case strings.HasPrefix(state, "42"): // syntax error or access rule violation
		return "the statement was rejected", true
	case strings.HasPrefix(state, "22"): // data exception: a watermark the column cannot hold
		return "a value does not fit its column type", true
	case strings.HasPrefix(state, "0A"): // feature not supported
		return "not supported", true
	}
	return "", false
}
