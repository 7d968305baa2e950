package duckstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/tributary-dev/tributary/ingest/store"
)

// tieredKeys is the exact dedup set with memory nearly flat in its size:
// a bounded in-memory keySet of recent keys in front of immutable sorted
// run files (keyset_run.go) in a directory beside the database, each with
// an in-memory Bloom filter and sparse index (~1.8 bytes per key). All
// keys in memory (27 bytes each) made a sync's RSS grow with the table.
//
// Runs are derived data: while the process runs nothing is fsynced, and
// after a crash Open empties the directory and rebuilds the set from the
// events table (load, finishLoad). A clean Close keeps them for the next
// Open (keep, adoptTieredKeys: keyset_persist.go).
//
// Removals are rare (a failed write's keys, a deleted import's): a key in
// the recent tier just leaves it, one in a run gets a tombstone. tomb[k] =
// b hides k in the runs with id < b, b being the id the next spill will
// get; so a key removed and added again (into recent, later a newer run)
// is visible again. Merges drop hidden keys, and a merge of all runs lets
// the tombstones it saw go.
//
// A key is visible in at most one place (add checks all of them first),
// so n, the count, is exact without looking at the disk.
//
// The store's writer lock serialises every call. A spill (keyset_spill.go)
// and a merge each run in a background goroutine that only reads its
// inputs (a frozen keySet; immutable runs, read with pread) and a copy of
// the tombstones; the writer swaps the result in when it next calls the
// set (poll), so no lock is needed.
type tieredKeys struct {
	dir    string
	cfg    keysConfig
	recent *keySet
	runs   []*keyRun // ascending id: oldest first
	tomb   map[store.Key]uint64
	n      int

	nextID   uint64          // id of the next spilled run
	nextFile uint64          // names run files (a merge's output reuses an id)
	sortBuf  []store.Key     // a run's keys, sorted
	counts   *[1 << 16]int32 // bucketSort's
	loadBuf  []store.Key     // keys from load, not yet sorted
	readBuf  []byte
	merge    *mergeJob // the merge in progress, if any
	err      error     // an I/O error has() met, kept for the next add
	// failed: an add or remove returned an error, so the set may hold keys
	// of events that are not stored (a write's keys it could not take
	// back); keep then refuses and the next Open rebuilds from the table.
	failed error

	// A full recent tier is frozen and spilled by a goroutine (frozen and
	// the sort buffers are its own meanwhile) while a spare tier takes
	// new keys: sorting and writing 512k keys stalled a write ~150 ms.
	frozen   *keySet // keys being spilled, as run frozenID; nil if none
	frozenID uint64
	spare    *keySet          // an empty tier for the next freeze
	spilling chan spillResult // the spill of frozen, until swapped in

	hints keyHints // filter answers for the next adds (keyset_hint.go)

	deletes sync.WaitGroup // merged-away runs being deleted
	kept    bool           // keep handed the runs on; close has nothing to do

	ckpt ckptState // crash checkpoints (keyset_checkpoint.go)
}

type keysConfig struct {
	recentCap int // keys held in memory before they spill to a run
	maxRuns   int // more runs than this start a merge
	maxTombs  int // more tombstones than this start a merge of all runs
	stallRuns int // a spill waits for the merge in progress beyond this many runs (at least 2*maxRuns)
	// loadRunKeys: the runs a rebuild at Open sorts and spills before it
	// merges them (at least recentCap).
	loadRunKeys int
}

// defaultKeysConfig: 256k recent keys take 8 MB of slots (twice, as one
// tier spills while the other fills; +4 MB to sort them), 20 MB fixed in
// all. Eight runs keep a new key's lookup at a few filter probes. 512k
// (40 MB) was measured too: a 5M-row sync peaked 25 MiB higher (288-296
// against 262-271 MiB) at the same rate, and 128k saved only 5-10 MiB more.
// A rebuild at Open sorts runs of 4M keys (64 MB, twice) before it merges;
// 48 runs (a spill's stall) stay within the hints' 64.
func defaultKeysConfig() keysConfig {
	return keysConfig{recentCap: 256 << 10, maxRuns: 8, maxTombs: 64 << 10, stallRuns: maxHintRuns - 16,
		loadRunKeys: 4 << 20}
}

