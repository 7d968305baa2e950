package duckstore

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/wal"
)

// writeScratch is reused by every Write (under the writer lock) so the
// steady state allocates nothing per event for bookkeeping.
type writeScratch struct {
	rows   []row
	added  []store.Key // keys this write put into the set; removed if it fails
	hinted []store.Key // a batch's keys, announced to the set (keyPrefilter)
	merges []mergeRow
	entry  []byte // the encoded log entry, behind room for the log header

	changes      []changeRow           // identity changes to log
	graphChanged bool                  // a graph changed: see Write
	dropped      map[int]bool          // events of the current batch whose change was rejected
	moves        []profileMove         // profile merges the changes asked for
	profiles     []profileRow          // profile states to log
	dirty        map[profileKey]int    // index in profiles
	fetched      map[profileKey][]byte // table states read ahead (nil: no row); see prefetchProfiles
	checkpoints  []checkpointRow       // sync checkpoints to log
	common       [][]byte              // the batches' Common objects that rows refer to
}

func (sc *writeScratch) reset() {
	sc.rows, sc.added, sc.merges = sc.rows[:0], sc.added[:0], sc.merges[:0]
	sc.changes, sc.graphChanged, sc.moves = sc.changes[:0], false, sc.moves[:0]
	sc.checkpoints = sc.checkpoints[:0]
	clear(sc.common) // drop references to the callers' bytes
	sc.common = sc.common[:0]
	clear(sc.profiles) // drop references to profiles
	sc.profiles = sc.profiles[:0]
	if sc.dirty == nil {
		sc.dirty, sc.dropped, sc.fetched = map[profileKey]int{}, map[int]bool{}, map[profileKey][]byte{}
	}
	clear(sc.dirty)
	clear(sc.fetched)
}

type row struct {
	project int64
	e       *store.Event
	key     store.Key
	dedup   bool
	common  int32 // the batch's Common: sc.common[common-1]; 0 = none
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

	if s.broken != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", s.broken)
	}
	// Back-pressure comes first: from plan on, the write changes in-memory
	// state (dedup keys, identity graphs) that only a durable entry may keep.
	if err := s.pace(ctx); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// Never let the loader fall more than maxLag behind.
	if err := s.waitFor(ctx, func() bool { return s.unapplied < s.maxLag }); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	// No write is in progress: every key in the set is a durable write's,
	// so the set may checkpoint (keyset_checkpoint.go). A failure only
	// leaves the last checkpoint in place.
	if ck, ok := s.keys.(*tieredKeys); ok {
		if err := ck.checkpoint(s.nextSeq); err != nil {
			s.log.Warn("duckstore: dedup keys not checkpointed", "err", err)
		}
	}
	// plan puts this write's new keys into the set and its identity changes
	// into the graphs; until the entry is durable they must come out again
	// on any failure. No other write can see them meanwhile: writes hold the
	// writer lock throughout. Graphs cannot be rolled back, so a failure
	// after a graph changed stops writes until a restart rebuilds them from
	// what is durable (it takes a failing disk: ctx no longer matters here).
	durable := false
	defer func() {
		if durable {
			return
		}
		for _, k := range s.scratch.added {
			if err := s.keys.remove(k); err != nil {
				// A key left in the set would drop its event as a duplicate.
				s.broken = fmt.Errorf("a failed write could not undo its dedup keys; restart the server: %w", err)
				break
			}
		}
		if s.scratch.graphChanged {
			s.broken = errors.New("a failed write left identity state ahead of the log; restart the server")
		}
	}()
	res, err := s.plan(context.WithoutCancel(ctx), batches)
	if err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	sc := &s.scratch
	if len(sc.rows) == 0 && len(sc.merges) == 0 && len(sc.changes) == 0 && len(sc.profiles) == 0 && len(sc.checkpoints) == 0 {
		// Only duplicates, rejections or nothing: plan changed no state.
		return res, nil
	}
	// The entry is encoded behind room for the log's header, so the log
	// writes it as it is, in one system call (see wal.AppendFramed).
	var header [wal.HeaderSize]byte
	sc.entry = s.encodeEntry(append(sc.entry[:0], header[:]...), s.nextSeq)
	lsn, err := s.wal.AppendFramed(sc.entry)
	if err != nil {
		return store.WriteResult{}, fmt.Errorf("duckstore: write: %w", err)
	}
	durable = true
	s.nextSeq += int64(len(sc.rows) + len(sc.merges) + len(sc.changes))
	if len(sc.profiles) > 0 {
		s.pending.mu.Lock()
		for _, p := range sc.profiles {
			s.pending.m[p.key] = pendingProfile{lsn: lsn, state: p.state}
		}
		s.pending.mu.Unlock()
	}
	s.noteCheckpoints(sc.checkpoints)
	s.noteUsage()
	s.applyMu.Lock()
	s.unapplied += int64(len(sc.entry))
	s.unappliedRows += int64(len(sc.rows) + len(sc.merges) + len(sc.changes) + len(sc.profiles))
	s.applyMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if cap(sc.entry) > 64<<20 { // a huge write must not pin its buffer forever
		sc.entry = nil
	}
	return res, nil
}

