package duckstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

// store.Shared on the embedded store. One process owns a DuckDB file, so
// the server keeps tokens and rate budgets in memory and never calls
// these; they exist so the store passes the same conformance suite as
// Postgres and so any future caller gets the same answers. Like runs,
// they bypass the write log: a DuckDB COMMIT is durable by itself.
//
// sharedSchema is this file's part of the schema (Open runs it after
// duckstore.go's list).
var sharedSchema = []string{
	`CREATE TABLE IF NOT EXISTS oauth_tokens (
		hash VARCHAR PRIMARY KEY, account VARCHAR NOT NULL, expires_ms BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS rate_usage (
		project BIGINT NOT NULL, minute BIGINT NOT NULL, total BIGINT NOT NULL, PRIMARY KEY (project, minute))`}

// PutToken implements store.Shared. The hash is kept as hex text: the
// table is never large and text keys are what DuckDB indexes best.
func (s *Store) PutToken(ctx context.Context, hash [32]byte, account string, expiresMs, nowMs int64) error {
	if err := s.enter("put token"); err != nil {
		return err
	}
	defer s.ops.Done()
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: put token: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE expires_ms < ?`, nowMs); err != nil {
		return fmt.Errorf("duckstore: purge tokens: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_tokens (hash, account, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET account = excluded.account, expires_ms = excluded.expires_ms`,
		hex.EncodeToString(hash[:]), account, expiresMs); err != nil {
		return fmt.Errorf("duckstore: put token: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: put token: %w", err)
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
	err := s.db.QueryRowContext(ctx, `SELECT account, expires_ms FROM oauth_tokens WHERE hash = ?`,
		hex.EncodeToString(hash[:])).Scan(&account, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("duckstore: token: %w", err)
	}
	return account, expires, true, nil
}

// AddRate implements store.Shared.
func (s *Store) AddRate(ctx context.Context, project, minute, n int64) (int64, error) {
	if err := s.enter("add rate"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("duckstore: add rate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM rate_usage WHERE project = ? AND minute < ?`, project, minute-1); err != nil {
		return 0, fmt.Errorf("duckstore: purge rate usage: %w", err)
	}
	var total int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO rate_usage (project, minute, total) VALUES (?, ?, ?)
		ON CONFLICT (project, minute) DO UPDATE SET total = rate_usage.total + excluded.total
		RETURNING total`, project, minute, n).Scan(&total); err != nil {
		return 0, fmt.Errorf("duckstore: add rate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("duckstore: add rate: %w", err)
	}
	return total, nil
}
