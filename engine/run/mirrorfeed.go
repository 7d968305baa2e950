package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A source that implements connectors.ChangeFeed (Postgres logical
// replication) spares a Mirror run the full read: the first run starts
// the feed, then diffs the whole table; later runs apply only the
// changes the feed reports since the position the previous run
// committed. The position is the import's checkpoint, committed after
// the run settled its changes, and the warehouse is told (ConfirmFeed)
// only after that: a crash before replays from the committed position,
// and replaying is idempotent (changes are compared by row hash). When
// the feed is lost (slot dropped, table recreated, feed stale) the run
// logs why, re-diffs the whole table and starts the feed again. Lookup
// tables and queries are always diffed whole.

// feedMark is a Mirror import's checkpoint: its change feed's position.
type feedMark struct {
	Feed string `json:"mirror_feed"`
	Pos  string `json:"pos"`
	// Rows: the table's rows at Pos, when known (mirrorrows.go).
	Rows *int64 `json:"rows,omitempty"`
}

var feedUnsafe = regexp.MustCompile(`[^a-z0-9_]+`)

// FeedName is the change feed of im: unique per project and import, a
// safe warehouse identifier.
func FeedName(im *importspec.Import) string {
	name := fmt.Sprintf("tributary_p%d_%s", im.ProjectID, feedUnsafe.ReplaceAllString(strings.ToLower(im.ID), "_"))
	if len(name) > 63 { // Postgres identifiers
		name = name[:63]
	}
	return name
}

func (mr *mirrorRun) viaFeed(ctx context.Context, src connectors.Source, cf connectors.ChangeFeed, key []string) error {
	im := mr.im
	f := connectors.Feed{Name: FeedName(im), Table: im.TableParams, Key: key}
	ck, err := mr.r.Store.Checkpoint(ctx, im.ProjectID, im.ID)
	if err != nil {
		return connectors.Permanent(fmt.Errorf("read checkpoint: %w", err))
	}
	var mark feedMark
	if len(ck) > 0 && json.Unmarshal(ck, &mark) == nil && mark.Feed == f.Name && mark.Pos != "" {
		ins, del := mr.st.Inserted, mr.st.Deleted
		// How much of the read is applying the changes; the rest is the
		// warehouse finding them (Postgres decodes all the WAL written
		// since the last run, of every database of the cluster).
		began, applying := time.Now(), time.Duration(0)
		next, err := cf.Changes(ctx, f, mark.Pos, func(rec arrow.RecordBatch) error {
			t := time.Now()
			defer func() { applying += time.Since(t) }()
			return mr.change(ctx, rec)
		})
		mr.r.log().Info("sync: change feed read", "import", im.ID, "run", mr.opt.RunID,
			"wall", time.Since(began).Round(time.Millisecond), "applying", applying.Round(time.Millisecond))
		if err == nil || errors.Is(err, connectors.ErrFeedLost) {
			// What was read is applied either way (a re-diff finds it done).
			ferr := mr.applyGroup(ctx)
			if ferr == nil {
				ferr = mr.flush(ctx)
			}
			if ferr != nil {
				return ferr
			}
		} else {
			mr.dropGroup()
		}
		switch {
		case err == nil:
			if err := mr.settle(ctx); err != nil {
				return err
			}
			if mark.Rows != nil {
				mr.setRows(*mark.Rows + (mr.st.Inserted - ins) - (mr.st.Deleted - del))
			}
			return mr.commitFeed(ctx, cf, f, next)
		case errors.Is(err, connectors.ErrFeedLost):
			mr.r.log().Warn("sync: change feed lost, re-diffing the whole table", "import", im.ID, "run", mr.opt.RunID,
				"feed", f.Name, "err", err)
			mr.m = nil // the full read plans its own mapping
		default:
			return fmt.Errorf("change feed: %w", err)
		}
	}
	// Started before the full read, so nothing committed during it is missed.
	pos, err := cf.StartFeed(ctx, f)
	if errors.Is(err, connectors.ErrFeedUnavailable) {
		// Not an error of the sync: without the privilege, wal_level or
		// change tracking the feed needs, every run diffs the whole table.
		// The empty mark keeps later runs from asking for a lost feed.
		mr.r.log().Info("sync: no change feed for this table, diffing the whole table", "import", im.ID,
			"run", mr.opt.RunID, "why", err)
		if err := mr.fullDiff(ctx, src); err != nil {
			return err
		}
		if mark.Feed == "" {
			return nil
		}
		return mr.commitMark(ctx, feedMark{})
	}
	if err != nil {
		return fmt.Errorf("start change feed: %w", err)
	}
	if err := mr.fullDiff(ctx, src); err != nil {
		return err
	}
	return mr.commitFeed(ctx, cf, f, pos)
}

// commitFeed commits the feed's position as the import's checkpoint,
// then lets the warehouse discard what came before it.
func (mr *mirrorRun) commitFeed(ctx context.Context, cf connectors.ChangeFeed, f connectors.Feed, pos string) error {
	mark := feedMark{Feed: f.Name, Pos: pos}
	if mr.st.mirrorRowsOK {
		mark.Rows = &mr.st.mirrorRows
	}
	if err := mr.commitMark(ctx, mark); err != nil {
		return err
	}
	if err := cf.ConfirmFeed(ctx, f, pos); err != nil {
		// Harmless: the warehouse keeps more than it needs until the next run.
		mr.r.log().Warn("sync: confirming the change feed's position", "import", mr.im.ID, "feed", f.Name, "err", err)
	}
	return nil
}

// commitMark commits mark as the import's checkpoint.
func (mr *mirrorRun) commitMark(ctx context.Context, mark feedMark) error {
	val, err := json.Marshal(mark)
	if err != nil {
		return connectors.Permanent(err)
	}
	b := store.Batch{Project: mr.im.ProjectID, RunID: mr.opt.RunID, Checkpoint: &store.Checkpoint{Import: mr.im.ID, Value: val}}
	if _, err := mr.r.Store.Write(context.WithoutCancel(ctx), []store.Batch{b}); err != nil {
		return connectors.Permanent(fmt.Errorf("commit change feed position: %w", err))
	}
	return nil
}

// change takes one batch of the feed: its runs of inserts and updates
// and of deletes join the run's feed group (mirrorgroup.go), in the
// batch's (commit) order.
func (mr *mirrorRun) change(ctx context.Context, rec arrow.RecordBatch) error {
	if rec.NumCols() < 2 || rec.Schema().Field(0).Name != connectors.ChangeOpColumn {
		return connectors.Permanent(fmt.Errorf("change feed batch does not start with column %s", connectors.ChangeOpColumn))
	}
	ops, ok := rec.Column(0).(*array.String)
	if !ok {
		return connectors.Permanent(fmt.Errorf("change feed column %s is %s, not utf8", connectors.ChangeOpColumn, rec.Column(0).DataType()))
	}
	fields := rec.Schema().Fields()[1:]
	body := array.NewRecordBatch(arrow.NewSchema(fields, nil), rec.Columns()[1:], rec.NumRows())
	defer body.Release()
	if err := mr.prepare(body.Schema()); err != nil {
		return err
	}
	n := int(rec.NumRows())
	for start := 0; start < n; {
		del := ops.Value(start) == connectors.ChangeDelete
		end := start + 1
		for end < n && (ops.Value(end) == connectors.ChangeDelete) == del {
			end++
		}
		sub := body.NewSlice(int64(start), int64(end))
		err := mr.group(ctx, sub, del)
		sub.Release()
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

// pendingAny reports whether a change of one of keys is staged.
func (mr *mirrorRun) pendingAny(keys [][]byte) bool {
	for _, k := range keys {
		if _, ok := mr.pending[string(k)]; ok {
			return true
		}
	}
	return false
}

// feedDeletes removes the keys of rec's rows that the state holds.
func (mr *mirrorRun) feedDeletes(ctx context.Context, rec arrow.RecordBatch) error {
	im := mr.im
	keys := make([][]byte, rec.NumRows())
	for i := range keys {
		keys[i] = mr.hasher.keyOf(nil, rec, i)
	}
	// The changes staged before are applied first, in commit order: with
	// the removals when none of these keys is among them (one apply, one
	// scan of the events, instead of two), else before the lookup, which
	// must see them.
	carry := mr.im.ImportType == importspec.EventStream && mr.table == nil && !mr.pendingAny(keys)
	if !carry {
		if err := mr.flush(ctx); err != nil {
			return err
		}
	}
	rm := mr.newRemover(carry)
	// A tombstone (a crash cut off its removal) is removed again.
	err := mr.ms.MirrorLookup(ctx, im.ProjectID, im.ID, mr.gen, keys, func(row store.MirrorRow) error { return rm.add(ctx, row) })
	if err == nil {
		err = rm.flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("mirror deletes: %w", err)
	}
	return nil
}

// ForgetMirror drops what a Mirror import keeps (its state in the store
// and its change feed in the warehouse) once the import is deleted; it
// is safe to repeat.
func ForgetMirror(ctx context.Context, reg *connectors.Registry, st store.Store, im *importspec.Import) error {
	if err := dropMirrorState(ctx, st, im); err != nil {
		return err
	}
	if reg != nil && im.TableParams.Name != "" {
		if err := dropFeed(ctx, reg, im); err != nil {
			return err
		}
	}
	if ms, ok := st.(store.MirrorSources); ok {
		return ms.MirrorForgetSource(ctx, im.ProjectID, im.ID)
	}
	return nil
}

// dropMirrorState forgets im's Mirror state and History versions.
func dropMirrorState(ctx context.Context, st store.Store, im *importspec.Import) error {
	if ms, ok := st.(store.Mirrors); ok {
		if err := ms.MirrorDrop(ctx, im.ProjectID, im.ID); err != nil {
			return err
		}
	}
	if hs, ok := st.(store.Histories); ok && im.IsHistory() {
		if err := hs.HistoryDrop(ctx, im.ProjectID, im.ID); err != nil {
			return err
		}
	}
	return nil
}

// dropFeed drops im's change feed, if its source has one.
func dropFeed(ctx context.Context, reg *connectors.Registry, im *importspec.Import) error {
	src, err := reg.Open(ctx, im.SourceConfig())
	if err != nil {
		return fmt.Errorf("drop change feed: connect: %w", err)
	}
	defer src.Close()
	if cf, ok := src.(connectors.ChangeFeed); ok {
		if err := cf.DropFeed(ctx, connectors.Feed{Name: FeedName(im), Table: im.TableParams}); err != nil {
			return fmt.Errorf("drop change feed: %w", err)
		}
	}
	return nil
}
