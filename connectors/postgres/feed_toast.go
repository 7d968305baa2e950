package postgres

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/connectors"
)

// A TOASTed value (stored out of line, over about 2 kB) that an update
// leaves unchanged is not in pgoutput's new tuple, only a marker. The
// feed reads such values from the table by key rather than requiring
// REPLICA IDENTITY FULL of the user's table (more WAL on every update)
// or handing the engine a third state besides a value and NULL.

// closeFetch rolls back and returns the fetch connection, if one was taken.
func (d *decoder) closeFetch(ctx context.Context) {
	if d.fetch != nil {
		rollback(d.fetch)
		release(ctx, d.fetch, false)
		d.fetch = nil
	}
}

// fetchUnchanged reads columns missing of the row whose key is in d.vals
// from the table, through the read-only path Read uses, in Read's wire
// formats, into d.vals. The value read is the current one, which may be
// newer than this change; every change after this one is later in the
// stream, so the mirror still ends at the table's state.
func (d *decoder) fetchUnchanged(ctx context.Context, missing []int) (found bool, err error) {
	sh := d.sh
	var b strings.Builder
	b.WriteString("SELECT ")
	formats := make([]int16, len(missing))
	for j, i := range missing {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(connectors.QuoteIdent(sh.cols[i].name))
		formats[j] = sh.cols[i].format
	}
	b.WriteString(" FROM " + connectors.QuoteTable(d.f.Table.Name) + " WHERE ")
	params := make([][]byte, len(sh.keyIdx))
	paramFormats := make([]int16, len(sh.keyIdx))
	for j, i := range sh.keyIdx {
		if d.vals[i] == nil {
			return false, d.lost("an update of %s carries no value of key column %s", d.f.Table.Name, sh.cols[i].name)
		}
		if j > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "%s = $%d", connectors.QuoteIdent(sh.cols[i].name), j+1)
		params[j], paramFormats[j] = d.vals[i], sh.cols[i].format
	}
	op := "read unchanged values of " + d.f.Table.Name
	if d.fetch == nil {
		conn, err := d.s.pool.Acquire(ctx)
		if err != nil {
			return false, classify(ctx, op, err)
		}
		// READ COMMITTED whatever the role's default: each fetch must
		// see the latest commit, not the snapshot of the first one.
		if err := conn.Conn().PgConn().Exec(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY").Close(); err != nil {
			release(ctx, conn, false)
			return false, classify(ctx, op, err)
		}
		d.fetch = conn
	}
	rr := d.fetch.Conn().PgConn().ExecParams(ctx, b.String(), params, sh.keyTypes, paramFormats, formats)
	if rr.NextRow() {
		found = true
		for j, v := range rr.Values() {
			if v != nil {
				v = bytes.Clone(v)
			}
			d.vals[missing[j]] = v
		}
	}
	_, err = rr.Close()
	err = classify(ctx, op, err)
	return found, err
}