// pace delays a write in proportion to how far the loader is behind,
// beyond s.paceFrom. Writes and the loader share the CPU; a loader that
// falls behind gets more of it only when writes slow down. Slowing every
// write a little as the lag grows finds that balance smoothly, where the
// hard limit alone let the lag build up and then stopped all writes at
// once until a loader commit (up to a second) freed room. Pacing also
// while the loader still gathers a row group (it waits for one up to twice
// paceFrom) kept /import at saturation faster than not: 349k against 320k
// events/s, p99 195 against 204 ms (integration/loadgen, one run each).
func (s *Store) pace(ctx context.Context) error {
	s.applyMu.Lock()
	over := s.unapplied - s.paceFrom
	s.applyMu.Unlock()
	if over <= 0 {
		return nil
	}
	d := time.Duration(float64(maxPace) * min(float64(over)/float64(s.maxLag-s.paceFrom), 1))
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

// plan decides what a write stores, batch by batch: merges and identity
// changes first (applied to the graphs; a full cluster rejects the record
// and the event that carried it), then events, filtered for duplicates
// against committed keys and earlier rows of this write, then profile
// updates in order. Each new key goes into the set at once (and into
// s.scratch.added, so Write can take it out if the write fails): one probe
// of the big set per event instead of a lookup now and an insert after the
// log write, each a likely cache miss at millions of keys, and the set
// itself catches repeats within the write.
func (s *Store) plan(ctx context.Context, batches []store.Batch) (store.WriteResult, error) {
	sc := &s.scratch
	sc.reset()
	now := nowMs()
	s.usage.reset(now)
	res := store.WriteResult{Batches: make([]store.WriteResult, len(batches))}
	// Before anything changes: identity changes cannot be undone.
	for bi := range batches {
		if err := store.CheckCommon(batches[bi].Common); err != nil {
			return res, fmt.Errorf("batch %d: %w", bi, err)
		}
	}
	for bi := range batches {
		b := &batches[bi]
		br := &res.Batches[bi]
		source := store.UsageSource(b.Source)
		for mi := range b.Merges {
			m := &b.Merges[mi]
			if err := s.applyChange(b.Project, identity.Change{Kind: identity.KindMerge, A: m.DistinctIDs[0], B: m.DistinctIDs[1]}); err != nil {
				br.Rejected = append(br.Rejected, store.Rejection{Ref: m.Ref, Err: err})
				continue
			}
			sc.merges = append(sc.merges, mergeRow{project: b.Project, m: m})
			br.Merges++
		}
		clear(sc.dropped)
		for _, c := range b.Changes {
			before := len(sc.changes)
			if err := s.applyChange(b.Project, c.Change); err != nil {
				br.Rejected = append(br.Rejected, store.Rejection{Ref: c.Ref, Err: err})
				if c.Event >= 0 {
					sc.dropped[c.Event] = true
				}
				continue
			}
			br.Changes += len(sc.changes) - before
		}
		if err := s.applyMoves(ctx, now); err != nil {
			return res, err
		}
		common := s.planCommon(b)
		if pf, ok := s.keys.(keyPrefilter); ok {
			sc.hinted = sc.hinted[:0]
			for ei := range b.Events {
				if e := &b.Events[ei]; !sc.dropped[ei] && e.Dedupable() {
					sc.hinted = append(sc.hinted, dedupKey(b.Project, e))
				}
			}
			pf.prefilter(sc.hinted)
		}
		for ei := range b.Events {
			if sc.dropped[ei] {
				continue
			}
			e := &b.Events[ei]
			r := row{project: b.Project, e: e, dedup: e.Dedupable(), common: common}
			if r.dedup {
				r.key = dedupKey(b.Project, e)
				isNew, err := s.keys.add(r.key)
				if err != nil {
					return res, fmt.Errorf("dedup: %w", err)
				}
				if !isNew {
					br.Duplicates++
					br.DupEvents = append(br.DupEvents, int32(ei))
					continue
				}
				sc.added = append(sc.added, r.key)
			}
			sc.rows = append(sc.rows, r)
			s.usage.tally.Add(b.Project, source, e.IngestMs, 1)
			br.Inserted++
		}
		if err := s.prefetchProfiles(ctx, b.Project, b.Profiles); err != nil {
			return res, err
		}
		for pi := range b.Profiles {
			u := &b.Profiles[pi]
			rejected, err := s.applyProfile(ctx, b.Project, u, now)
			if err != nil {
				return res, err
			}
			if rejected != nil {
				br.Rejected = append(br.Rejected, store.Rejection{Ref: u.Ref, Err: rejected})
				continue
			}
			br.Profiles++
		}
		if c := b.Checkpoint; c != nil {
			sc.checkpoints = append(sc.checkpoints, checkpointRow{project: b.Project, importID: c.Import, val: c.Value})
		}
		res.Inserted += br.Inserted
		res.Duplicates += br.Duplicates
		res.Merges += br.Merges
		res.Changes += br.Changes
		res.Profiles += br.Profiles
		res.Rejected = append(res.Rejected, br.Rejected...)
	}
	return res, nil
}

// dedupKey is e's key. A producer that forgot it must not make every such
// event a duplicate of the first one.
func dedupKey(project int64, e *store.Event) store.Key {
	if e.Key != (store.Key{}) {
		return e.Key
	}
	return store.DedupKey(project, e.Name, e.DistinctID, e.TimeMs, e.InsertID)
}

// planCommon returns the index rows of b refer to for b.Common (see row).
func (s *Store) planCommon(b *store.Batch) int32 {
	sh := b.Common // checked by plan
	if len(b.Events) == 0 || len(sh) <= 2 {
		return 0
	}
	sc := &s.scratch
	if n := len(sc.common); n > 0 && string(sc.common[n-1]) == string(sh) {
		return int32(n)
	}
	sc.common = append(sc.common, sh)
	return int32(len(sc.common))
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
