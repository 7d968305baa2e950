package amplitude

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Profiles come from each user's latest event (spec §2.5), written once at
// the end of a job. Keeping every user in memory would grow with the
// project, and would be lost by a restart; so the latest event of each user
// is gathered per hour range in memory (bounded by ProfileMemory), spilled
// as a run file sorted by user id and fsynced with the range's checkpoint,
// and runs are merged level by level (like an LSM tree) so that disk work
// stays O(users · log runs) and only a few runs are open at the end.

// fanIn runs of one level are merged into one run of the next level.
const fanIn = 8

// runMagic starts every run file; the format may change with it.
const runMagic = "tributary-amplitude-profiles-1\n"

// profileState is the persisted part: the runs a checkpoint covers.
type profileState struct {
	Runs []profileRun `json:"runs,omitempty"`
	Seq  int          `json:"seq"` // numbers run files; never reused
}

type profileRun struct {
	Name  string `json:"name"`
	Level int    `json:"level"`
	Users int    `json:"users"`
}

// latest is a user's newest event seen so far. Ties on time go to the
// greater insert id, so the winner does not depend on the order hours were
// fetched in, and a re-run writes the same profile.
type latest struct {
	ms    int64
	iid   []byte // reused as the user's events arrive: no allocation per event
	props []byte
}

func newer(ms int64, iid string, than *latest) bool {
	return ms > than.ms || ms == than.ms && iid > string(than.iid)
}

// profileSpill gathers latest events for one job.
type profileSpill struct {
	dir     string
	limit   int // bytes of mem before a spill
	mem     map[string]*latest
	bytes   int
	pending []profileRun // spilled since the last commit
}

func newProfileSpill(dir string, limit int) *profileSpill {
	return &profileSpill{dir: dir, limit: limit, mem: make(map[string]*latest)}
}

// observe records an event of user; props is its user_properties object.
// Nothing is retained from the arguments: iid may point into a decoder's
// shared string chunk, which must not stay alive for one user.
func (p *profileSpill) observe(st *profileState, user []byte, ms int64, iid string, props []byte) error {
	if l, ok := p.mem[string(user)]; ok {
		if !newer(ms, iid, l) {
			return nil
		}
		p.bytes += len(props) - len(l.props)
		l.ms, l.iid, l.props = ms, append(l.iid[:0], iid...), append(l.props[:0], props...)
		return nil
	}
	p.mem[string(user)] = &latest{ms: ms, iid: []byte(iid), props: slices.Clone(props)}
	p.bytes += len(user) + len(iid) + len(props) + 96 // map entry and struct
	if p.bytes >= p.limit {
		return p.spill(st)
	}
	return nil
}

