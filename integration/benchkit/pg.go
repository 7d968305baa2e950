package benchkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGStore is a database created for one benchmark run on the -store
// server, so every run starts from an empty store and leaves nothing.
type PGStore struct {
	Admin *pgx.Conn // on the -store database, never on the run's
	Name  string
	URL   string // the servers' store key
}

// CreatePGStore creates a database named prefix + random hex on the
// server adminURL points at.
func CreatePGStore(ctx context.Context, adminURL, prefix string) (*PGStore, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("-store must be a postgres:// URL")
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("-store: %w", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("-store: %w", err)
	}
	u.Path = "/" + name
	return &PGStore{Admin: conn, Name: name, URL: u.String()}, nil
}

// Drop removes the run's database; the servers have stopped by then, and
// FORCE ends any connection they left behind.
func (p *PGStore) Drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Admin.Exec(ctx, "DROP DATABASE IF EXISTS "+p.Name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "drop database %s: %v\n", p.Name, err)
	}
	p.Admin.Close(ctx)
}

// Size is the run database's size on disk.
func (p *PGStore) Size(ctx context.Context) (int64, error) {
	var n int64
	err := p.Admin.QueryRow(ctx, `SELECT pg_database_size($1)`, p.Name).Scan(&n)
	return n, err
}
