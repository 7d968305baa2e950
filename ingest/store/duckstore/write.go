package duckstore

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
)

// writeScratch is reused by every Write (under the writer lock) so the
// steady state allocates nothing per event for bookkeeping.
type writeScratch struct {
	rows    []row
	pending map[store.Key]struct{} // keys new in this write, not yet committed
	args    []driver.Value
}

type row struct {
	project int64
	e       *store.Event
	key     store.Key
	dedup   bool
}

func splitKey(k store.Key) (hi, lo int64) {
	return int64(binary.BigEndian.Uint64(k[:8])), int64(binary.BigEndian.Uint64(k[8:]))
}

func joinKey(hi, lo int64) store.Key {
	var k store.Key
	binary.BigEndian.PutUint64(k[:8], uint64(hi))
	binary.BigEndian.PutUint64(k[8:], uint64(lo))
	return k
}

// Write stores the batches in one transaction. See store.Store.
func (s *Store) Write(ctx context.Context, batches []store.Batch) (store.WriteResult, error) {
	if err := s.enter("write"); err != nil {
		return store.WriteResult{}, err
	}
	defer s.ops.Done()
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", ctx.Err())
	}
	defer func() { <-s.wsem }()

	if s.writerBroken {
		if err := s.resetWriter(ctx); err != nil {
			return store.WriteResult{}, fmt.Errorf("duckstore: write: replace writer connection: %w", err)
		}
	}
	res, newKeys := s.plan(batches)
	if len(s.scratch.rows) == 0 && res.Merges == 0 {
		// Only duplicates (or nothing): the originals are already durable.
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	n := int64(len(s.scratch.rows) + res.Merges)
	err := s.writer.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		return s.commit(ctx, c, batches)
	})
	if err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// Only now, with the transaction durable, may later writes see these keys.
	for k := range newKeys {
		s.keys.add(k)
	}
	s.nextSeq += n
	return res, nil
}

// plan filters duplicates (against committed keys and earlier rows of this
// write) into s.scratch.rows and counts per batch. It changes no committed state.
func (s *Store) plan(batches []store.Batch) (store.WriteResult, map[store.Key]struct{}) {
	sc := &s.scratch
	sc.rows = sc.rows[:0]
	if sc.pending == nil {
		sc.pending = make(map[store.Key]struct{})
	}
	clear(sc.pending)
	res := store.WriteResult{Batches: make([]store.WriteResult, len(batches))}
	for bi := range batches {
		b := &batches[bi]
		br := &res.Batches[bi]
		for ei := range b.Events {
			e := &b.Events[ei]
			r := row{project: b.Project, e: e, dedup: e.Dedupable()}
			if r.dedup {
				r.key = e.Key
				if r.key == (store.Key{}) {
					// A producer that forgot the key must not make every such
					// event a duplicate of the first one.
					r.key = store.DedupKey(b.Project, e.Name, e.DistinctID, e.TimeMs, e.InsertID)
				}
				// pending is small and hot; ask it before the big set.
				if _, seen := sc.pending[r.key]; seen || s.keys.has(r.key) {
					br.Duplicates++
					continue
				}
				sc.pending[r.key] = struct{}{}
			}
			sc.rows = append(sc.rows, r)
			br.Inserted++
		}
		br.Merges = len(b.Merges)
		res.Inserted += br.Inserted
		res.Duplicates += br.Duplicates
		res.Merges += br.Merges
	}
	return res, sc.pending
}

// commit appends the planned rows and the merges inside one explicit
// transaction on the writer connection. DuckDB's appender writes into the
// connection's open transaction, so ROLLBACK discards everything it appended
// (TestFailedWriteLeavesNothing proves it).
func (s *Store) commit(ctx context.Context, c *duckdb.Conn, batches []store.Batch) (err error) {
	if _, err := c.ExecContext(ctx, "BEGIN TRANSACTION", nil); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		// Rollback must run even when ctx is done. If it fails too, the
		// connection's state is unknown and it gets replaced (resetWriter).
		if _, rbErr := c.ExecContext(context.Background(), "ROLLBACK", nil); rbErr != nil && !isNoTransaction(rbErr) {
			s.writerBroken = true
			err = errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
	}()
	seq := s.nextSeq
	if len(s.scratch.rows) > 0 {
		if err := s.appendEvents(ctx, c, seq); err != nil {
			return err
		}
		seq += int64(len(s.scratch.rows))
	}
	if err := s.appendMerges(ctx, c, batches, seq); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(c); err != nil {
			return err
		}
	}
	// Past this point the caller's ctx no longer matters: interrupting a
	// COMMIT would leave its outcome unknown.
	if _, err := c.ExecContext(context.Background(), "COMMIT", nil); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// resetWriter discards the writer connection (returning driver.ErrBadConn
// from Raw makes database/sql close it rather than pool it; DuckDB rolls
// back whatever it had open) and takes a fresh one.
func (s *Store) resetWriter(ctx context.Context) error {
	_ = s.writer.Raw(func(any) error { return driver.ErrBadConn })
	_ = s.writer.Close()
	w, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	s.writer, s.writerBroken = w, false
	return nil
}

func isNoTransaction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no transaction is active")
}

// ctxCheckEvery bounds how many rows are appended between ctx checks.
const ctxCheckEvery = 8192

func (s *Store) appendEvents(ctx context.Context, c *duckdb.Conn, seq int64) (err error) {
	app, err := duckdb.NewAppenderFromConn(c, "", "events")
	if err != nil {
		return fmt.Errorf("events appender: %w", err)
	}
	defer func() {
		if err != nil {
			_ = app.Clear() // nothing half-appended may reach the table
		}
		if cerr := app.CloseWithCancel(ctx); cerr != nil && err == nil {
			err = fmt.Errorf("append events: %w", cerr)
		}
	}()
	args := s.scratch.args[:0]
	for i := range s.scratch.rows {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r := &s.scratch.rows[i]
		var insertID, hi, lo driver.Value
		if r.dedup {
			h, l := splitKey(r.key)
			insertID, hi, lo = r.e.InsertID, h, l
		}
		args = append(args[:0], r.project, r.e.Name, r.e.DistinctID, r.e.TimeMs, insertID,
			r.e.Props, r.e.IngestMs, seq+int64(i), hi, lo)
		if err := app.AppendRow(args...); err != nil {
			return fmt.Errorf("append event: %w", err)
		}
	}
	s.scratch.args = args
	return nil
}

func (s *Store) appendMerges(ctx context.Context, c *duckdb.Conn, batches []store.Batch, seq int64) (err error) {
	var app *duckdb.Appender
	defer func() {
		if app == nil {
			return
		}
		if err != nil {
			_ = app.Clear()
		}
		if cerr := app.CloseWithCancel(ctx); cerr != nil && err == nil {
			err = fmt.Errorf("append merges: %w", cerr)
		}
	}()
	for _, b := range batches {
		for i := range b.Merges {
			m := &b.Merges[i]
			if app == nil {
				if app, err = duckdb.NewAppenderFromConn(c, "", "merges"); err != nil {
					return fmt.Errorf("merges appender: %w", err)
				}
			}
			props := m.Props
			if props == nil {
				props = []byte{}
			}
			if err := app.AppendRow(b.Project, m.DistinctIDs[0], m.DistinctIDs[1], m.TimeMs, m.IngestMs, props, seq); err != nil {
				return fmt.Errorf("append merge: %w", err)
			}
			seq++
		}
	}
	return nil
}
