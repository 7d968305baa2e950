package amplitude

import (
	"archive/zip"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// MaxLineBytes bounds one exported event. /import refuses records over
// 1 MB anyway; the margin is for the Amplitude fields the transform drops.
const MaxLineBytes = 4 << 20

// ErrCorrupt marks an export archive that cannot be read: a broken zip, a
// broken gzip member. Downloads are retried; a corrupt archive that arrived
// whole is not, because Amplitude would send the same bytes again.
var ErrCorrupt = errors.New("amplitude export: corrupt archive")

// Location names one exported line, for failure reports.
type Location struct {
	File string `json:"file,omitempty"` // name inside the zip, e.g. 123/123_2024-03-01_5#0.json.gz
	Line int    `json:"line,omitempty"` // 1-based
}

// Archive is one downloaded export: a zip of gzipped NDJSON files, spilled
// to a temporary file because zip needs random access. Close removes it.
type Archive struct {
	f    *os.File // nil: an empty export (404)
	size int64
}

// openArchive wraps a spilled download; it takes ownership of f.
func openArchive(f *os.File) (*Archive, error) {
	st, err := f.Stat()
	if err != nil {
		closeRemove(f)
		return nil, fmt.Errorf("amplitude export: %w", err)
	}
	a := &Archive{f: f, size: st.Size()}
	// Open the directory now, so a truncated download shows up while it can
	// still be retried, before any event of it is loaded.
	if _, err := zip.NewReader(f, a.size); err != nil {
		closeRemove(f)
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return a, nil
}

// Size is the compressed size in bytes.
func (a *Archive) Size() int64 {
	if a == nil {
		return 0
	}
	return a.size
}

// Close removes the temporary file.
func (a *Archive) Close() error {
	if a == nil || a.f == nil {
		return nil
	}
	name := a.f.Name()
	err := a.f.Close()
	if rerr := os.Remove(name); rerr != nil && err == nil {
		err = rerr
	}
	a.f = nil
	return err
}

func closeRemove(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// LineFunc receives each line of an export; line is only valid during the
// call. A line longer than MaxLineBytes arrives as nil: it was skipped
// without being held in memory.
type LineFunc func(loc Location, line []byte) error

// Lines streams every non-blank line of every file in the archive, files in
// name order so that a run is repeatable. Only one file is open at a time;
// it is held whole, still compressed, when it is 32 MB or less
// (wholeEntryBytes), and streamed otherwise; of its NDJSON only one line
// is held.
func (a *Archive) Lines(fn LineFunc) error {
	if a == nil || a.f == nil {
		return nil
	}
	zr, err := zip.NewReader(a.f, a.size)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return readZip(zr, fn)
}

// readZip is Lines on an open zip; the fuzz test drives it directly.
func readZip(zr *zip.Reader, fn LineFunc) error {
	e := entryReader{wholeMax: wholeEntryBytes}
	return e.readZip(zr, fn)
}

func (e *entryReader) readZip(zr *zip.Reader, fn LineFunc) error {
	files := slices.Clone(zr.File)
	slices.SortFunc(files, func(x, y *zip.File) int { return strings.Compare(x.Name, y.Name) })
	for _, zf := range files {
		if zf.FileInfo().IsDir() {
			continue
		}
		if err := e.read(zf, fn); err != nil {
			return err
		}
	}
	return nil
}

// wholeEntryBytes bounds the files of an archive (a gzipped hour, ~8
// times smaller than its NDJSON) that are read whole into memory before
// they are inflated; larger ones are streamed. klauspost's inflater reads
// a *bytes.Reader through code made for that type and a *bufio.Reader
// through calls it cannot inline: BenchmarkArchiveLines, alternated,
// 2.68-2.85 GB/s of NDJSON streamed against 3.12-3.27 read whole.
const wholeEntryBytes = 32 << 20

// entryReader reads the files of one archive, keeping its buffers from
// one file to the next.
type entryReader struct {
	wholeMax int           // files up to this size are read whole
	br       *bufio.Reader // the zip entry, streamed
	whole    []byte        // the zip entry, read whole
	lr       *bufio.Reader // the inflated lines
	long     []byte        // a line longer than lr's buffer
}

func (e *entryReader) read(zf *zip.File, fn LineFunc) error {
	rc, err := zf.Open()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, zf.Name, err)
	}
	defer rc.Close()
	var src io.Reader // a *bytes.Reader or a *bufio.Reader: see wholeEntryBytes
	var head []byte
	if n := zf.UncompressedSize64; n <= uint64(e.wholeMax) {
		// Read to EOF, one byte past the size: zip checks the entry's
		// CRC-32 and size only there.
		e.whole = slices.Grow(e.whole[:0], int(n)+1)[:int(n)+1]
		m, err := io.ReadFull(rc, e.whole)
		switch {
		case err == nil:
			err = fmt.Errorf("more than the %d bytes its header gives", n)
		case m != int(n):
			err = fmt.Errorf("%d of the %d bytes its header gives: %w", m, n, err)
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			err = nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, zf.Name, err)
		}
		src, head = bytes.NewReader(e.whole[:m]), e.whole[:min(m, 2)]
	} else {
		if e.br == nil {
			e.br = bufio.NewReaderSize(nil, 64<<10)
		}
		e.br.Reset(rc)
		src = e.br
		head, _ = e.br.Peek(2)
	}
	var r io.Reader = src
	// Amplitude gzips every file; sniff instead of trusting the name so a
	// proxy that already inflated them does not break the reader.
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		gz, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, zf.Name, err)
		}
		defer gz.Close()
		r = gz
	}
	if e.lr == nil {
		e.lr = bufio.NewReaderSize(r, 64<<10)
	} else {
		e.lr.Reset(r)
	}
	loc := Location{File: zf.Name}
	for {
		line, err := readLine(e.lr, &e.long)
		var eof, tooLong bool
		if err != nil {
			eof, tooLong = errors.Is(err, io.EOF), errors.Is(err, errLineTooLong)
			if !eof && !tooLong {
				return fmt.Errorf("%w: %s line %d: %v", ErrCorrupt, zf.Name, loc.Line+1, err)
			}
		}
		if eof && len(line) == 0 {
			return nil
		}
		loc.Line++
		var ferr error
		if tooLong {
			ferr = fn(loc, nil)
		} else if t := bytes.TrimSpace(line); len(t) > 0 {
			ferr = fn(loc, t)
		}
		if ferr != nil {
			return ferr
		}
		if eof {
			return nil
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline. Short lines alias the
// reader's buffer; longer ones are gathered in *long up to MaxLineBytes.
// Beyond that the rest of the line is discarded and the result is nil with
// errLineTooLong. At the end of input it returns the last partial line with
// io.EOF.
func readLine(r *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	buf := append((*long)[:0], line...)
	for {
		line, err = r.ReadSlice('\n')
		if len(buf)+len(line) > MaxLineBytes {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		buf = append(buf, line...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	*long = buf
	if err == nil {
		return buf[:len(buf)-1], nil
	}
	return buf, err
}
