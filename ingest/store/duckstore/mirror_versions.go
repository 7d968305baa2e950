package duckstore

import (
	"context"
	"database/sql"
	"fmt"
)

// A Mirror state is versioned: a changed key gets a new row, stamped
// with a later write sequence (wseq), and a removed key a tombstone row
// (flag mirrorGone); a key's row with the greatest wseq is its state.
// Nothing is deleted from mirror_keys while a run applies its changes.
//
// Why: DuckDB 1.5 keeps, for each 2,048-row vector a DELETE touches, an
// array of per-row delete ids (16 KiB, ~25 KiB measured with its
// allocator) in pinned memory it cannot spill, and a checkpoint does not
// free it (measured: deleting 1 % of a 5M-row table at random holds
// 61 MiB through FORCE CHECKPOINT, 41 MiB again once the file is
// reopened and scanned). A second Mirror run that deleted its changed
// keys' rows touched every vector of the state, and with the replaced
// events' versions every vector of the events table too: at 5M rows more
// than `tributary sync`'s whole DuckDB share. Appended rows cost nothing
// of the kind once committed.
//
// Superseded rows, tombstones and settled deletes are dropped by a
// compaction (compactMirrorKeys) once they are an eighth of an import's
// rows. It writes the live rows into a new table and drops the old one:
// dropping a table frees its version info, which deleting its rows would
// have made. mirror_marks.dead counts them, so the reads pick the latest
// version of a key only while there is more than one.

// mirrorGone is a removed key's tombstone flag: never read as a state.
const mirrorGone = 255

// mirrorLatest keeps a key's latest row (m, filtered by project and
// import) when it is live: not a tombstone, not a settled delete. Its
// parameter is the settled write sequence. At an equal wseq (a row and
// a tombstone of one apply) the row wins.
const mirrorLatest = `QUALIFY row_number() OVER (PARTITION BY m.key ORDER BY m.wseq DESC, m.flag) = 1 AND ` + mirrorLive

// mirrorLive: m is neither a tombstone nor a settled delete (parameter:
// the settled write sequence).
const mirrorLive = `m.flag <> 255 AND NOT (m.flag = 2 AND m.wseq <= ?::BIGINT)`

// compactShare: a compaction runs once dead rows exceed 1/compactShare
// of an import's rows. A run changing 1 % of a table then compacts
// every dozen runs; its reads stay within ~12 % of the live state.
const compactShare = 8

// mirrorMarks returns the import's settled write sequence and its dead
// rows (superseded versions, tombstones, deletes).
func mirrorMarks(ctx context.Context, db queryRower, project int64, importID string) (settled, dead int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT coalesce(max(settled), 0), coalesce(max(dead), 0) FROM mirror_marks
		WHERE project = ? AND import = ?`, project, importID).Scan(&settled, &dead)
	return settled, dead, err
}

// mirrorAppendTx writes a's rows and tombstones (for a.Remove) as new
// versions and counts the rows they supersede as dead. gone are the keys
// of both, registered as mirrorKeysView; a.Rows and the tombstones are
// mirrorRowsView.
func mirrorAppendTx(ctx context.Context, conn *sql.Conn, a mirrorApplyArgs) error {
	var old int64
	if a.replaced != nil {
		old = *a.replaced // the caller's lookup found them: no second scan of the state
	} else {
		lo, hi := keyRange(a.gone)
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM mirror_keys WHERE project = ?::BIGINT AND import = ?::VARCHAR
		AND key BETWEEN ?::BLOB AND ?::BLOB AND key IN (SELECT k FROM `+mirrorKeysView+`)`,
			a.project, a.importID, lo, hi).Scan(&old); err != nil {
			return fmt.Errorf("count replaced keys: %w", err)
		}
	}
	var seq int64
	if err := conn.QueryRowContext(ctx, `INSERT INTO mirror_marks (project, import, applied, settled, dead) VALUES (?, ?, 1, 0, ?)
		ON CONFLICT (project, import) DO UPDATE SET applied = mirror_marks.applied + 1,
			dead = coalesce(mirror_marks.dead, 0) + excluded.dead RETURNING applied`,
		a.project, a.importID, old+a.deadRows).Scan(&seq); err != nil {
		return fmt.Errorf("write sequence: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO mirror_keys
		SELECT ?::BIGINT, ?::VARCHAR, key, hash, ref, flag, ?::BIGINT, ?::BIGINT FROM `+mirrorRowsView,
		a.project, a.importID, a.gen, seq); err != nil {
		return fmt.Errorf("upsert keys: %w", err)
	}
	return nil
}

type mirrorApplyArgs struct {
	project  int64
	importID string
	gen      int64
	gone     [][]byte
	// deadRows: rows written that are dead as soon as settled
	// (tombstones, deletes).
	deadRows int64
	// replaced: rows of gone's keys already in the state, when the caller
	// knows (store.MirrorApply.Replaced).
	replaced *int64
}

// maybeCompactMirror compacts mirror_keys when the import's dead rows
// exceed its share.
func (s *Store) maybeCompactMirror(ctx context.Context, project int64, importID string) error {
	s.mirrorMu.RLock()
	_, dead, err := mirrorMarks(ctx, s.db, project, importID)
	var rows int64
	if err == nil && dead > 0 {
		err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM mirror_keys WHERE project = ? AND import = ?`,
			project, importID).Scan(&rows)
	}
	s.mirrorMu.RUnlock()
	if err != nil {
		return err
	}
	if dead == 0 || dead*compactShare < rows {
		return nil
	}
	s.log.Info("duckstore: compacting Mirror states", "project", project, "import", importID, "rows", rows, "dead", dead)
	return s.compactMirrorKeys(ctx)
}

// compactMirrorKeys rewrites mirror_keys with the latest live row of
// each key (every import's: the table is shared), in key order so that
// lookups keep pruning row groups by key range, and drops the old table.
// It runs alone (mirrorMu) and in one transaction: a crash leaves the
// table as it was.
func (s *Store) compactMirrorKeys(ctx context.Context) error {
	s.mirrorMu.Lock()
	defer s.mirrorMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range []string{
		`DROP TABLE IF EXISTS mirror_keys_compact`,
		fmt.Sprintf(mirrorKeysDDL, "mirror_keys_compact"),
		`INSERT INTO mirror_keys_compact
			SELECT m.project, m.import, m.key, m.hash, m.ref, m.flag, m.seen, m.wseq
			FROM mirror_keys m LEFT JOIN mirror_marks k ON k.project = m.project AND k.import = m.import
			QUALIFY row_number() OVER (PARTITION BY m.project, m.import, m.key ORDER BY m.wseq DESC, m.flag) = 1
				AND m.flag <> 255 AND NOT (m.flag = 2 AND m.wseq <= coalesce(k.settled, 0))
			ORDER BY m.project, m.import, m.key`,
		`DROP TABLE mirror_keys`,
		`ALTER TABLE mirror_keys_compact RENAME TO mirror_keys`,
		`UPDATE mirror_marks SET dead = 0`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("compact mirror state: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("compact mirror state: %w", err)
	}
	return nil
}