// spill writes mem as a level-0 run.
func (p *profileSpill) spill(st *profileState) error {
	if len(p.mem) == 0 {
		return nil
	}
	users := make([]string, 0, len(p.mem))
	for u := range p.mem {
		users = append(users, u)
	}
	slices.Sort(users)
	run := profileRun{Name: fmt.Sprintf("run-%06d.bin", st.Seq), Users: len(users)}
	st.Seq++
	err := writeRun(filepath.Join(p.dir, run.Name), func(w *runWriter) error {
		for _, u := range users {
			l := p.mem[u]
			w.add([]byte(u), l.ms, l.iid, l.props)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.pending = append(p.pending, run)
	clear(p.mem)
	p.bytes = 0
	return nil
}

// commit spills what is left, adds the pending runs to st and compacts.
// The returned files are obsolete once st is saved, not before: until then
// the last saved state still names them.
func (p *profileSpill) commit(st *profileState) (obsolete []string, err error) {
	if err := p.spill(st); err != nil {
		return nil, err
	}
	st.Runs = append(st.Runs, p.pending...)
	p.pending = p.pending[:0]
	for level := 0; level <= maxLevel(st.Runs); level++ {
		var at []profileRun
		for _, r := range st.Runs {
			if r.Level == level {
				at = append(at, r)
			}
		}
		if len(at) < fanIn {
			continue
		}
		merged := profileRun{Name: fmt.Sprintf("run-%06d.bin", st.Seq), Level: level + 1}
		st.Seq++
		err := writeRun(filepath.Join(p.dir, merged.Name), func(w *runWriter) error {
			return mergeRuns(p.dir, at, func(user []byte, ms int64, iid, props []byte) error {
				w.add(user, ms, iid, props)
				merged.Users++
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
		st.Runs = slices.DeleteFunc(st.Runs, func(r profileRun) bool { return r.Level == level })
		st.Runs = append(st.Runs, merged)
		for _, r := range at {
			obsolete = append(obsolete, filepath.Join(p.dir, r.Name))
		}
	}
	return obsolete, nil
}

func maxLevel(runs []profileRun) int {
	m := 0
	for _, r := range runs {
		m = max(m, r.Level)
	}
	return m
}

// discard forgets everything since the last commit (an interrupted range
// is fetched again on resume).
func (p *profileSpill) discard() {
	for _, r := range p.pending {
		_ = os.Remove(filepath.Join(p.dir, r.Name))
	}
	p.pending = p.pending[:0]
	clear(p.mem)
	p.bytes = 0
}

// removeOrphans deletes run files st does not name: written by a range
// that a crash interrupted, or merged away just before one.
func removeOrphans(dir string, st *profileState) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !slices.ContainsFunc(st.Runs, func(r profileRun) bool { return r.Name == e.Name() }) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// runWriter appends records: uvarint user length, user, varint ms,
// uvarint insert-id length, insert id, uvarint props length, props. A zero
// user length ends the file, so a truncated run is detected.
type runWriter struct {
	w   *bufio.Writer
	buf []byte
}

func (w *runWriter) add(user []byte, ms int64, iid, props []byte) {
	b := binary.AppendUvarint(w.buf[:0], uint64(len(user)))
	b = append(b, user...)
	b = binary.AppendVarint(b, ms)
	b = binary.AppendUvarint(b, uint64(len(iid)))
	b = append(b, iid...)
	b = binary.AppendUvarint(b, uint64(len(props)))
	w.buf = b
	_, _ = w.w.Write(b)
	_, _ = w.w.Write(props) // errors stick in the bufio.Writer; Flush reports them
}

// writeRun writes a run atomically: temp file, fsync, rename, dir fsync.
func writeRun(path string, fill func(*runWriter) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".run-*")
	if err != nil {
		return fmt.Errorf("amplitude: profile spill: %w", err)
	}
	tmp := f.Name()
	w := &runWriter{w: bufio.NewWriterSize(f, 256<<10)}
	_, _ = w.w.WriteString(runMagic)
	err = fill(w)
	if err == nil {
		_ = w.w.WriteByte(0)
		err = w.w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("amplitude: profile spill: %w", err)
	}
	return nil
}

// runReader reads one run; the current record's slices are valid until
// the next call to next.
type runReader struct {
	f                *os.File
	r                *bufio.Reader
	user, iid, props []byte
	ms               int64
}

func openRun(path string) (*runReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("amplitude: profile run: %w", err)
	}
	rr := &runReader{f: f, r: bufio.NewReaderSize(f, 64<<10)}
	magic := make([]byte, len(runMagic))
	if _, err := io.ReadFull(rr.r, magic); err != nil || string(magic) != runMagic {
		f.Close()
		return nil, fmt.Errorf("amplitude: profile run %s: not a run file", path)
	}
	return rr, nil
}

var errRunEnd = errors.New("end of run")

func (rr *runReader) next() error {
	n, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return fmt.Errorf("amplitude: profile run %s: truncated: %w", rr.f.Name(), err)
	}
	if n == 0 {
		return errRunEnd
	}
	if rr.user, err = readN(rr.r, rr.user, n); err == nil {
		if rr.ms, err = binary.ReadVarint(rr.r); err == nil {
			if n, err = binary.ReadUvarint(rr.r); err == nil {
				if rr.iid, err = readN(rr.r, rr.iid, n); err == nil {
					if n, err = binary.ReadUvarint(rr.r); err == nil {
						rr.props, err = readN(rr.r, rr.props, n)
					}
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("amplitude: profile run %s: truncated: %w", rr.f.Name(), err)
	}
	return nil
}

func readN(r io.Reader, buf []byte, n uint64) ([]byte, error) {
	if n > 64<<20 {
		return nil, errors.New("record too large")
	}
	buf = slices.Grow(buf[:0], int(n))[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// runHeap orders readers by their current user id.
type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return bytes.Compare(h[i].user, h[j].user) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeRuns calls emit once per user of the runs, in user order, with
// that user's latest event across them.
func mergeRuns(dir string, runs []profileRun, emit func(user []byte, ms int64, iid, props []byte) error) error {
	h := make(runHeap, 0, len(runs))
	defer func() {
		for _, rr := range h {
			rr.f.Close()
		}
	}()
	for _, r := range runs {
		rr, err := openRun(filepath.Join(dir, r.Name))
		if err != nil {
			return err
		}
		if err := rr.next(); err != nil {
			rr.f.Close()
			if errors.Is(err, errRunEnd) {
				continue
			}
			return err
		}
		h = append(h, rr)
	}
	heap.Init(&h)
	var user, iid, props []byte
	var ms int64
	for h.Len() > 0 {
		top := h[0]
		user = append(user[:0], top.user...)
		ms, iid, props = top.ms, append(iid[:0], top.iid...), append(props[:0], top.props...)
		for h.Len() > 0 && bytes.Equal(h[0].user, user) {
			rr := h[0]
			if rr.ms > ms || rr.ms == ms && bytes.Compare(rr.iid, iid) > 0 {
				ms, iid, props = rr.ms, append(iid[:0], rr.iid...), append(props[:0], rr.props...)
			}
			switch err := rr.next(); {
			case errors.Is(err, errRunEnd):
				rr.f.Close()
				heap.Pop(&h)
			case err != nil:
				return err
			default:
				heap.Fix(&h, 0)
			}
		}
		if err := emit(user, ms, iid, props); err != nil {
			return err
		}
	}
	return nil
}
