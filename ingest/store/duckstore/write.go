package duckstore

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/ingest/store"
)

// writeScratch is reused by every Write (under the writer lock) so the
// steady state allocates nothing per event for bookkeeping.
type writeScratch struct {
	rows    []row
	pending map[store.Key]struct{} // keys new in this write, not yet committed
	merges  []mergeRow
	entry   []byte // the encoded log entry
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

// Write logs the batches' new rows in one fsynced log entry and returns;
// the loader moves them into the tables (see loader.go). See store.Store.
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

	res, newKeys := s.plan(batches)
	if len(s.scratch.rows) == 0 && res.Merges == 0 {
		// Only duplicates (or nothing): the originals are already durable.
		return res, nil
	}
	merges := s.scratch.merges[:0]
	for bi := range batches {
		for mi := range batches[bi].Merges {
			merges = append(merges, mergeRow{project: batches[bi].Project, m: &batches[bi].Merges[mi]})
		}
	}
	s.scratch.merges = merges
	s.scratch.entry = s.encodeEntry(s.scratch.entry[:0], merges, s.nextSeq)
	// Back-pressure: never let the loader fall more than maxUnapplied behind.
	if err := s.waitFor(ctx, func() bool { return s.unapplied < maxUnapplied }); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// Past this point ctx no longer matters: the entry is durable or not.
	if _, err := s.wal.Append(s.scratch.entry); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// Only now, with the entry durable, may later writes see these keys.
	for k := range newKeys {
		s.keys.add(k)
	}
	s.nextSeq += int64(len(s.scratch.rows) + len(merges))
	s.applyMu.Lock()
	s.unapplied += int64(len(s.scratch.entry))
	s.applyMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if cap(s.scratch.entry) > 64<<20 { // a huge write must not pin its buffer forever
		s.scratch.entry = nil
	}
	return res, nil
}

type mergeRow struct {
	project int64
	m       *store.Merge
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
