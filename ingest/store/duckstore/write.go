package duckstore

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/wal"
)

// writeScratch is reused by every Write (under the writer lock) so the
// steady state allocates nothing per event for bookkeeping.
type writeScratch struct {
	rows   []row
	added  []store.Key // keys this write put into the set; removed if it fails
	merges []mergeRow
	entry  []byte // the encoded log entry, behind room for the log header
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

	res := s.plan(batches)
	// plan put this write's new keys into the set; until the entry is
	// durable they must come out again on any failure. No other write can
	// see them meanwhile: writes hold the writer lock throughout.
	durable := false
	defer func() {
		if !durable {
			for _, k := range s.scratch.added {
				s.keys.remove(k)
			}
		}
	}()
	if len(s.scratch.rows) == 0 && res.Merges == 0 {
		// Only duplicates (or nothing): the originals are already durable,
		// and plan added no key.
		return res, nil
	}
	merges := s.scratch.merges[:0]
	for bi := range batches {
		for mi := range batches[bi].Merges {
			merges = append(merges, mergeRow{project: batches[bi].Project, m: &batches[bi].Merges[mi]})
		}
	}
	s.scratch.merges = merges
	// The entry is encoded behind room for the log's header, so the log
	// writes it as it is, in one system call (see wal.AppendFramed).
	var header [wal.HeaderSize]byte
	s.scratch.entry = s.encodeEntry(append(s.scratch.entry[:0], header[:]...), merges, s.nextSeq)
	if err := s.pace(ctx); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// Back-pressure: never let the loader fall more than maxUnapplied behind.
	if err := s.waitFor(ctx, func() bool { return s.unapplied < maxUnapplied }); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// Past this point ctx no longer matters: the entry is durable or not.
	if _, err := s.wal.AppendFramed(s.scratch.entry); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	durable = true
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

// pace delays a write in proportion to how far the loader is behind,
// beyond paceFrom. Writes and the loader share the CPU; a loader that
// falls behind gets more of it only when writes slow down. Slowing every
// write a little as the lag grows finds that balance smoothly, where the
// hard limit alone let the lag build up and then stopped all writes at
// once until a loader commit (up to a second) freed room.
func (s *Store) pace(ctx context.Context) error {
	s.applyMu.Lock()
	over := s.unapplied - paceFrom
	s.applyMu.Unlock()
	if over <= 0 {
		return nil
	}
	d := time.Duration(float64(maxPace) * min(float64(over)/float64(maxUnapplied-paceFrom), 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type mergeRow struct {
	project int64
	m       *store.Merge
}

// plan filters duplicates (against committed keys and earlier rows of this
// write) into s.scratch.rows and counts per batch. Each new key goes into
// the set at once (and into s.scratch.added, so Write can take it out if
// the write fails): one probe of the big set per event instead of a lookup
// now and an insert after the log write, each a likely cache miss at
// millions of keys, and the set itself catches repeats within the write.
func (s *Store) plan(batches []store.Batch) store.WriteResult {
	sc := &s.scratch
	sc.rows, sc.added = sc.rows[:0], sc.added[:0]
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
				if !s.keys.add(r.key) {
					br.Duplicates++
					continue
				}
				sc.added = append(sc.added, r.key)
			}
			sc.rows = append(sc.rows, r)
			br.Inserted++
		}
		br.Merges = len(b.Merges)
		res.Inserted += br.Inserted
		res.Duplicates += br.Duplicates
		res.Merges += br.Merges
	}
	return res
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
