package duckstore

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"github.com/tributary-dev/tributary/internal/duckarrow"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// The loader folds durable log entries into the DuckDB tables in the
// background, events as Arrow batches (arrowload.go), the rare merges with
// an Appender. Write acknowledges after the log flush; a DuckDB checkpoint
// (each large loader commit runs one) then only delays the loader, never a
// client. Each loader transaction records the last LSN
// it applied in log_state, so a crash between COMMIT and log truncation
// replays nothing twice: exactly-once by construction, even for events
// without $insert_id.

const (
	// loadTxnRows bounds one loader transaction, so that scans waiting for
	// the loader (read-your-writes) see progress at least this often. Two
	// row groups: one commit costs about half a second under load; a
	// single row group per commit was measured to keep up less well with
	// /import at saturation. It is the default and the ceiling of
	// Options.LoadTxnRows.
	loadTxnRows = 2 * arrowChunkRows
	// defaultLag is how many log bytes may wait for the loader before
	// Write slows down (Options.LoaderLagBytes), and four times it before
	// Write waits: a bound on replay time (~2 s per 256MB) and on scan
	// lag, not on memory, since the log is on disk and the loader streams
	// it. At saturation the loader keeps up on average but runs up to
	// ~250MB behind around its commits; a 256MB hard bound turned those
	// moments into stalls of every writer (p99 0.4-1.4 s), 512MB absorbs
	// them. Between the two, each Write is delayed by up to maxPace, in
	// proportion (see Store.pace).
	defaultLag = 128 << 20
	maxPace    = 100 * time.Millisecond
)

var errTxnFull = errors.New("transaction full")

// The loader gathers a row group of rows (gatherRows) before it commits,
// unless someone waits for it (hurry), the store closes, loaderGather
// passes or twice LoaderLagBytes are logged (rows so large that a row
// group would hold the writers back). DuckDB writes a transaction that
// appends a row group or more straight to the table file, compressed as
// each row group fills, and merges it at COMMIT; a smaller one is copied
// into the table's last row group and written to DuckDB's own WAL at
// COMMIT, then compressed again by the checkpoint. A loader that applied
// at every write (a migration's writes never pause) spent ~40 % of its
// CPU on that copy and WAL (perf); BenchmarkLoad's loader with
// transactions of 5,000-25,000 rows took 2.6-3.6 CPU µs per event, with
// 122,880-245,760 rows 1.5-2.4.
const loaderGather = time.Second

// runLoader applies entries whenever Write signals, until quit; then it
// drains what is left so Close leaves an empty log.
func (s *Store) runLoader() {
	defer close(s.loaderDone)
	backoff := 10 * time.Millisecond
	quitting := false
	for !quitting {
		select {
		case <-s.wake:
		case <-s.quit:
			quitting = true
		}
		// A pass that left a partial transaction gathers again without
		// waiting for a wake: no write may come for a while.
		for more := true; more; {
			all := quitting || s.gatherWait <= 0
			if !all {
				all, quitting = s.gather()
			}
			var err error
			more, err = s.applyPending(context.Background(), all)
			s.setLoaderErr(err)
			if err == nil {
				backoff = 10 * time.Millisecond
				continue
			}
			s.log.Error("duckstore: applying the log failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.quit:
				if quitting {
					return // Close: the log keeps the entries for the next Open
				}
				quitting = true
			}
			backoff = min(backoff*2, 5*time.Second)
			more = true
		}
	}
}

// gather waits until a full transaction of rows is logged and reports
// all: apply what there is even if it is less, because s.gatherWait
// passed, a waiter hurries the loader or the store is closing.
func (s *Store) gather() (all, quitting bool) {
	t := time.NewTimer(s.gatherWait)
	defer t.Stop()
	for {
		ready, hurry := s.txnReady()
		switch {
		case ready:
			return false, false
		case hurry:
			return true, false
		}
		select {
		case <-s.wake:
		case <-t.C:
			return true, false
		case <-s.quit:
			return true, true
		}
	}
}

// txnReady reports whether a transaction the loader gathers for waits (a
// row group of rows, or twice as many bytes as writes may run ahead
// unslowed, so a lag of few large rows never waits for loaderGather), and
// whether someone waits for the loader.
func (s *Store) txnReady() (ready, hurry bool) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.unappliedRows >= s.gatherRows || s.unapplied >= 2*s.paceFrom, s.hurry > 0
}

