package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// writeTx is the state of one Write: its transaction, the graphs it locked,
// and what it will store.
type writeTx struct {
	s   *Store
	tx  pgx.Tx
	now int64

	graphs        map[int64]*lockedGraph // projects whose identity lock is held
	identProjects []int64
	ident         identWork
	prof          profileSet

	stage   []stageRow
	dup     []bool // per staged row: its key was stored already; nil: none was (insert.go)
	merges  []mergeRow
	dropped map[int]bool // events of the current batch whose change was rejected

	checkpoints []checkpointRow // syncs.go
}

type lockedGraph struct {
	pg      *projectGraph
	changed bool  // this write applied changes to pg.g
	newSeq  int64 // pg.seq once the write commits
}

type stageRow struct {
	batch   int32
	ev      int32 // index in its batch's Events (WriteResult.DupEvents)
	project int64
	e       *store.Event
	key     store.Key
	common  []byte // the batch's Common, stored in each row's props
}

type mergeRow struct {
	project int64
	m       *store.Merge
}

type dedupID struct {
	project int64
	key     store.Key
}

// Write implements store.Store: one transaction for all batches. Within it,
// per batch and in this order: merges and identity changes (decided on the
// project's graph), events (deduplicated by the unique index), profile
// updates; then the batches' checkpoints, so that they commit with the
// records they cover. It returns after COMMIT, which PostgreSQL makes durable.
func (s *Store) Write(ctx context.Context, batches []store.Batch) (store.WriteResult, error) {
	if err := s.enter("write"); err != nil {
		return store.WriteResult{}, err
	}
	defer s.ops.Done()
	if err := ctx.Err(); err != nil {
		return store.WriteResult{}, fmt.Errorf("pgstore: write: %w", err)
	}
	res := store.WriteResult{Batches: make([]store.WriteResult, len(batches))}
	var all, ident []int64
	for i := range batches {
		if err := store.CheckCommon(batches[i].Common); err != nil {
			return store.WriteResult{}, fmt.Errorf("pgstore: write: batch %d: %w", i, err)
		}
	}
	for i := range batches {
		b := &batches[i]
		if len(b.Merges)+len(b.Changes)+len(b.Profiles) > 0 {
			ident = append(ident, b.Project)
		}
		if len(b.Events)+len(b.Merges)+len(b.Changes)+len(b.Profiles) > 0 {
			all = append(all, b.Project)
		}
	}
	// A batch of only duplicates, or of nothing but its checkpoint, still
	// moves the checkpoint: the sync read those rows.
	checkpoints := batchCheckpoints(batches)
	if len(all) == 0 && len(checkpoints) == 0 {
		return res, nil
	}
	slices.Sort(all)
	slices.Sort(ident)
	w := &writeTx{
		s:             s,
		now:           time.Now().UnixMilli(),
		graphs:        map[int64]*lockedGraph{},
		identProjects: slices.Compact(ident),
		ident:         identWork{touched: map[int64]map[string]struct{}{}, stale: map[int64]map[string]struct{}{}},
		prof:          profileSet{m: map[profileKey]*profile.Profile{}, isDir: map[profileKey]bool{}},
		dropped:       map[int]bool{},
		checkpoints:   checkpoints,
	}
	if err := w.run(ctx, batches, &res, slices.Compact(all)); err != nil {
		return store.WriteResult{}, fmt.Errorf("pgstore: write: %w", err)
	}
	for _, br := range res.Batches {
		res.Inserted += br.Inserted
		res.Duplicates += br.Duplicates
		res.Merges += br.Merges
		res.Changes += br.Changes
		res.Profiles += br.Profiles
		res.Rejected = append(res.Rejected, br.Rejected...)
	}
	return res, nil
}

