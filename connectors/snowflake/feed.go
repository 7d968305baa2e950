package snowflake

// The change feed of a Mirror sync (connectors.ChangeFeed) through the
// CHANGES clause: SELECT … FROM t CHANGES(INFORMATION => DEFAULT)
// AT(TIMESTAMP => a) END(TIMESTAMP => b) returns the net row-level delta
// of the table between two points, from the change tracking metadata
// Snowflake keeps for the table's Time Travel retention. Unlike a stream,
// it is read-only: nothing is created in the warehouse, no offset is
// consumed, and a failed run simply reads the same interval again. It
// needs CHANGE_TRACKING = TRUE on the table, which only its owner may
// set; without it the feed is unavailable and the error says what to
// run, since Tributary never alters a customer's table.
//
// A position is the END timestamp of the last interval read, with the
// table's creation time and column fingerprint when the feed started: a
// table dropped and recreated (CREATE OR REPLACE) or altered is noticed
// even when the CHANGES query would still answer (Time Travel reads with
// the table's current columns).

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	sf "github.com/snowflakedb/gosnowflake"

	"github.com/tributary-dev/tributary/connectors"
)

var _ connectors.ChangeFeed = (*Source)(nil)

var feedName = regexp.MustCompile(`^[a-z0-9_]{1,255}$`)

func checkFeed(f connectors.Feed) error {
	if !feedName.MatchString(f.Name) {
		return fmt.Errorf("%w: feed name %q: lower-case letters, digits and underscores only", connectors.ErrBadRequest, f.Name)
	}
	if f.Table.Name == "" || f.Table.Query != "" {
		return fmt.Errorf("%w: a query has no change feed", connectors.ErrFeedUnavailable)
	}
	if len(f.Key) == 0 {
		return fmt.Errorf("%w: feed %s has no key columns", connectors.ErrBadRequest, f.Name)
	}
	return nil
}

// position is where a feed resumes: the END of the last interval read
// (Snowflake's clock, to the nanosecond), and the table's identity
// (a hash of its created_on) and column fingerprint when the feed
// started. Rendered "epoch-ns;identity;fingerprint".
type position struct {
	at              time.Time
	identity, shape uint64
}

func (p position) String() string {
	return fmt.Sprintf("%d;%016x;%016x", p.at.UnixNano(), p.identity, p.shape)
}

func parsePosition(s string) (position, error) {
	parts := strings.Split(s, ";")
	if len(parts) != 3 {
		return position{}, fmt.Errorf("%w: malformed position %q", connectors.ErrFeedLost, s)
	}
	ns, err1 := strconv.ParseInt(parts[0], 10, 64)
	id, err2 := strconv.ParseUint(parts[1], 16, 64)
	shape, err3 := strconv.ParseUint(parts[2], 16, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return position{}, fmt.Errorf("%w: malformed position %q", connectors.ErrFeedLost, s)
	}
	return position{at: time.Unix(0, ns).UTC(), identity: id, shape: shape}, nil
}

// feedTable is what the catalog says of a feed's table now.
type feedTable struct {
	ref      string // quoted, as Read names it
	exists   bool
	identity uint64 // hash of SHOW TABLES' created_on
	tracking bool   // SHOW TABLES' change_tracking is ON
	shape    uint64 // fingerprint of DESCRIBE TABLE's names and types
	columns  []string
}

