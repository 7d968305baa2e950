package duckstore

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/tributary-dev/tributary/ingest/store"
)

// A clean Close keeps the dedup set's runs and writes a manifest naming
// them beside the tables' state they describe (keysMeta); the next Open
// adopts them instead of reading every key back from the events table and
// sorting it (at 100 M events that took minutes, and restart to serving
// is part of the target). While the process runs, the manifest is a
// crash checkpoint instead (keyset_checkpoint.go): Open adopts it, adds
// the keys of the events stored after it and checks the result against
// the table.
const keysManifestName = "manifest.json"

// keysManifestVersion changes when the run files' format or meaning does
// (keyBytes, the sort order, the key's hash); a manifest of another
// version is ignored and the set rebuilt.
const keysManifestVersion = 2

// keysMeta identifies the state of the tables a set of keys describes.
type keysMeta struct {
	AppliedLSN uint64 `json:"applied_lsn"`
	MaxSeq     int64  `json:"max_seq"`
	Events     int64  `json:"events"`
}

type keysManifest struct {
	Version int      `json:"version"`
	Meta    keysMeta `json:"meta"`
	// Checkpoint: written while the process ran (Meta is not set); the
	// runs hold the keys of the events before FromSeq, maybe a few more,
	// and maybe keys removed since.
	Checkpoint bool           `json:"checkpoint,omitempty"`
	FromSeq    int64          `json:"from_seq,omitempty"`
	N          int            `json:"n"`
	NextID     uint64         `json:"next_id"`
	NextFile   uint64         `json:"next_file"`
	Runs       []manifestRun  `json:"runs"`
	Tombs      []manifestTomb `json:"tombs,omitempty"`
}

type manifestRun struct {
	ID   uint64 `json:"id"`
	File string `json:"file"`
	N    int    `json:"n"`
	// Filter is the CRC-32C of the run's filter file (its Bloom filter
	// and index, filterSuffix): reading those back instead of hashing
	// every key again took a restart at 100 M keys from 14 s to a few.
	Filter uint32 `json:"filter"`
	// Blocks is the Bloom filter's size in 64-byte blocks: a run written
	// from more keys than it holds (a merge, a load with repeats) has a
	// filter sized for those, not for N. 0 (older manifests): sized for N.
	Blocks int `json:"blocks,omitempty"`
}

type manifestTomb struct {
	Key   store.Key `json:"key"`
	Below uint64    `json:"below"`
}

// keep ends the set like close, but leaves its keys on disk for
// adoptTieredKeys: the recent tier spilled, every run fsynced, then the
// manifest. A merge in progress is abandoned (its inputs are kept).
func (t *tieredKeys) keep(meta keysMeta) error {
	if t.failed != nil {
		return errors.Join(fmt.Errorf("dedup keys not kept after a failed add or remove: %w", t.failed), t.close())
	}
	if err := t.takeErr(); err != nil {
		return errors.Join(err, t.close())
	}
	if err := t.waitSpill(); err != nil {
		return errors.Join(err, t.close())
	}
	t.stopMerge()
	t.waitLoadSync()
	if t.recent.len() > 0 {
		t.sortBuf = bucketSort(t.sortBuf, t.recent.all(), t.counts)
		r, err := writeRun(t.runPath(), t.nextID, t.sortBuf)
		if err != nil {
			return errors.Join(err, t.close())
		}
		t.nextID++
		t.runs = append(t.runs, r)
		t.recent.reset()
	}
	// FromSeq: every key is in a run now; a crash after the next Open
	// adopted this manifest catches up from the last write's events.
	m := keysManifest{Version: keysManifestVersion, Meta: meta, N: t.n, NextID: t.nextID, NextFile: t.nextFile, FromSeq: t.ckpt.seqHint}
	for _, r := range t.runs {
		if !r.durable {
			if err := r.makeDurable(); err != nil {
				return errors.Join(err, t.close())
			}
		}
		m.Runs = append(m.Runs, manifestRun{ID: r.id, File: filepath.Base(r.path), N: r.n, Filter: r.sum, Blocks: len(r.bloom.blocks)})
	}
	for k, b := range t.tomb {
		m.Tombs = append(m.Tombs, manifestTomb{k, b})
	}
	if err := writeManifest(t.dir, &m); err != nil {
		return errors.Join(err, t.close())
	}
	t.dropObsolete()
	t.deletes.Wait()
	var errs []error
	for _, r := range t.runs {
		errs = append(errs, r.f.Close())
		r.bloom.free()
	}
	t.runs, t.kept = nil, true
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close dedup key runs: %w", err)
	}
	return nil
}