type mergeJob struct {
	inputs []*keyRun            // contiguous in runs
	tomb   map[store.Key]uint64 // tombstones when it started
	// full: the inputs held all keys outside the recent tier (no spill
	// pending), so a key a tombstone it saw hides is then in no run at all
	// older than the tombstone.
	full bool
	stop chan struct{}    // closed to abandon it
	done chan mergeResult // receives the one result
}

type mergeResult struct {
	r   *keyRun
	err error
}

// newTieredKeys starts an empty set whose runs live in dir, which it
// empties first (runs left there by an earlier process are stale).
func newTieredKeys(dir string, cfg keysConfig) (*tieredKeys, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear dedup key directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create dedup key directory: %w", err)
	}
	return &tieredKeys{
		dir:     dir,
		cfg:     cfg,
		recent:  newKeySet(cfg.recentCap),
		tomb:    map[store.Key]uint64{},
		sortBuf: make([]store.Key, 0, cfg.recentCap),
		counts:  new([1 << 16]int32),
		readBuf: make([]byte, runBlockSize),
	}, nil
}

func (t *tieredKeys) len() int { return t.n }

// load adds k to a set being filled at Open, before any other call:
// without lookups, keys are collected, sorted and spilled as runs of
// loadRunKeys; finishLoad merges those and drops repeats. Runs of the
// recent tier's size made a rebuild at 100 M keys a 400-way merge.
func (t *tieredKeys) load(k store.Key) error {
	if t.loadBuf == nil {
		t.loadBuf = make([]store.Key, 0, max(t.cfg.recentCap, min(t.cfg.loadRunKeys, 1<<20)))
	}
	t.loadBuf = append(t.loadBuf, k)
	if len(t.loadBuf) < max(t.cfg.recentCap, t.cfg.loadRunKeys) {
		return nil
	}
	return t.spillLoaded()
}

func (t *tieredKeys) spillLoaded() error {
	t.sortBuf = bucketSort(t.sortBuf, slices.Values(t.loadBuf), t.counts)
	t.loadBuf = t.loadBuf[:0]
	return t.spillSorted()
}

func (t *tieredKeys) finishLoad() error {
	// The load's buffers may have grown past the recent tier's needs.
	defer func() { t.sortBuf = make([]store.Key, 0, t.cfg.recentCap) }()
	if len(t.runs) == 0 && len(t.loadBuf) <= t.cfg.recentCap {
		// Few keys: they all fit the recent tier.
		for _, k := range t.loadBuf {
			t.recent.add(k)
		}
		t.loadBuf = nil
		t.n = t.recent.len()
		return nil
	}
	if len(t.loadBuf) > 0 {
		if err := t.spillLoaded(); err != nil {
			return err
		}
	}
	t.loadBuf = nil
	if len(t.runs) > 1 {
		for _, r := range t.runs {
			r.bloom.free() // the merge reads files only; the output gets its own
		}
		out, err := mergeRuns(t.runPath(), t.runs[len(t.runs)-1].id, t.runs, nil, nil)
		if err != nil {
			return fmt.Errorf("merge dedup key runs: %w", err)
		}
		var errs []error
		for _, r := range t.runs {
			errs = append(errs, r.close())
		}
		t.runs = []*keyRun{out}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("drop merged dedup key runs: %w", err)
		}
	}
	t.n = t.runs[0].n
	t.startLoadSync()
	return nil
}

// contains reports whether k is in the set.
func (t *tieredKeys) contains(k store.Key) (bool, error) {
	if err := t.poll(); err != nil {
		return false, err
	}
	if t.recent.has(k) {
		return true, nil
	}
	return t.inRuns(k, false)
}

// has is contains for tests: an I/O error answers false and is returned
// by the next add or remove.
func (t *tieredKeys) has(k store.Key) bool {
	ok, err := t.contains(k)
	if err != nil {
		t.err = err
	}
	return ok
}

