package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// beginReadOnly opens the read-only transaction every statement of a
// source runs in: the database then refuses writes a SELECT can still
// make (nextval, setval, lo_create, a data-modifying function), and the
// rollback that ends it also undoes any set_config the query made, so
// nothing carries over to the next statement on the pooled connection.
// Statements go through the extended protocol, whose Parse takes one
// statement only.
func beginReadOnly(ctx context.Context, conn *pgxpool.Conn) error {
	return conn.Conn().PgConn().Exec(ctx, "BEGIN READ ONLY").Close()
}

// rollback ends the transaction; a connection it fails on is closed
// rather than returned to the pool in a transaction.
func rollback(conn *pgxpool.Conn) {
	if conn.Conn().PgConn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.Conn().PgConn().Exec(ctx, "ROLLBACK").Close(); err != nil {
		conn.Conn().PgConn().Close(ctx)
	}
}
