package duckstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"unsafe"

	"github.com/tributary-dev/tributary/ingest/store"
)

// A keyRun is one immutable file of sorted, distinct 16-byte keys: the
// disk tier of tieredKeys. In memory it keeps only a Bloom filter (about
// 1.75 bytes per key) and the first key of each block (1/16 byte per key),
// so a lookup costs one cache line of filter and, when the filter says
// "maybe", one pread of a block. Reads use ReadAt, not mmap: mapped pages
// would count in the process's RSS, the very thing this tier keeps flat.
type keyRun struct {
	id    uint64 // orders runs for tombstones: see tieredKeys
	path  string
	f     *os.File
	n     int         // keys in the file
	index []store.Key // first key of each block
	bloom bloom
	// durable: the file and its filter file are fsynced (sum is the
	// filter's checksum), so a checkpoint may name the run.
	durable bool
	sum     uint32
}

const (
	keyBytes     = 16
	runBlockKeys = 256 // 4 KiB blocks: one page per pread
	runBlockSize = runBlockKeys * keyBytes
)

func compareKeys(a, b store.Key) int {
	ah, bh := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if ah != bh {
		if ah < bh {
			return -1
		}
		return 1
	}
	al, bl := binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:])
	switch {
	case al < bl:
		return -1
	case al > bl:
		return 1
	}
	return 0
}

// probe is a key with its filter hashes, computed once per lookup and
// shared by all runs. h1, which picks the filter's block, is the key's
// first half itself: keys are digests, spread evenly already, and blocks
// then follow the keys' order, so a run written in order (a spill, a
// merge) sets its filter's bits front to back instead of taking a cache
// miss per key. Keys that were not spread evenly would only make the
// filter answer "maybe" more often.
type probe struct {
	k          store.Key
	h1, h2, h3 uint64
}

func newProbe(k store.Key) probe {
	h := mix(&k)
	return probe{k: k, h1: binary.BigEndian.Uint64(k[:8]), h2: h, h3: fmix(h ^ 0x9e3779b97f4a7c15)}
}

// contains reports whether the run holds p.k; buf (runBlockSize bytes)
// receives the block read.
func (r *keyRun) contains(p *probe, buf []byte) (bool, error) {
	if !r.bloom.mayContain(p) {
		return false, nil
	}
	return r.search(p, buf)
}

// search is contains past the filter, for a key the filter let through.
func (r *keyRun) search(p *probe, buf []byte) (bool, error) {
	// The block is the last one whose first key is <= k.
	lo, hi := 0, len(r.index)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareKeys(r.index[m], p.k) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	b := lo - 1
	if b < 0 {
		return false, nil
	}
	first := b * runBlockKeys
	cnt := min(runBlockKeys, r.n-first)
	buf = buf[:cnt*keyBytes]
	if _, err := r.f.ReadAt(buf, int64(first)*keyBytes); err != nil {
		return false, fmt.Errorf("read dedup key run %s: %w", r.path, err)
	}
	lo, hi = 0, cnt
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := compareKeys(store.Key(buf[m*keyBytes:(m+1)*keyBytes]), p.k); {
		case c == 0:
			return true, nil
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false, nil
}

// close closes and deletes the run's file.
func (r *keyRun) close() error {
	r.bloom.free()
	err := os.Remove(r.path + filterSuffix) // kept by an earlier Close, if at all
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return errors.Join(r.f.Close(), os.Remove(r.path), err)
}

// runWriter writes a run from keys in ascending order, building its
// filter and index as it goes; repeated keys are written once.
type runWriter struct {
	r    *keyRun
	w    *bufio.Writer
	last store.Key
	pend []store.Key // keys added but not yet written (runPending)
}

// createRun starts a run of at most maxKeys keys (the filter's size).
func createRun(path string, id uint64, maxKeys int) (*runWriter, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create dedup key run: %w", err)
	}
	r := &keyRun{id: id, path: path, f: f, bloom: newBloom(maxKeys)}
	return &runWriter{r: r, w: bufio.NewWriterSize(f, 256<<10), pend: make([]store.Key, 0, runPending)}, nil
}

// runPending keys are written and added to the filter together: one
// Write call for all, and the filter's cache misses of a run of adds
// overlap instead of waiting between writes.
const runPending = 1024

func (w *runWriter) add(k store.Key) error {
	r := w.r
	if r.n > 0 && k == w.last {
		return nil
	}
	if r.n%runBlockKeys == 0 {
		r.index = append(r.index, k)
	}
	w.pend = append(w.pend, k)
	r.n++
	w.last = k
	if len(w.pend) == cap(w.pend) {
		return w.flushPending()
	}
	return nil
}