func writeManifest(dir string, m *keysManifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode dedup key manifest: %w", err)
	}
	tmp := filepath.Join(dir, keysManifestName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write dedup key manifest: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, filepath.Join(dir, keysManifestName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("write dedup key manifest: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// adoptTieredKeys opens the set the manifest in dir names. exact: the
// manifest is a clean Close's and describes the tables' state meta, so
// the set is complete. Otherwise (a crash checkpoint, or a clean Close's
// manifest the tables moved on from) the caller must add the keys of the
// events from fromSeq on and check the set against the table
// (Store.catchUpKeys). With no usable manifest it returns nil and the
// caller rebuilds the set (newTieredKeys empties dir). The manifest stays:
// it remains true of the runs it names, which are deleted only after a
// newer manifest replaced it.
func adoptTieredKeys(dir string, cfg keysConfig, meta keysMeta) (_ *tieredKeys, exact bool, fromSeq int64, _ error) {
	path := filepath.Join(dir, keysManifestName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, 0, nil
	}
	if err != nil {
		return nil, false, 0, fmt.Errorf("read dedup key manifest: %w", err)
	}
	var m keysManifest
	if json.Unmarshal(b, &m) != nil || m.Version != keysManifestVersion {
		return nil, false, 0, nil
	}
	exact = !m.Checkpoint && m.Meta == meta
	if !exact && m.FromSeq <= 0 {
		// A manifest of a build without checkpoints, behind the tables:
		// catching up from the first event is a slow rebuild.
		return nil, false, 0, nil
	}
	t := &tieredKeys{
		ckpt:     ckptState{seqHint: m.FromSeq},
		dir:      dir,
		cfg:      cfg,
		recent:   newKeySet(cfg.recentCap),
		tomb:     make(map[store.Key]uint64, len(m.Tombs)),
		sortBuf:  make([]store.Key, 0, cfg.recentCap),
		counts:   new([1 << 16]int32),
		readBuf:  make([]byte, runBlockSize),
		n:        m.N,
		nextID:   m.NextID,
		nextFile: m.NextFile,
	}
	for _, tb := range m.Tombs {
		t.tomb[tb.Key] = tb.Below
	}
	runs, err := openRuns(dir, m.Runs)
	if err != nil {
		return nil, false, 0, nil // rebuilt from the table instead
	}
	t.runs = runs
	for _, r := range runs {
		if !r.durable {
			// Its filter was rebuilt from the keys: written again for the
			// next checkpoint (the run file itself was fsynced when named).
			if err := r.makeDurable(); err != nil {
				return nil, false, 0, errors.Join(err, t.close())
			}
		}
	}
	t.ckpt.coveredSeq = m.FromSeq
	removeStrays(dir, m.Runs)
	if err := t.startMerge(); err != nil {
		return nil, false, 0, errors.Join(err, t.close())
	}
	return t, exact, m.FromSeq, nil
}

// openRuns opens the listed run files and rebuilds their filters and
// indexes, several at a time. A run that is not what the manifest says
// (size, order) fails them all.
func openRuns(dir string, list []manifestRun) ([]*keyRun, error) {
	// Checked before anything is opened: a failure below must close every
	// run it opened (file handle, mapped filter).
	if !slices.IsSortedFunc(list, func(a, b manifestRun) int { return cmp.Compare(a.ID, b.ID) }) {
		return nil, errors.New("dedup key runs out of order")
	}
	runs := make([]*keyRun, len(list))
	errs := make([]error, len(list))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, mr := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			runs[i], errs[i] = openRun(filepath.Join(dir, mr.File), mr.ID, mr.N, mr.Blocks, mr.Filter)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, r := range runs {
			if r != nil {
				r.f.Close()
				r.bloom.free()
			}
		}
		return nil, err
	}
	return runs, nil
}

// openRun reads a kept run back: n distinct keys in ascending order, its
// filter (of blocks blocks) and index from its filter file when that has
// the checksum sum, else from the keys themselves.
func openRun(path string, id uint64, n, blocks int, sum uint32) (*keyRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// A filter of blocks blocks can be read back; an implausible size
	// (a filter is sized for at least its run's keys) is rebuilt for n.
	if nb := bloomBlocks(n); blocks < nb || blocks > 4*nb {
		blocks = nb
	}
	r := &keyRun{id: id, path: path, f: f, n: n, bloom: newBloomBlocks(blocks), index: make([]store.Key, 0, (n+runBlockKeys-1)/runBlockKeys)}
	fail := func(err error) (*keyRun, error) {
		f.Close()
		r.bloom.free()
		return nil, fmt.Errorf("dedup key run %s: %w", path, err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != int64(n)*keyBytes {
		return fail(errors.Join(err, errors.New("size does not match the manifest")))
	}
	if r.readFilter(sum) {
		r.sum, r.durable = sum, true
		return r, nil
	}
	br := bufio.NewReaderSize(f, 256<<10)
	var k, last store.Key
	for i := range n {
		if _, err := io.ReadFull(br, k[:]); err != nil {
			return fail(err)
		}
		if i > 0 && compareKeys(last, k) >= 0 {
			return fail(errors.New("keys out of order"))
		}
		if i%runBlockKeys == 0 {
			r.index = append(r.index, k)
		}
		p := newProbe(k)
		r.bloom.add(&p)
		last = k
	}
	return r, nil
}

// removeStrays deletes the files in dir no kept run names (an abandoned
// merge's output, a spill cut short).
func removeStrays(dir string, keep []manifestRun) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), filterSuffix)
		if !slices.ContainsFunc(keep, func(mr manifestRun) bool { return mr.File == name }) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// filterSuffix names a kept run's filter file: its Bloom filter's blocks,
// then its index, as they are in memory.
const filterSuffix = ".filter"

func (r *keyRun) filterBytes() (blocks, index []byte) {
	blocks = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(r.bloom.blocks))), len(r.bloom.blocks)*64)
	index = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(r.index))), len(r.index)*keyBytes)
	return blocks, index
}

