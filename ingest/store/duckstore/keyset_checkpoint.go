package duckstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Crash checkpoints. Without them a kill -9 at 100 M stored events made
// the next Open read every key back from the events table and sort it
// (tens of seconds). Instead the set's manifest is rewritten, between two
// writes, whenever its runs changed: every run it names is fsynced with
// its filter, and merged-away runs are deleted only once a newer manifest
// no longer names them. After a crash Open adopts the last one and adds
// the keys of the events stored since (seq ≥ its FromSeq: every key in no
// named run came from a write that began after the newest named run
// froze), then checks the set against the table (loadKeys):
//
//   - Between two writes every key in the set belongs to a durable write
//     (a write's keys come out again when it fails) and each durable write
//     is in the tables once the write log is replayed; a run freezes during
//     a write but a manifest is written only after that write ended.
//   - Keys can go afterwards (a failed write's, a deleted import's, a
//     Mirror run's replaced events) with no newer manifest; then the set
//     holds more keys than the table, so its count is compared with the
//     table's count of keyed events after the catch-up and a mismatch
//     rebuilds the set from the table as before. The set holds every
//     table key (named runs, or the catch-up), so equal counts mean equal
//     sets.
type ckptState struct {
	seqHint    int64 // the seq the current write's first row gets (Write's checkpoint call)
	frozenSeq  int64 // seqHint when the tier being spilled froze
	coveredSeq int64 // every key in no run has seq ≥ this
	dirty      bool  // runs or tombstones changed since the last manifest
	obsolete   []string
	// loadSync makes the runs a rebuild at Open wrote durable, in the
	// background (its merges wait); it sends their filters' checksums.
	loadSync chan []uint32
}

// makeDurable fsyncs a finished run and writes its filter file.
func (r *keyRun) makeDurable() error {
	if err := r.f.Sync(); err != nil {
		return fmt.Errorf("sync dedup key run %s: %w", r.path, err)
	}
	sum, err := r.writeFilter()
	if err != nil {
		return err
	}
	r.sum, r.durable = sum, true
	return nil
}

// retire closes merged-away runs now and deletes their files after the
// next manifest (an older one may name them).
func (t *tieredKeys) retire(runs []*keyRun) {
	for _, r := range runs {
		t.ckpt.obsolete = append(t.ckpt.obsolete, r.path)
	}
	t.deletes.Add(1)
	go func() {
		defer t.deletes.Done()
		for _, r := range runs {
			r.bloom.free()
			_ = r.f.Close()
		}
	}()
}

// dropObsolete deletes retired runs' files once a manifest that does not
// name them is durable. Unlinking a file of millions of keys takes the
// file system a while: not on the writer's time.
func (t *tieredKeys) dropObsolete() {
	paths := t.ckpt.obsolete
	t.ckpt.obsolete = nil
	if len(paths) == 0 {
		return
	}
	t.deletes.Add(1)
	go func() {
		defer t.deletes.Done()
		for _, p := range paths {
			_ = os.Remove(p)
			_ = os.Remove(p + filterSuffix)
		}
	}()
}

// checkpoint is called by the store before each write plans, with no
// write in progress, and nextSeq the seq that write's first row gets. It
// writes a manifest when the runs changed and all of them are durable.
func (t *tieredKeys) checkpoint(nextSeq int64) error {
	t.ckpt.seqHint = nextSeq
	if !t.ckpt.dirty || t.failed != nil || t.kept || t.loadBuf != nil {
		return nil
	}
	for _, r := range t.runs {
		if !r.durable {
			return nil
		}
	}
	inRuns := t.n - t.recent.len()
	if t.frozen != nil {
		inRuns -= t.frozen.len()
	}
	m := keysManifest{Version: keysManifestVersion, Checkpoint: true, FromSeq: t.ckpt.coveredSeq,
		N: inRuns, NextID: t.nextID, NextFile: t.nextFile}
	for _, r := range t.runs {
		m.Runs = append(m.Runs, manifestRun{ID: r.id, File: filepath.Base(r.path), N: r.n, Filter: r.sum, Blocks: len(r.bloom.blocks)})
	}
	for k, b := range t.tomb {
		m.Tombs = append(m.Tombs, manifestTomb{k, b})
	}
	if err := writeManifest(t.dir, &m); err != nil {
		return err
	}
	t.ckpt.dirty = false
	t.dropObsolete()
	return nil
}

// afterLoad ends a rebuild at Open: with every key in runs, the events
// stored from nextSeq on are the ones a later catch-up must add.
func (t *tieredKeys) afterLoad(nextSeq int64) {
	if t.recent.len() == 0 && len(t.runs) > 0 {
		t.ckpt.coveredSeq = nextSeq
	}
}

// startLoadSync makes the runs of a rebuild durable in the background.
func (t *tieredKeys) startLoadSync() {
	runs := t.runs
	done := make(chan []uint32, 1)
	t.ckpt.loadSync = done
	go func() {
		sums := make([]uint32, len(runs))
		for i, r := range runs {
			err := r.f.Sync()
			if err == nil {
				sums[i], err = r.writeFilter()
			}
			if err != nil {
				done <- nil // not durable: no checkpoint until merges replace them
				return
			}
		}
		done <- sums
	}()
}

func (t *tieredKeys) pollLoadSync() {
	if t.ckpt.loadSync == nil {
		return
	}
	select {
	case sums := <-t.ckpt.loadSync:
		t.finishLoadSync(sums)
	default:
	}
}

func (t *tieredKeys) waitLoadSync() {
	if t.ckpt.loadSync != nil {
		t.finishLoadSync(<-t.ckpt.loadSync)
	}
}

// finishLoadSync marks the rebuild's runs durable; they are still the
// set's first runs (no merge started meanwhile).
func (t *tieredKeys) finishLoadSync(sums []uint32) {
	t.ckpt.loadSync = nil
	for i, sum := range sums {
		t.runs[i].sum, t.runs[i].durable = sum, true
	}
	t.ckpt.dirty = sums != nil
	_ = t.startMerge()
}

var errKeysDiffer = errors.New("the dedup keys' checkpoint does not match the events table")