func (w *runWriter) flushPending() error {
	for j := range w.pend {
		p := newProbe(w.pend[j])
		w.r.bloom.add(&p)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.pend))), len(w.pend)*keyBytes)
	w.pend = w.pend[:0]
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("write dedup key run %s: %w", w.r.path, err)
	}
	return nil
}

// finish flushes the file and returns the run, open for reading.
// No fsync: a run a checkpoint names is made durable apart (makeDurable).
func (w *runWriter) finish() (*keyRun, error) {
	if err := w.flushPending(); err != nil {
		return nil, errors.Join(err, w.abort())
	}
	if err := w.w.Flush(); err != nil {
		return nil, errors.Join(fmt.Errorf("write dedup key run %s: %w", w.r.path, err), w.abort())
	}
	w.r.index = append([]store.Key(nil), w.r.index...) // drop append's spare capacity
	return w.r, nil
}

func (w *runWriter) abort() error { return w.r.close() }

// runReader streams a run's keys in order (for merges).
type runReader struct {
	r   *bufio.Reader
	cur store.Key
	id  uint64
}

func newRunReader(r *keyRun) *runReader {
	return &runReader{r: bufio.NewReaderSize(io.NewSectionReader(r.f, 0, int64(r.n)*keyBytes), 64<<10), id: r.id}
}

// next advances to the next key, reporting false at the end.
func (rr *runReader) next() (bool, error) {
	_, err := io.ReadFull(rr.r, rr.cur[:])
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read dedup key run: %w", err)
	}
	return true, nil
}

// bloom is a blocked Bloom filter: all bloomK bits of a key lie in one
// 512-bit block, so a lookup touches one cache line instead of k. With
// 14 bits per key its false-positive rate is about 0.2% (measured by
// TestBloomFalsePositives). Each "maybe"
// costs a pread of the run's block: with 10 bits per key (1%) a 5M-row
// sync made 200k of them, 4% of its keys, at several microseconds each
// on a virtual machine.
//
// Large filters live outside the Go heap (keyset_mmap_unix.go) and are
// unmapped when their run closes: at 100 M keys they are the bulk of the
// heap (175 MB, twice while a merge builds its output), and on the heap
// they doubled the garbage collector's goal, which set the process's
// peak RSS, while a merged-away filter stayed resident until collected.
type bloom struct {
	blocks [][8]uint64
	mapped []byte // the mapping blocks live in, if any (free unmaps it)
}

const (
	bloomBitsPerKey = 14
	bloomK          = 10 // positions of 9 bits: 7 from h2, the rest from h3
)

func newBloom(n int) bloom { return newBloomBlocks(bloomBlocks(n)) }

// bloomBlocks is the size of newBloom(n)'s filter, in 64-byte blocks.
func bloomBlocks(n int) int { return max(1, (n*bloomBitsPerKey+511)/512) }

// newBloomBlocks makes a filter of nb blocks: a run written from more
// keys than it holds (a merge, repeats dropped) keeps its writer's size,
// and the filter file kept for it has that size.
func newBloomBlocks(nb int) bloom {
	if nb*64 >= mapBloomBytes {
		if m, err := mapAnon(nb * 64); err == nil {
			return bloom{blocks: unsafe.Slice((*[8]uint64)(unsafe.Pointer(unsafe.SliceData(m))), nb), mapped: m}
		}
	}
	return bloom{blocks: make([][8]uint64, nb)}
}

// mapBloomBytes: smaller filters (a spill's 256k keys take 448 KiB) stay
// on the heap, where allocating costs no system call.
const mapBloomBytes = 1 << 20

// free releases the filter's memory; it must not be used after.
func (b *bloom) free() {
	if b.mapped != nil {
		_ = unmap(b.mapped)
	}
	*b = bloom{}
}

func (b *bloom) block(p *probe) *[8]uint64 { return &b.blocks[b.blockIndex(p)] }

func (b *bloom) blockIndex(p *probe) int {
	i, _ := bits.Mul64(p.h1, uint64(len(b.blocks)))
	return int(i)
}

func (b *bloom) add(p *probe) {
	blk, h := b.block(p), p.h2
	for i := range bloomK {
		if i == 7 {
			h = p.h3
		}
		blk[(h>>6)&7] |= 1 << (h & 63)
		h >>= 9
	}
}

func (b *bloom) mayContain(p *probe) bool {
	blk, h := b.block(p), p.h2
	for i := range bloomK {
		if i == 7 {
			h = p.h3
		}
		if blk[(h>>6)&7]&(1<<(h&63)) == 0 {
			return false
		}
		h >>= 9
	}
	return true
}

func (b *bloom) bytes() int { return len(b.blocks) * 64 }
