package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func collect(t *testing.T, l *Log, after uint64) []string {
	t.Helper()
	var got []string
	if err := l.Replay(after, func(lsn uint64, p []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", lsn, p))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAppendReplayReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.segSize = 64 // force a segment per couple of entries
	for i := 1; i <= 10; i++ {
		lsn, err := l.Append([]byte(fmt.Sprintf("entry-%02d-padding-padding", i)))
		if err != nil || lsn != uint64(i) {
			t.Fatalf("append %d: lsn %d err %v", i, lsn, err)
		}
	}
	if got := collect(t, l, 7); len(got) != 3 || got[0] != "8:entry-08-padding-padding" {
		t.Fatalf("replay after 7: %v", got)
	}
	if err := l.Release(6); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, l, 6); len(got) != 4 {
		t.Fatalf("after release, replay from 6: %v", got)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) >= 10 {
		t.Fatalf("release removed nothing: %d segments", len(segs))
	}
	l.Close()
	l, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LastLSN() != 10 {
		t.Fatalf("LastLSN after reopen = %d", l.LastLSN())
	}
	if lsn, err := l.Append([]byte("eleven")); err != nil || lsn != 11 {
		t.Fatalf("append after reopen: %d %v", lsn, err)
	}
	if got := collect(t, l, 9); len(got) != 2 || got[1] != "11:eleven" {
		t.Fatalf("replay: %v", got)
	}
}

func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir)
	for i := 0; i < 3; i++ {
		if _, err := l.Append([]byte("durable")); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	seg := filepath.Join(dir, segName(1))
	// A crash mid-write: half an entry header and a garbage payload at the end.
	f, _ := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{9, 0, 0, 0, 1, 2})
	f.Close()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, l, 0); len(got) != 3 {
		t.Fatalf("torn tail: %v", got)
	}
	if lsn, err := l.Append([]byte("next")); err != nil || lsn != 4 {
		t.Fatalf("append after repair: %d %v", lsn, err)
	}
	l.Close()
	// Flip a payload byte of entry 2: the checksum catches it and, being
	// in the last segment, the log is cut there (entries 2.. were lost).
	b, _ := os.ReadFile(seg)
	b[headerSize+len("durable")+headerSize] ^= 0xff
	os.WriteFile(seg, b, 0o644)
	l, _ = Open(dir)
	if got := collect(t, l, 0); len(got) != 1 {
		t.Fatalf("after corruption: %v", got)
	}
	l.Close()
}

func TestCorruptionBeforeTheLastSegmentIsAnError(t *testing.T) {
	dir := t.TempDir()
	l, _ := Open(dir)
	l.segSize = 1
	for i := 0; i < 3; i++ {
		l.Append([]byte("x"))
	}
	l.Close()
	first := filepath.Join(dir, segName(1))
	b, _ := os.ReadFile(first)
	b[len(b)-1] ^= 0xff
	os.WriteFile(first, b, 0o644)
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

// TestAppendFramed: an entry written from a frame with header room reads
// back like one given to Append; a frame without the room is refused.
func TestAppendFramed(t *testing.T) {
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	frame := append(make([]byte, HeaderSize), "framed"...)
	if lsn, err := l.AppendFramed(frame); err != nil || lsn != 1 {
		t.Fatalf("append framed: lsn %d err %v", lsn, err)
	}
	if _, err := l.Append([]byte("plain")); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, l, 0); len(got) != 2 || got[0] != "1:framed" || got[1] != "2:plain" {
		t.Fatalf("replay: %v", got)
	}
	if _, err := l.AppendFramed(make([]byte, HeaderSize-1)); err == nil {
		t.Fatal("a frame without header room was accepted")
	}
}

