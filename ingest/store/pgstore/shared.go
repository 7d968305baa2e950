package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// store.Shared: what several processes on one database must agree on
// (tables oauth_tokens and rate_usage, migration 7). Each call is one
// statement, so one round trip and no explicit transaction.

// PutToken implements store.Shared. The purge rides the insert in one
// statement: issuing tokens is what makes the table grow, so it is also
// what keeps it small, and the expiry index makes the purge a range scan.
func (s *Store) PutToken(ctx context.Context, hash [32]byte, account string, expiresMs, nowMs int64) error {
	if err := s.enter("put token"); err != nil {
		return err
	}
	defer s.ops.Done()
	_, err := s.pool.Exec(ctx, `WITH purge AS (DELETE FROM oauth_tokens WHERE expires_ms < $4)
		INSERT INTO oauth_tokens (hash, account, expires_ms) VALUES ($1, $2, $3)
		ON CONFLICT (hash) DO UPDATE SET account = excluded.account, expires_ms = excluded.expires_ms`,
		hash[:], account, expiresMs, nowMs)
	if err != nil {
		return fmt.Errorf("pgstore: put token: %w", err)
	}
	return nil
}

// Token implements store.Shared.
func (s *Store) Token(ctx context.Context, hash [32]byte) (string, int64, bool, error) {
	if err := s.enter("token"); err != nil {
		return "", 0, false, err
	}
	defer s.ops.Done()
	var account string
	var expires int64
	err := s.pool.QueryRow(ctx, `SELECT account, expires_ms FROM oauth_tokens WHERE hash = $1`, hash[:]).Scan(&account, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("pgstore: token: %w", err)
	}
	return account, expires, true, nil
}

// AddRate implements store.Shared. The upsert's row lock serialises
// processes charging one project in the same minute, so RETURNING gives
// each caller the total including exactly its own addition. The purge of
// the project's older minutes shares the statement; it touches at most the
// one or two rows a project leaves behind per minute.
func (s *Store) AddRate(ctx context.Context, project, minute, n int64) (int64, error) {
	if err := s.enter("add rate"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	var total int64
	err := s.pool.QueryRow(ctx, `WITH purge AS (DELETE FROM rate_usage WHERE project = $1 AND minute < $2 - 1)
		INSERT INTO rate_usage (project, minute, total) VALUES ($1, $2, $3)
		ON CONFLICT (project, minute) DO UPDATE SET total = rate_usage.total + excluded.total
		RETURNING total`, project, minute, n).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("pgstore: add rate: %w", err)
	}
	return total, nil
}
