package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Advisory locks coordinate processes; all are transaction-scoped, so a
// crashed process or a dropped connection releases them.
//
//   - nsMode: every Write holds it shared for each project it touches, and
//     SetMode exclusively, so a mode never changes under a write that is
//     adding the project's first data.
//   - nsIdentity: held exclusively by a Write that changes a project's
//     identity graph or profiles. Those writes read state, decide and write
//     it back; one at a time per project keeps that simple and correct.
//     Event-only writes do not take it: the dedup index alone orders them.
//   - nsMigrate: Open's migrations, per schema.
//   - nsRun: StartRun, per (project, import), alone in its transaction, so
//     that reading the import's runs and inserting the new one is one
//     decision across processes.
//
// Keys mix in the schema, so stores in different schemas of one database
// (tests, tenants) never wait for each other. A write takes its locks before
// touching any row and in one global order (namespace, then key), so writes
// cannot deadlock on locks; row waits only come after every lock is held.
const (
	nsMigrate byte = iota + 1
	nsMode
	nsIdentity
	nsRun
)

// lockKey derives the 64-bit advisory lock key of (schema, namespace, project).
func lockKey(schema string, ns byte, project int64) int64 {
	return int64(lockHash(schema, ns, project).Sum64())
}

// runLockKey derives the nsRun key of one import. The import's bytes go
// after lockKey's, so the keys of the other namespaces stay those released
// builds take: processes of two builds running side by side during an
// upgrade must still exclude each other.
func runLockKey(schema string, project int64, importID string) int64 {
	h := lockHash(schema, nsRun, project)
	h.Write([]byte(importID))
	return int64(h.Sum64())
}

func lockHash(schema string, ns byte, project int64) hash.Hash64 {
	h := fnv.New64a()
	h.Write([]byte(schema))
	var b [10]byte
	b[1] = ns // b[0] = 0 separates the schema from the rest
	binary.BigEndian.PutUint64(b[2:], uint64(project))
	h.Write(b[:])
	return h
}

// lockProjects takes the write locks of a transaction: the mode lock shared
// for every project, the identity lock for those in ident.
func (s *Store) lockProjects(ctx context.Context, tx pgx.Tx, all, ident []int64) error {
	shared := make([]int64, len(all))
	for i, p := range all {
		shared[i] = lockKey(s.schema, nsMode, p)
	}
	excl := make([]int64, len(ident))
	for i, p := range ident {
		excl[i] = lockKey(s.schema, nsIdentity, p)
	}
	// Sorted keys make every transaction lock in the same order.
	slices.Sort(shared)
	slices.Sort(excl)
	// ORDER BY o pins the order the locks are taken in (PostgreSQL
	// evaluates volatile output columns after sorting). Both statements go
	// in one round trip.
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock_shared(k) FROM unnest($1::int8[]) WITH ORDINALITY AS t(k, o) ORDER BY o`, shared)
	if len(excl) > 0 {
		b.Queue(`SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) WITH ORDINALITY AS t(k, o) ORDER BY o`, excl)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("advisory locks: %w", err)
	}
	return nil
}