func hash(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// sqlString is s as a Snowflake string literal (backslash escapes too).
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// lookupTable reads the table's SHOW TABLES row and its columns.
func (s *Source) lookupTable(ctx context.Context, t connectors.Table) (*feedTable, error) {
	parts, err := nameParts(t.Name)
	if err != nil {
		return nil, err
	}
	quoted := make([]string, len(parts))
	for i, p := range parts {
		quoted[i] = connectors.QuoteIdent(p)
	}
	ref := strings.Join(quoted, ".")
	// IN SCHEMA without a name is the session's schema, where an
	// unqualified name resolves.
	show := strings.TrimSpace("SHOW TABLES LIKE " + sqlString(parts[len(parts)-1]) + " IN SCHEMA " + strings.Join(quoted[:len(quoted)-1], "."))
	rows, err := s.textRows(ctx, show)
	if err != nil {
		return nil, err
	}
	out := &feedTable{ref: ref}
	for _, r := range rows {
		// LIKE's _ and % match more than the name.
		if r["name"] != parts[len(parts)-1] || (len(parts) > 1 && r["schema_name"] != parts[len(parts)-2]) ||
			(len(parts) > 2 && r["database_name"] != parts[0]) {
			continue
		}
		out.exists = true
		out.identity = hash(r["database_name"], r["schema_name"], r["created_on"])
		out.tracking = strings.EqualFold(r["change_tracking"], "ON")
	}
	if !out.exists {
		return out, nil
	}
	cols, err := s.textRows(ctx, "DESCRIBE TABLE "+ref)
	if err != nil {
		return nil, err
	}
	var shape []string
	for _, c := range cols {
		if c["kind"] != "" && c["kind"] != "COLUMN" {
			continue
		}
		out.columns = append(out.columns, c["name"])
		shape = append(shape, c["name"], c["type"])
	}
	out.shape = hash(shape...)
	return out, nil
}

// feedColumns is the feed's columns: f.Columns (all when empty), then
// any key column they lack.
func feedColumns(f connectors.Feed, ft *feedTable) ([]string, error) {
	want := slices.Clone(f.Columns)
	if len(want) == 0 {
		want = slices.Clone(ft.columns)
	}
	for _, k := range f.Key {
		if !slices.Contains(want, k) {
			want = append(want, k)
		}
	}
	for _, c := range want {
		if !slices.Contains(ft.columns, c) {
			return nil, fmt.Errorf("column %q of %s does not exist", c, ft.ref)
		}
	}
	return want, nil
}

// now is the end of a feed's next interval: Snowflake's clock, since
// positions compare with its commit times, less feedLag. The lag keeps a
// transaction that commits in the same instant as (or, on another of
// Snowflake's service nodes, a little after) the clock read out of an
// interval already read; it is read by the next one instead.
func (s *Source) now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.db.QueryRowContext(ctx, "SELECT CURRENT_TIMESTAMP").Scan(&t)
	return t.UTC().Add(-s.feedLag), err
}

// StartFeed implements connectors.ChangeFeed. It creates nothing: it
// checks that the table exists with change tracking on (else
// ErrFeedUnavailable, naming the ALTER TABLE to run; a view is
// unavailable too) and that the columns exist, and returns Snowflake's
// current time (less feedLag) as the position.
func (s *Source) StartFeed(ctx context.Context, f connectors.Feed) (string, error) {
	if err := checkFeed(f); err != nil {
		return "", err
	}
	op := "start change feed " + f.Name
	ft, err := s.lookupTable(ctx, f.Table)
	if err != nil {
		return "", classify(ctx, op, err)
	}
	if !ft.exists {
		// A view, or a table the role cannot see: the keyed re-diff reads
		// a view fine, and reports a missing table by itself.
		return "", fmt.Errorf("snowflake source: %s: %w: %s is not a table the role can see (a view has no change feed here)", op, connectors.ErrFeedUnavailable, f.Table.Name)
	}
	if !ft.tracking {
		return "", fmt.Errorf("snowflake source: %s: %w: change tracking is off on %s; its owner can turn it on with: ALTER TABLE %s SET CHANGE_TRACKING = TRUE",
			op, connectors.ErrFeedUnavailable, f.Table.Name, ft.ref)
	}
	if _, err := feedColumns(f, ft); err != nil {
		return "", connectors.Permanent(fmt.Errorf("snowflake source: %s: %w: %v", op, connectors.ErrNotFound, err))
	}
	at, err := s.now(ctx)
	if err != nil {
		return "", classify(ctx, op, err)
	}
	return position{at: at, identity: ft.identity, shape: ft.shape}.String(), nil
}

// changed says why the table is no longer the one the feed started on,
// or "" when it is.
func changed(p position, ft *feedTable, name string) string {
	switch {
	case !ft.exists:
		return name + " no longer exists"
	case ft.identity != p.identity:
		return name + " was dropped and created again"
	case !ft.tracking:
		return "change tracking was turned off on " + name
	case ft.shape != p.shape:
		return "the columns of " + name + " changed"
	}
	return ""
}

// Changes implements connectors.ChangeFeed: one CHANGES query from pos
// to Snowflake's current time. Deletes come first, then inserts and
// updates, so a key deleted and inserted again in the interval ends
// present; an update (METADATA$ISUPDATE) is one update row with the new
// values, or, when it changed the key, a delete of the old key and an
// update row of the new.
func (s *Source) Changes(ctx context.Context, f connectors.Feed, pos string, fn func(arrow.RecordBatch) error) (string, error) {
	if err := checkFeed(f); err != nil {
		return "", err
	}
	p, err := parsePosition(pos)
	if err != nil {
		return "", err
	}
	op := "read change feed " + f.Name
	ft, err := s.lookupTable(ctx, f.Table)
	if err != nil {
		return "", classify(ctx, op, err)
	}
	if why := changed(p, ft, f.Table.Name); why != "" {
		return "", fmt.Errorf("snowflake source: %s: %w: %s", op, connectors.ErrFeedLost, why)
	}
	cols, err := feedColumns(f, ft)
	if err != nil {
		return "", fmt.Errorf("snowflake source: %s: %w: %v", op, connectors.ErrFeedLost, err)
	}
	end, err := s.now(ctx)
	if err != nil {
		return "", classify(ctx, op, err)
	}
	next := position{at: end, identity: p.identity, shape: p.shape}
	if !end.After(p.at) {
		return pos, nil
	}
	err = s.query(ctx, changesSQL(ft.ref, cols, f.Key, p.at, end), nil, false, func(rows driver.Rows, rcols []column) error {
		return batches(ctx, rows, rcols, fn)
	})
	var fe fnError
	if errors.As(err, &fe) {
		return "", fe.err
	}
	if err != nil {
		return "", s.feedError(ctx, op, p, f.Table, err)
	}
	return next.String(), nil
}