// inRuns reports whether k is visible in a run (or the frozen tier, the
// newest run to be), newest first. hinted: k may be the key prefilter
// announced next (only add consumes the hints).
func (t *tieredKeys) inRuns(k store.Key, hinted bool) (bool, error) {
	if len(t.runs) == 0 && t.frozen == nil {
		return false, nil
	}
	var p probe
	var mask uint64
	if hinted {
		p, mask, hinted = t.hints.take(k, t.runs)
	}
	hideBelow, hidden := t.tomb[k]
	if t.frozen != nil && !(hidden && t.frozenID < hideBelow) && t.frozen.has(k) {
		return true, nil
	}
	if len(t.runs) == 0 {
		return false, nil
	}
	if !hinted {
		p = newProbe(k)
	}
	for i := len(t.runs) - 1; i >= 0; i-- {
		r := t.runs[i]
		if hidden && r.id < hideBelow {
			return false, nil // and so are all older runs
		}
		var ok bool
		var err error
		switch {
		case !hinted:
			ok, err = r.contains(&p, t.readBuf)
		case mask&(1<<i) != 0:
			ok, err = r.search(&p, t.readBuf)
		}
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// add inserts k, reporting whether it was new. On an error k is not in
// the set unless it was before.
func (t *tieredKeys) add(k store.Key) (_ bool, err error) {
	defer t.noteErr(&err)
	if err := t.takeErr(); err != nil {
		return false, err
	}
	if err := t.poll(); err != nil {
		return false, err
	}
	if t.recent.len() >= t.cfg.recentCap {
		if err := t.spill(); err != nil {
			return false, err
		}
	}
	t.warm(k)
	in, err := t.inRuns(k, true)
	if err != nil || in {
		return false, err
	}
	if !t.recent.add(k) {
		return false, nil
	}
	t.n++
	return true, nil
}

// remove deletes k if present.
func (t *tieredKeys) remove(k store.Key) (err error) {
	defer t.noteErr(&err)
	if err := t.takeErr(); err != nil {
		return err
	}
	if err := t.poll(); err != nil {
		return err
	}
	if t.recent.has(k) {
		t.recent.remove(k)
		t.n--
		return nil
	}
	in, err := t.inRuns(k, false)
	if err != nil || !in {
		return err
	}
	t.tomb[k] = t.nextID
	t.n--
	return t.startMerge()
}

// noteErr remembers the first error add or remove returned, for keep.
func (t *tieredKeys) noteErr(err *error) {
	if *err != nil && t.failed == nil {
		t.failed = *err
	}
}

func (t *tieredKeys) takeErr() error {
	err := t.err
	t.err = nil
	return err
}

func (t *tieredKeys) runPath() string {
	t.nextFile++
	return filepath.Join(t.dir, fmt.Sprintf("run-%08d", t.nextFile))
}

// spillSorted writes sortBuf (at load) to a new run and empties it.
func (t *tieredKeys) spillSorted() error {
	r, err := writeRun(t.runPath(), t.nextID, t.sortBuf)
	if err != nil {
		return err
	}
	t.nextID++
	t.runs = append(t.runs, r)
	t.sortBuf = t.sortBuf[:0]
	return nil
}

// startMerge starts a background merge if none runs and one is due: of
// all runs when tombstones pile up, else of the newest runs from the
// oldest one no more than twice their total. Runs then grow roughly
// geometrically, so a key is rewritten O(log n) times and a big run from
// Open is left alone until the new keys add up to half of it.
func (t *tieredKeys) startMerge() error {
	if t.merge != nil || len(t.runs) == 0 || t.ckpt.loadSync != nil {
		return nil
	}
	start := -1
	switch {
	case len(t.tomb) > t.cfg.maxTombs && t.frozen == nil:
		// Only a merge of all runs with no spill pending lets tombstones
		// go (see finishMerge); finishSpill calls again.
		start = 0
	case len(t.runs) > t.cfg.maxRuns:
		newer := 0
		for _, r := range t.runs {
			newer += r.n
		}
		start = len(t.runs) - 2
		for i, r := range t.runs[:len(t.runs)-1] {
			newer -= r.n
			if r.n <= 2*newer {
				start = i
				break
			}
		}
	default:
		return nil
	}
	j := &mergeJob{
		inputs: slices.Clone(t.runs[start:]),
		full:   start == 0 && t.frozen == nil,
		tomb:   make(map[store.Key]uint64, len(t.tomb)),
		stop:   make(chan struct{}),
		done:   make(chan mergeResult, 1),
	}
	for k, b := range t.tomb {
		j.tomb[k] = b
	}
	path, id := t.runPath(), j.inputs[len(j.inputs)-1].id
	t.merge = j
	go func() {
		r, err := mergeRuns(path, id, j.inputs, j.tomb, j.stop)
		if err == nil {
			if err = r.makeDurable(); err != nil {
				err = errors.Join(err, r.close())
				r = nil
			}
		}
		j.done <- mergeResult{r, err}
	}()
	return nil
}

// poll swaps in a finished spill or merge.
func (t *tieredKeys) poll() error {
	t.pollLoadSync()
	if t.spilling != nil {
		select {
		case res := <-t.spilling:
			if err := t.finishSpill(res); err != nil {
				return err
			}
		default:
		}
	}
	if t.merge == nil {
		return nil
	}
	select {
	case res := <-t.merge.done:
		return t.finishMerge(res)
	default:
		return nil
	}
}

// finishMerge replaces the merge's inputs by its output. The output has
// the newest input's id: tombstones set during the merge hide it, as they
// did the inputs, and those set before hide none of the keys it kept.
func (t *tieredKeys) finishMerge(res mergeResult) error {
	j := t.merge
	t.merge = nil
	if res.err != nil {
		return fmt.Errorf("merge dedup key runs: %w", res.err)
	}
	i := slices.Index(t.runs, j.inputs[0])
	rest := t.runs[i+len(j.inputs):]
	runs := slices.Clone(t.runs[:i])
	var errs []error
	if res.r.n > 0 {
		runs = append(runs, res.r)
	} else {
		errs = append(errs, res.r.close())
	}
	t.runs = append(runs, rest...)
	t.ckpt.dirty = true
	// Nothing reads the inputs any more, but the last checkpoint may name
	// them: their files go once a newer one is written (retire).
	t.retire(j.inputs)
	if j.full {
		// No run older than a seen tombstone holds its key any more.
		for k, b := range j.tomb {
			if t.tomb[k] == b {
				delete(t.tomb, k)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drop merged dedup key runs: %w", err)
	}
	return t.startMerge()
}

// stopMerge abandons the merge in progress, if any; its inputs stay.
func (t *tieredKeys) stopMerge() {
	if j := t.merge; j != nil {
		close(j.stop)
		if res := <-j.done; res.r != nil {
			_ = res.r.close()
		}
		t.merge = nil
	}
}

// close abandons a merge in progress and deletes the runs.
func (t *tieredKeys) close() error {
	if t.kept {
		return nil
	}
	var errs []error
	if t.spilling != nil {
		if res := <-t.spilling; res.r != nil {
			errs = append(errs, res.r.close())
		}
		t.spilling = nil
	}
	t.stopMerge()
	t.waitLoadSync()
	t.deletes.Wait()
	for _, r := range t.runs {
		errs = append(errs, r.close())
	}
	t.runs = nil
	errs = append(errs, os.RemoveAll(t.dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close dedup keys: %w", err)
	}
	return nil
}

// memBytes estimates the set's memory: the fixed part (recent tier and
// buffers) and the part that grows with the keys in runs.
func (t *tieredKeys) memBytes() (fixed, growing int) {
	for _, ks := range []*keySet{t.recent, t.frozen, t.spare} {
		if ks != nil {
			for i := range ks.shards {
				fixed += len(ks.shards[i].slots) * keyBytes
			}
		}
	}
	fixed += cap(t.sortBuf)*keyBytes + len(t.readBuf) + len(t.counts)*4
	for _, r := range t.runs {
		growing += r.bloom.bytes() + len(r.index)*keyBytes
	}
	growing += len(t.tomb) * 48 // key, value and map overhead
	return fixed, growing
}
