package duckstore

import (
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

var errMergeStopped = errors.New("dedup key merge stopped")

// mergeRuns streams the union of inputs into one new run at path with the
// given id, dropping each key that tomb hides in the run it comes from
// (tomb[k] = b hides k in runs with id < b) and writing repeats once. It
// reads the inputs through ReadAt only, so the writer may go on reading
// them meanwhile. A receive on stop abandons the merge.
func mergeRuns(path string, id uint64, inputs []*keyRun, tomb map[store.Key]uint64, stop <-chan struct{}) (*keyRun, error) {
	total := 0
	for _, r := range inputs {
		total += r.n
	}
	w, err := createRun(path, id, total)
	if err != nil {
		return nil, err
	}
	h := make([]*runReader, 0, len(inputs))
	for _, r := range inputs {
		rr := newRunReader(r)
		ok, err := rr.next()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", r.path, err), w.abort())
		}
		if ok {
			h = append(h, rr)
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for done := 0; len(h) > 0; done++ {
		if done%65536 == 0 {
			select {
			case <-stop:
				return nil, errors.Join(errMergeStopped, w.abort())
			default:
			}
		}
		top := h[0]
		if b, hidden := tomb[top.cur]; !hidden || top.id >= b {
			if err := w.add(top.cur); err != nil {
				return nil, errors.Join(err, w.abort())
			}
		}
		ok, err := top.next()
		if err != nil {
			return nil, errors.Join(err, w.abort())
		}
		if !ok {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		siftDown(h, 0)
	}
	return w.finish()
}

// siftDown restores the min-heap order (by current key) below i.
func siftDown(h []*runReader, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && compareKeys(h[c+1].cur, h[c].cur) < 0 {
			c++
		}
		if compareKeys(h[c].cur, h[i].cur) >= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
