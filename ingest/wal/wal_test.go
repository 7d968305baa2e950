package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