// writeFilter writes the run's filter file (once, when the run is made
// durable: runs are immutable) and returns its checksum.
func (r *keyRun) writeFilter() (uint32, error) {
	blocks, index := r.filterBytes()
	sum := crc32.Update(crc32.Checksum(blocks, castagnoli), castagnoli, index)
	path := r.path + filterSuffix
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("write dedup key filter: %w", err)
	}
	_, err = f.Write(blocks)
	if err == nil {
		_, err = f.Write(index)
	}
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return 0, fmt.Errorf("write dedup key filter %s: %w", path, err)
	}
	return sum, nil
}

// readFilter fills the run's filter and index from its filter file,
// reporting false when the file is missing, short or not the one kept.
func (r *keyRun) readFilter(sum uint32) bool {
	r.index = r.index[:cap(r.index)]
	blocks, index := r.filterBytes()
	f, err := os.Open(r.path + filterSuffix)
	if err != nil {
		r.index = r.index[:0]
		return false
	}
	defer f.Close()
	_, err = io.ReadFull(f, blocks)
	if err == nil {
		_, err = io.ReadFull(f, index)
	}
	if err != nil || crc32.Update(crc32.Checksum(blocks, castagnoli), castagnoli, index) != sum {
		clear(blocks)
		r.index = r.index[:0]
		return false
	}
	return true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
