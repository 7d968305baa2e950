package duckstore

import (
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

type spillResult struct {
	r   *keyRun
	buf []store.Key // sortBuf, handed back
	err error
}

// spill freezes the full recent tier, puts an empty one in its place and
// starts writing the frozen keys to a run in the background. A spill
// still in progress is waited for first (it takes 256k adds to fill the
// tier again, so only tests with tiny tiers wait).
func (t *tieredKeys) spill() error {
	if err := t.waitSpill(); err != nil {
		return err
	}
	if t.spare == nil {
		t.spare = newKeySet(t.cfg.recentCap)
	}
	t.frozen, t.recent, t.spare = t.recent, t.spare, nil
	t.frozenID = t.nextID
	t.ckpt.frozenSeq = t.ckpt.seqHint
	t.nextID++
	t.startSpill()
	// Spills must not outrun merges without bound: every run costs each
	// lookup a filter probe. The bound is loose, though: at 100 M stored
	// keys a merge may take longer than the writes that fill a few tiers,
	// and waiting for it stalls every request behind the writer.
	for t.merge != nil && len(t.runs) > max(t.cfg.stallRuns, 2*t.cfg.maxRuns) {
		if err := t.finishMerge(<-t.merge.done); err != nil {
			return err
		}
	}
	return nil
}

// startSpill writes frozen to a run in a goroutine. It only reads frozen
// (the writer's lookups do too; removals of its keys are tombstones) and
// takes sortBuf and counts, which nothing else touches until the result
// hands sortBuf back.
func (t *tieredKeys) startSpill() {
	done := make(chan spillResult, 1)
	t.spilling = done
	path, id, frozen, buf, counts := t.runPath(), t.frozenID, t.frozen, t.sortBuf, t.counts
	t.sortBuf = nil
	go func() {
		buf = bucketSort(buf, frozen.all(), counts)
		r, err := writeRun(path, id, buf)
		if err == nil {
			err = r.makeDurable()
		}
		done <- spillResult{r, buf[:0], err}
	}()
}

// waitSpill waits until no frozen tier is left, retrying a failed spill
// (whose keys stay frozen, and visible, meanwhile).
func (t *tieredKeys) waitSpill() error {
	for t.frozen != nil {
		if t.spilling == nil {
			t.startSpill()
		}
		if err := t.finishSpill(<-t.spilling); err != nil {
			return err
		}
	}
	return nil
}

// finishSpill makes the spilled run replace the frozen tier. The run's id
// is above every other run's: ids are handed out in order and merges keep
// their newest input's.
func (t *tieredKeys) finishSpill(res spillResult) error {
	t.spilling = nil
	t.sortBuf = res.buf
	if res.err != nil {
		return fmt.Errorf("spill dedup keys: %w", res.err)
	}
	t.runs = append(t.runs, res.r)
	t.ckpt.coveredSeq, t.ckpt.dirty = t.ckpt.frozenSeq, true
	t.frozen.reset()
	t.frozen, t.spare = nil, t.frozen
	return t.startMerge()
}

// writeRun writes sorted keys to a new run.
func writeRun(path string, id uint64, keys []store.Key) (*keyRun, error) {
	w, err := createRun(path, id, len(keys))
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := w.add(k); err != nil {
			return nil, errors.Join(err, w.abort())
		}
	}
	return w.finish()
}
