package store

import "context"

// Shared is the state that several processes on one store must agree on
// and that would otherwise live in each process's memory: OAuth bearer
// tokens (issued by one process, presented to another) and the
// per-project rate-limit budget. Only a token's SHA-256 is ever stored,
// so a read of the database reveals no usable credential.
type Shared interface {
	// PutToken records the token whose SHA-256 is hash for account until
	// expiresMs. Tokens that expired before nowMs are purged here, so the
	// table stays as small as the live tokens without a sweeper.
	PutToken(ctx context.Context, hash [32]byte, account string, expiresMs, nowMs int64) error
	// Token looks a token up by hash. An expired token may still be found
	// (until a PutToken purges it): the caller compares expiresMs with its clock.
	Token(ctx context.Context, hash [32]byte) (account string, expiresMs int64, ok bool, err error)
	// AddRate adds n bytes to project's counter for minute (unix time / 60)
	// and returns the counter's new total; concurrent calls never lose an
	// addition. Counters of minutes before minute-1 may be purged.
	AddRate(ctx context.Context, project, minute, n int64) (total int64, err error)
}