// TestRecycledSegments: released segments come back as new ones, written
// over from their start. Their stale entries must never be read: not by
// Replay, not by Open, whether the log was closed cleanly, torn mid-write,
// or stopped right after a spare was renamed into place.
func TestRecycledSegments(t *testing.T) {
	dir := t.TempDir()
	// Long entries first, so each spare is longer than what the short
	// entries written over it later cover: a stale tail stays behind.
	l := openSized(t, dir, 200)
	entry := func(i int) string {
		if i <= 20 {
			return fmt.Sprintf("long-entry-%02d-%s", i, strings.Repeat("x", 80))
		}
		return fmt.Sprintf("short-%02d", i)
	}
	for i := 1; i <= 20; i++ {
		if _, err := l.Append([]byte(entry(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Release(16); err != nil {
		t.Fatal(err)
	}
	spares, _ := filepath.Glob(filepath.Join(dir, "*.spare"))
	if len(spares) != maxSpares {
		t.Fatalf("%d spares after release, want %d", len(spares), maxSpares)
	}
	for i := 21; i <= 40; i++ {
		if _, err := l.Append([]byte(entry(i))); err != nil {
			t.Fatal(err)
		}
	}
	if spares, _ = filepath.Glob(filepath.Join(dir, "*.spare")); len(spares) != 0 {
		t.Fatalf("spares not reused: %v", spares)
	}
	want := func(from, to int) []string {
		var w []string
		for i := from; i <= to; i++ {
			w = append(w, fmt.Sprintf("%d:%s", i, entry(i)))
		}
		return w
	}
	if got := collect(t, l, 16); !slices.Equal(got, want(17, 40)) {
		t.Fatalf("replay over recycled segments:\n got %v\nwant %v", got, want(17, 40))
	}
	l.Close()

	applied := 16 // what Release was told: replays start after it
	reopen := func(wantLast int) *Log {
		t.Helper()
		l := openSized(t, dir, 200)
		if got := l.LastLSN(); got != uint64(wantLast) {
			t.Fatalf("LastLSN after reopen = %d, want %d", got, wantLast)
		}
		if got := collect(t, l, uint64(applied)); !slices.Equal(got, want(applied+1, wantLast)) {
			t.Fatalf("replay after reopen:\n got %v\nwant %v", got, want(applied+1, wantLast))
		}
		return l
	}
	l = reopen(40)
	// The next rotation takes a spare: release, then fill the current
	// segment until a new one (a renamed spare) is current.
	applied = 38
	if err := l.Release(uint64(applied)); err != nil {
		t.Fatal(err)
	}
	segs := func() []string { s, _ := filepath.Glob(filepath.Join(dir, "*.wal")); return s }
	before := len(segs())
	i := 41
	for ; len(segs()) == before && i < 1000; i++ {
		if _, err := l.Append([]byte(entry(i))); err != nil {
			t.Fatal(err)
		}
	}
	if len(segs()) == before {
		t.Fatal("no rotation into a spare")
	}
	last := i - 1
	cur, off := l.segs[len(l.segs)-1], l.size
	crash(l)
	// A crash tore the current segment's next write: a header and part of
	// a payload over the stale bytes.
	if st, err := os.Stat(cur.path); err != nil || st.Size() <= off {
		t.Fatalf("the reused segment has no stale tail (%v, entries end at %d)", err, off)
	}
	var h [headerSize]byte
	binary.LittleEndian.PutUint32(h[0:4], 50)
	binary.LittleEndian.PutUint64(h[8:16], uint64(last+1))
	writeAt(t, cur.path, append(h[:], "partial"...), off)
	l = reopen(last)
	if lsn, err := l.Append([]byte(entry(last + 1))); err != nil || lsn != uint64(last+1) {
		t.Fatalf("append after repair: %d %v", lsn, err)
	}
	last++
	applied = last
	if err := l.Release(uint64(applied)); err != nil {
		t.Fatal(err)
	}
	crash(l)
	// A crash right after a spare was renamed into place as the next
	// segment: it holds nothing but stale entries.
	spares, _ = filepath.Glob(filepath.Join(dir, "*.spare"))
	if len(spares) == 0 {
		t.Fatal("no spare to rename")
	}
	if err := os.Rename(spares[0], filepath.Join(dir, segName(uint64(last+1)))); err != nil {
		t.Fatal(err)
	}
	l = reopen(last)
	if lsn, err := l.Append([]byte(entry(last + 1))); err != nil || lsn != uint64(last+1) {
		t.Fatalf("append into the renamed spare: %d %v", lsn, err)
	}
	if err := l.Release(uint64(last)); err != nil {
		t.Fatal(err)
	}
	// A clean Close leaves no spares and no stale bytes behind.
	curPath, size := l.segs[len(l.segs)-1].path, l.size
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if spares, _ = filepath.Glob(filepath.Join(dir, "*.spare")); len(spares) != 0 {
		t.Fatalf("spares after Close: %v", spares)
	}
	if st, err := os.Stat(curPath); err != nil {
		t.Fatal(err)
	} else if st.Size() != size {
		t.Fatalf("current segment after Close: %d bytes, want %d", st.Size(), size)
	}
	l = reopen(last + 1)
	defer l.Close()
	if got := collect(t, l, uint64(applied)); !slices.Equal(got, want(applied+1, last+1)) {
		t.Fatalf("replay:\n got %v\nwant %v", got, want(applied+1, last+1))
	}
}

// openSized opens the log in dir with segments of segSize bytes.
func openSized(t *testing.T, dir string, segSize int64) *Log {
	t.Helper()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.segSize = segSize
	return l
}

// crash abandons l as a killed process would: no Close, spares stay.
func crash(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
	l.f = nil
}

func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A Replay still reading a segment when Release retires it must not see the
// file overwritten by the next rotation: while a Replay runs, Release
// deletes (an open file keeps a deleted file's data) instead of recycling.
func TestReplayDuringReleaseAndRotation(t *testing.T) {
	l := openSized(t, t.TempDir(), 4<<20)
	defer l.Close()
	const size = 64 << 10
	entry := func(lsn uint64) []byte {
		p := make([]byte, size)
		binary.LittleEndian.PutUint64(p, lsn)
		return p
	}
	for len(l.segs) < 3 || l.size < l.segSize-size {
		if _, err := l.Append(entry(l.LastLSN() + 1)); err != nil {
			t.Fatal(err)
		}
	}
	last, second := l.LastLSN(), l.segs[1].first
	var got []uint64
	err := l.Replay(0, func(lsn uint64, p []byte) error {
		if binary.LittleEndian.Uint64(p) != lsn {
			return fmt.Errorf("entry %d holds the payload of %d", lsn, binary.LittleEndian.Uint64(p))
		}
		got = append(got, lsn)
		if lsn == 1 {
			// Retire the segment being read, then write well past the
			// reader's buffer into whatever the next segment is.
			if err := l.Release(second - 1); err != nil {
				return err
			}
			n := len(l.segs)
			for len(l.segs) == n || l.size < 3<<20 {
				if _, err := l.Append(entry(l.LastLSN() + 1)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, lsn := range got {
		if lsn != uint64(i+1) {
			t.Fatalf("replay entry #%d is LSN %d", i, lsn)
		}
	}
	if uint64(len(got)) != last {
		t.Fatalf("replay read %d entries, want %d", len(got), last)
	}
}

// After a clean Close every segment holds exactly its entries (what the
// code before recycling wrote, so it can open the log), and a finished
// segment that lost entries is corruption, not a shorter log.
func TestClosedLogHoldsOnlyEntries(t *testing.T) {
	dir := t.TempDir()
	l := openSized(t, dir, 300)
	for range 12 {
		if _, err := l.Append(bytes.Repeat([]byte("x"), 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Release(l.LastLSN() - 1); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		if _, err := l.Append([]byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		r := bytes.NewReader(b)
		for {
			_, _, _, err := readEntry(r, nil, int64(r.Len()))
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s after Close: %v", seg, err)
			}
		}
	}
	// Cut the last entry off a finished segment.
	st, _ := os.Stat(segs[1])
	if err := os.Truncate(segs[1], st.Size()-1-headerSize); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a finished segment missing its last entry: err = %v, want ErrCorrupt", err)
	}
}

// Spares with no segment left to order them by are never reused: their
// stale entries could carry the LSNs a new log starts from.
func TestOnlySparesLeft(t *testing.T) {
	dir := t.TempDir()
	l := openSized(t, dir, 200)
	for i := range 20 {
		if _, err := l.Append(fmt.Appendf(nil, "old-%02d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Release(l.LastLSN() - 1); err != nil {
		t.Fatal(err)
	}
	crash(l)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, s := range segs {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	crash(openSized(t, dir, 200)) // before anything was appended
	l = openSized(t, dir, 200)
	defer l.Close()
	if l.LastLSN() != 0 {
		t.Fatalf("an empty log reopened with LastLSN %d: %v", l.LastLSN(), collect(t, l, 0))
	}
}

// The loader's pattern: replay from the applied LSN, take a few entries,
// stop; sometimes replay the same entries again (a rolled-back load), or
// from further back; release segments behind; append meanwhile. Every
// Replay must deliver exactly the entries after its start, in order, and
// remember where it stopped so the next one need not read from the
// segment's start.
func TestReplayResumesWhereItStopped(t *testing.T) {
	l := openSized(t, t.TempDir(), 400)
	defer l.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	var entries []string // entries[lsn-1]
	var applied, released uint64
	errStop := errors.New("stop")
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 4:
			for range 1 + rng.IntN(4) {
				p := fmt.Sprintf("e%d-%s", len(entries)+1, strings.Repeat("x", rng.IntN(120)))
				lsn, err := l.Append([]byte(p))
				if err != nil || lsn != uint64(len(entries)+1) {
					t.Fatalf("append: %d %v", lsn, err)
				}
				entries = append(entries, p)
			}
		case op < 9:
			after := applied
			if op == 8 { // from further back, not before what was released
				after = released + rng.Uint64N(applied-released+1)
			}
			take := 1 + rng.IntN(6)
			next := after + 1
			err := l.Replay(after, func(lsn uint64, p []byte) error {
				if next-after > uint64(take) {
					return errStop
				}
				if lsn != next || string(p) != entries[lsn-1] {
					t.Fatalf("step %d: replay after %d gave %d:%.12s, want %d:%.12s", step, after, lsn, p, next, entries[next-1])
				}
				next++
				return nil
			})
			if err != nil && !errors.Is(err, errStop) {
				t.Fatalf("step %d: replay: %v", step, err)
			}
			if err == nil && next != uint64(len(entries))+1 {
				t.Fatalf("step %d: replay after %d ended at %d of %d entries", step, after, next-1, len(entries))
			}
			if got := l.resume.lsn; next-1 > after && got != next-1 {
				t.Fatalf("step %d: replay took entries up to %d but would resume after %d", step, next-1, got)
			}
			if op < 7 { // a load that committed
				applied = max(applied, next-1)
			}
		default:
			if err := l.Release(applied); err != nil {
				t.Fatal(err)
			}
			released = applied
		}
	}
	if got := collect(t, l, applied); len(got) != len(entries)-int(applied) {
		t.Fatalf("final replay: %d entries, want %d", len(got), len(entries)-int(applied))
	}
}