// applyPending applies every entry durable when it starts; unless all,
// it stops before a last partial transaction and reports partial.
func (s *Store) applyPending(ctx context.Context, all bool) (partial bool, err error) {
	target := s.wal.LastLSN()
	for s.appliedLSN() < target {
		if !all {
			if ready, _ := s.txnReady(); !ready {
				partial = true
				break
			}
		}
		if err := s.applyTxn(ctx); err != nil {
			return false, err
		}
	}
	return partial, s.wal.Release(s.appliedLSN())
}

// applyTxn applies the next entries, up to about loadTxnRows rows, in one
// transaction that also advances log_state.
func (s *Store) applyTxn(ctx context.Context) error {
	if s.writerBroken {
		if err := s.resetWriter(ctx); err != nil {
			return fmt.Errorf("replace writer connection: %w", err)
		}
	}
	from := s.appliedLSN()
	var last uint64
	var bytes, rows int64
	err := s.writer.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		var err error
		last, bytes, rows, err = s.applyOn(ctx, c, from)
		return err
	})
	if err != nil {
		// A COMMIT can fail after DuckDB made it durable; ask the table
		// how far we really got so the retry does not apply entries twice.
		if durable, qerr := s.durableLSN(); qerr == nil && durable > from {
			// Its rows stay counted as unapplied: at worst the loader
			// finds a transaction full a little early.
			s.advance(durable, 0, 0)
		}
		return err
	}
	s.advance(last, bytes, rows)
	s.pending.release(last)
	return nil
}