func (w *writeTx) run(ctx context.Context, batches []store.Batch, res *store.WriteResult, all []int64) (err error) {
	w.tx, err = w.s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			rollback(ctx, w.tx)
		}
	}()
	if err := w.s.lockProjects(ctx, w.tx, all, w.identProjects); err != nil {
		return err
	}
	// Go mutexes only after the advisory locks (see projectGraph).
	for _, p := range w.identProjects {
		lg := &lockedGraph{pg: w.s.graphs.get(p)}
		lg.pg.mu.Lock()
		w.graphs[p] = lg
	}
	defer func() {
		for _, lg := range w.graphs {
			switch {
			case lg.changed && committed:
				lg.pg.seq = lg.newSeq
			case lg.changed:
				lg.pg.g = nil // it holds changes that were never stored
			}
			lg.pg.mu.Unlock()
		}
	}()
	for _, p := range w.identProjects {
		if err := catchUp(ctx, w.tx, p, w.graphs[p].pg); err != nil {
			return err
		}
	}
	if err := w.prefetchProfiles(ctx, batches); err != nil {
		return err
	}
	seen := map[dedupID]struct{}{}
	for bi := range batches {
		if err := w.plan(ctx, bi, &batches[bi], &res.Batches[bi], seen); err != nil {
			return err
		}
	}
	if err := w.insertEvents(ctx, res); err != nil {
		return err
	}
	if err := w.insertMerges(ctx); err != nil {
		return err
	}
	if err := w.flushIdentity(ctx); err != nil {
		return err
	}
	if err := w.flushProfiles(ctx); err != nil {
		return err
	}
	if err := w.writeUsage(ctx, batches); err != nil {
		return err
	}
	if err := w.writeCheckpoints(ctx); err != nil {
		return err
	}
	if err := fenceRuns(ctx, w.tx, batchRuns(batches)); err != nil {
		return err
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	if err := w.tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	committed = true
	return nil
}

// plan decides what batch bi stores. Events are counted as inserted when
// staged; insertEvents corrects that for keys already in the table.
func (w *writeTx) plan(ctx context.Context, bi int, b *store.Batch, br *store.WriteResult, seen map[dedupID]struct{}) error {
	for mi := range b.Merges {
		m := &b.Merges[mi]
		if err := w.applyChange(b.Project, identity.Change{Kind: identity.KindMerge, A: m.DistinctIDs[0], B: m.DistinctIDs[1]}); err != nil {
			br.Rejected = append(br.Rejected, store.Rejection{Ref: m.Ref, Err: err})
			continue
		}
		w.merges = append(w.merges, mergeRow{project: b.Project, m: m})
		br.Merges++
	}
	clear(w.dropped)
	for _, c := range b.Changes {
		before := len(w.ident.changes)
		if err := w.applyChange(b.Project, c.Change); err != nil {
			br.Rejected = append(br.Rejected, store.Rejection{Ref: c.Ref, Err: err})
			if c.Event >= 0 {
				w.dropped[c.Event] = true
			}
			continue
		}
		br.Changes += len(w.ident.changes) - before
	}
	if err := w.applyMoves(ctx); err != nil {
		return err
	}
	for ei := range b.Events {
		if w.dropped[ei] {
			continue
		}
		e := &b.Events[ei]
		r := stageRow{batch: int32(bi), ev: int32(ei), project: b.Project, e: e, common: b.Common}
		if e.Dedupable() {
			r.key = e.Key
			if r.key == (store.Key{}) {
				// A producer that forgot the key must not make every such
				// event a duplicate of the first one.
				r.key = store.DedupKey(b.Project, e.Name, e.DistinctID, e.TimeMs, e.InsertID)
			}
			id := dedupID{b.Project, r.key}
			if _, dup := seen[id]; dup {
				br.Duplicates++
				br.DupEvents = append(br.DupEvents, int32(ei))
				continue
			}
			seen[id] = struct{}{}
		}
		w.stage = append(w.stage, r)
		br.Inserted++
	}
	for pi := range b.Profiles {
		u := &b.Profiles[pi]
		rejected, err := w.applyProfile(ctx, b.Project, u)
		if err != nil {
			return err
		}
		if rejected != nil {
			br.Rejected = append(br.Rejected, store.Rejection{Ref: u.Ref, Err: rejected})
			continue
		}
		br.Profiles++
	}
	return nil
}

// insertMerges stores the accepted merge records; COPY draws their seq in
// request order.
func (w *writeTx) insertMerges(ctx context.Context) error {
	if len(w.merges) == 0 {
		return nil
	}
	i := 0
	_, err := w.tx.CopyFrom(ctx, pgx.Identifier{"merges"},
		[]string{"project", "distinct_id_1", "distinct_id_2", "time_ms", "ingest_ms", "props"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(w.merges) {
				return nil, nil
			}
			r := w.merges[i]
			i++
			return []any{r.project, r.m.DistinctIDs[0], r.m.DistinctIDs[1], r.m.TimeMs, r.m.IngestMs, string(r.m.Props)}, nil
		}))
	if err != nil {
		return fmt.Errorf("store merges: %w", err)
	}
	return nil
}