// feedError makes the errors meaning the interval cannot be read
// ErrFeedLost: the start is older than the table's retention or its
// creation (000707), change tracking was off for part of it (091930), or
// the table was dropped, recreated or altered while the query ran.
func (s *Source) feedError(ctx context.Context, op string, p position, t connectors.Table, err error) error {
	var se *sf.SnowflakeError
	if ctx.Err() == nil && errors.As(err, &se) {
		switch se.Number {
		case 707, 91930:
			return fmt.Errorf("snowflake source: %s: %w: %s (%d)", op, connectors.ErrFeedLost, se.Message, se.Number)
		}
		if ft, lerr := s.lookupTable(ctx, t); lerr == nil {
			if why := changed(p, ft, t.Name); why != "" {
				return fmt.Errorf("snowflake source: %s: %w: %s (%v)", op, connectors.ErrFeedLost, why, err)
			}
		}
	}
	return classify(ctx, op, err)
}

// changesSQL selects the changes of ref in (from, to]: "$op", then cols,
// non-key columns null in deletes. The delete half of an update pair is
// dropped when the key did not change (same row id, same key: two rows).
func changesSQL(ref string, cols, key []string, from, to time.Time) string {
	const action, isUpdate, paired = `"METADATA$ACTION"`, `"METADATA$ISUPDATE"`, `"METADATA$PAIRED"`
	quoted := make([]string, len(cols))
	outer := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = connectors.QuoteIdent(c)
		outer[i] = quoted[i]
		if !slices.Contains(key, c) {
			outer[i] = "CASE WHEN " + action + " = 'DELETE' THEN NULL ELSE " + quoted[i] + " END AS " + quoted[i]
		}
	}
	keys := make([]string, len(key))
	for i, k := range key {
		keys[i] = connectors.QuoteIdent(k)
	}
	ts := func(t time.Time) string { return fmt.Sprintf("TO_TIMESTAMP_LTZ(%d, 9)", t.UnixNano()) }
	return "SELECT CASE WHEN " + action + " = 'DELETE' THEN 'delete' WHEN " + isUpdate + " THEN 'update' ELSE 'insert' END AS " +
		connectors.QuoteIdent(connectors.ChangeOpColumn) + ", " + strings.Join(outer, ", ") +
		"\nFROM (SELECT " + strings.Join(quoted, ", ") + ", " + action + ", " + isUpdate +
		", COUNT(*) OVER (PARTITION BY \"METADATA$ROW_ID\", " + strings.Join(keys, ", ") + ") AS " + paired +
		"\n  FROM " + ref + " CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => " + ts(from) + ") END(TIMESTAMP => " + ts(to) + ")) AS c" +
		"\nWHERE NOT (" + action + " = 'DELETE' AND " + isUpdate + " AND " + paired + " = 2)" +
		"\nORDER BY CASE WHEN " + action + " = 'DELETE' THEN 0 ELSE 1 END"
}

// ConfirmFeed implements connectors.ChangeFeed. It does nothing: the
// CHANGES clause holds nothing for a reader (the table's retention keeps
// its change tracking data, whoever reads it), so there is nothing to
// release. It checks the arguments only.
func (s *Source) ConfirmFeed(_ context.Context, f connectors.Feed, pos string) error {
	if !feedName.MatchString(f.Name) {
		return fmt.Errorf("%w: feed name %q", connectors.ErrBadRequest, f.Name)
	}
	_, err := parsePosition(pos)
	return err
}

// DropFeed implements connectors.ChangeFeed. It does nothing: StartFeed
// created nothing in the warehouse. Change tracking stays on the table,
// since its owner turned it on and other readers may use it.
func (s *Source) DropFeed(_ context.Context, f connectors.Feed) error {
	if !feedName.MatchString(f.Name) {
		return fmt.Errorf("%w: feed name %q", connectors.ErrBadRequest, f.Name)
	}
	return nil
}