// writeProfiles upserts the final profile states of a loader transaction.
func writeProfiles(ctx context.Context, c *duckdb.Conn, profs map[profileKey]profileState) error {
	if len(profs) == 0 {
		return nil
	}
	// One statement per profile cost more than the events it came with
	// (a migration $sets thousands per transaction): stage them through an
	// appender, then replace them with one DELETE and one INSERT. The
	// stage is an ordinary table, empty outside the loader's transaction.
	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS profile_stage (
		project BIGINT, kind UTINYINT, group_key VARCHAR, id VARCHAR, props VARCHAR, updated_ms BIGINT, deleted BOOLEAN)`, nil); err != nil {
		return fmt.Errorf("write profiles: %w", err)
	}
	ap, err := duckdb.NewAppenderFromConn(c, "", "profile_stage")
	if err != nil {
		return fmt.Errorf("write profiles: stage appender: %w", err)
	}
	for k, st := range profs {
		if err = ap.AppendRow(k.project, uint8(k.kind), k.groupKey, k.id, string(st.props), st.updatedMs, st.deleted); err != nil {
			break
		}
	}
	if cerr := ap.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write profiles: stage: %w", err)
	}
	for _, q := range []string{
		`DELETE FROM profiles USING profile_stage s WHERE profiles.project = s.project AND profiles.kind = s.kind
			AND profiles.group_key = s.group_key AND profiles.id = s.id`,
		`INSERT INTO profiles SELECT project, kind, group_key, id, props, updated_ms FROM profile_stage WHERE NOT deleted`,
		`DELETE FROM profile_stage`,
	} {
		if _, err := c.ExecContext(ctx, q, nil); err != nil {
			return fmt.Errorf("write profiles: %w", err)
		}
	}
	return nil
}

// execArgs runs one statement on the loader's driver connection.
func execArgs(ctx context.Context, c *duckdb.Conn, query string, args ...any) error {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	_, err := c.ExecContext(ctx, query, nv)
	return err
}

// advance records loader progress and wakes writers and scans waiting on it.
func (s *Store) advance(lsn uint64, bytes, rows int64) {
	s.applyMu.Lock()
	s.applied = lsn
	s.unapplied = max(s.unapplied-bytes, 0)
	s.unappliedRows = max(s.unappliedRows-rows, 0)
	s.applyCond.Broadcast()
	s.applyMu.Unlock()
}

func (s *Store) durableLSN() (uint64, error) {
	var lsn int64
	err := s.db.QueryRow(`SELECT max(applied_lsn) FROM log_state`).Scan(&lsn)
	return uint64(lsn), err
}

func (s *Store) applyOn(ctx context.Context, c *duckdb.Conn, from uint64) (last uint64, size, nrows int64, err error) {
	if _, err := c.ExecContext(ctx, "BEGIN TRANSACTION", nil); err != nil {
		s.writerBroken = true // maybe still inside an earlier transaction
		return 0, 0, 0, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		s.common.settle(err == nil)
		if err == nil {
			return
		}
		// If even ROLLBACK fails the connection's state is unknown: replace it.
		if _, rbErr := c.ExecContext(context.Background(), "ROLLBACK", nil); rbErr != nil && !isNoTransaction(rbErr) {
			s.writerBroken = true
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
	}()
	ar, err := duckarrow.New(c)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("arrow interface: %w", err)
	}
	pipe, lc := s.pipe, s.ledgerRows
	// Merges and identity changes are rarer than events: their appenders
	// are made on the first one.
	var mg, chg *duckdb.Appender
	defer func() {
		// Before anything else touches the connection, and before the
		// rollback above.
		if werr := pipe.idle(); werr != nil && err == nil {
			err = werr
		}
		pipe.discard()
		if err != nil {
			lc.fail()
		}
		for _, ap := range []*duckdb.Appender{mg, chg} {
			if ap == nil {
				continue
			}
			if err != nil {
				_ = ap.Clear()
			}
			if cerr := ap.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("append merges or identity changes: %w", cerr)
			}
		}
	}()
	rows := 0
	profs := map[profileKey]profileState{}
	cks := map[checkpointKey][]byte{}
	use := map[store.UsageKey]int64{}
	days := map[store.DayKey]int64{}
	err = s.wal.Replay(from, func(lsn uint64, payload []byte) error {
		if rows >= s.txnRows {
			return errTxnFull
		}
		n, err := decodeEntry(payload, entryVisitor{
			event: func(e *logEvent) error {
				var common int64
				if e.common != nil {
					var ok bool
					if common, ok = s.common.cached(e.common); !ok {
						// The lookup may query or insert on c.
						if err := pipe.idle(); err != nil {
							return err
						}
						var err error
						if common, err = s.commonID(ctx, c, e.common); err != nil {
							return err
						}
					}
				}
				pipe.fill.add(e, common)
				if pipe.fill.full() {
					return pipe.flush(ctx, c, ar)
				}
				return nil
			},
			merge: func(m *logMerge) error {
				if err := pipe.idle(); err != nil {
					return err
				}
				if mg == nil {
					var err error
					if mg, err = duckdb.NewAppenderFromConn(c, "", "merges"); err != nil {
						return fmt.Errorf("merges appender: %w", err)
					}
				}
				return mg.AppendRow(m.project, string(m.id1), string(m.id2), m.timeMs, m.ingestMs, string(m.props), m.seq)
			},
			change: func(ic *logChange) error {
				if err := pipe.idle(); err != nil {
					return err
				}
				if chg == nil {
					var err error
					if chg, err = duckdb.NewAppenderFromConn(c, "", "identity_changes"); err != nil {
						return fmt.Errorf("identity changes appender: %w", err)
					}
				}
				return chg.AppendRow(ic.project, ic.seq, uint8(ic.kind), string(ic.a), string(ic.b))
			},
			profile: func(p *logProfile) error {
				// Only the last state of a profile in this transaction is written.
				profs[profileKey{p.project, profile.Kind(p.kind), string(p.groupKey), string(p.id)}] =
					profileState{deleted: p.deleted, props: bytes.Clone(p.props), updatedMs: p.updatedMs}
				return nil
			},
			checkpoint: func(ck *logCheckpoint) error {
				cks[checkpointKey{ck.project, string(ck.importID)}] = bytes.Clone(ck.val)
				return nil
			},
			usage: func(u *logUsage) error {
				use[store.UsageKey{Project: u.project, Month: string(u.month), Source: string(u.source)}] += u.events
				return nil
			},
			day: func(u *logUsage) error {
				days[store.DayKey{Project: u.project, Day: string(u.month), Source: string(u.source)}] += u.events
				return nil
			},
			ledger: func(l *logLedger) error {
				if err := lc.add(l); err != nil || !lc.full() {
					return err
				}
				if err := pipe.idle(); err != nil {
					return err
				}
				return lc.insert(ctx, c, ar)
			},
		})
		if err != nil {
			return fmt.Errorf("log entry %d: %w", lsn, err)
		}
		rows += n
		last, size = lsn, size+int64(len(payload))
		return nil
	})
	if err != nil && !errors.Is(err, errTxnFull) {
		return 0, 0, 0, err
	}
	err = nil
	if err := pipe.idle(); err != nil {
		return 0, 0, 0, err
	}
	if err := pipe.fill.insert(ctx, c, ar); err != nil {
		return 0, 0, 0, err
	}
	if err := lc.insert(ctx, c, ar); err != nil {
		return 0, 0, 0, err
	}
	if mg != nil {
		// Close flushes; it must happen before COMMIT, not in the defer.
		err, mg = mg.Close(), nil
		if err != nil {
			return 0, 0, 0, fmt.Errorf("append merges: %w", err)
		}
	}
	if chg != nil {
		err, chg = chg.Close(), nil
		if err != nil {
			return 0, 0, 0, fmt.Errorf("append identity changes: %w", err)
		}
	}
	// Before the states leave s.pending (release), even if this
	// transaction then fails: marking is only ever conservative.
	for k := range profs {
		s.pending.markStored(k.project)
	}
	if err := writeProfiles(ctx, c, profs); err != nil {
		return 0, 0, 0, err
	}
	if err := writeCheckpoints(ctx, c, cks); err != nil {
		return 0, 0, 0, err
	}
	if err := writeUsage(ctx, c, use); err != nil {
		return 0, 0, 0, err
	}
	if err := writeDailyUsage(ctx, c, days); err != nil {
		return 0, 0, 0, err
	}
	if last == 0 {
		// applyPending only calls us when the log is ahead of the tables.
		return 0, 0, 0, fmt.Errorf("the write log has no entry after %d although it ends at %d: entries are missing", from, s.wal.LastLSN())
	}
	if _, err := c.ExecContext(ctx, "UPDATE log_state SET applied_lsn = ?", []driver.NamedValue{{Ordinal: 1, Value: int64(last)}}); err != nil {
		return 0, 0, 0, fmt.Errorf("advance log_state: %w", err)
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(c); err != nil {
			return 0, 0, 0, err
		}
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	if _, err := c.ExecContext(context.Background(), "COMMIT", nil); err != nil {
		return 0, 0, 0, fmt.Errorf("commit: %w", err)
	}
	return last, size, int64(rows), nil
}

func (s *Store) appliedLSN() uint64 {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.applied
}

func (s *Store) setLoaderErr(err error) {
	s.applyMu.Lock()
	s.loaderErr = err
	if err != nil {
		s.loaderFails++
		s.loaderStreak++
	} else {
		s.loaderStreak = 0
	}
	s.applyCond.Broadcast()
	s.applyMu.Unlock()
}

// waitApplied blocks until every entry up to lsn is in the tables, so a
// scan sees every write acknowledged before it started.
func (s *Store) waitApplied(ctx context.Context, lsn uint64) error {
	return s.waitFor(ctx, func() bool { return s.applied >= lsn })
}

// waitFor waits under applyMu until cond holds, ctx ends or the store closes.
func (s *Store) waitFor(ctx context.Context, cond func() bool) error {
	return s.waitForUpTo(ctx, cond, 0)
}

// loaderGiveUp is how many failed loader passes in a row, one of them
// after the wait began, make syncFailFast give up: a one-off failure is
// retried as for every waiter (10 ms, then 20, 40), but a loader that
// keeps failing (DuckDB out of memory) would hold the caller forever.
const loaderGiveUp = 3

// syncFailFast is Sync for a caller that is to fail rather than wait on
// a loader that keeps failing: it returns the loader's error instead.
func (s *Store) syncFailFast(ctx context.Context) error {
	lsn := s.wal.LastLSN()
	return s.waitForUpTo(ctx, func() bool { return s.applied >= lsn }, loaderGiveUp)
}

// waitForUpTo is waitFor that, with giveUp > 0, returns the loader's
// error once it failed giveUp passes in a row, the last after the wait began.
func (s *Store) waitForUpTo(ctx context.Context, cond func() bool, giveUp int) error {
	stop := context.AfterFunc(ctx, func() {
		s.applyMu.Lock()
		s.applyCond.Broadcast()
		s.applyMu.Unlock()
	})
	defer stop()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if cond() {
		return nil
	}
	// Whoever waits is not to wait for a full transaction (gather).
	s.hurry++
	defer func() { s.hurry-- }()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	fails := s.loaderFails
	for !cond() {
		if s.closing {
			return store.ErrClosed
		}
		if giveUp > 0 && s.loaderErr != nil && s.loaderStreak >= giveUp && s.loaderFails > fails {
			return fmt.Errorf("the loader failed %d times in a row: %w", s.loaderStreak, s.loaderErr)
		}
		if err := ctx.Err(); err != nil {
			if s.loaderErr != nil {
				return fmt.Errorf("%w (the loader is failing: %v)", err, s.loaderErr)
			}
			return err
		}
		s.applyCond.Wait()
	}
	return nil
}

// Sync waits until every acknowledged write is visible to queries.
func (s *Store) Sync(ctx context.Context) error {
	return s.waitApplied(ctx, s.wal.LastLSN())
}
