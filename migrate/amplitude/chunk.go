package amplitude

import (
	"fmt"
	"slices"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// chunk is one batch on its way through the pipeline: up to batchSize
// exported lines, copied out of the archive reader's buffer, then what a
// worker made of them (records, the validated store batch, failures).
// A chunk owns its transformer and decoder because the batch's Props point
// into the decoder's arena until the batch is written; chunks are recycled
// so their buffers reach a steady size.
type chunk struct {
	seq      int            // position in the range: batches are written in this order
	exported int64          // lines read into this chunk, too long ones included
	opt      record.Options // how /import would validate the batch
	want     int            // lines the chunk is filled to (the batch size): buffers are sized for it

	data  []byte     // the lines, back to back
	lines []span     // per line; start < 0: over MaxLineBytes, not kept
	locs  []Location // per line

	tr    *transformer
	dec   record.Decoder
	buf   []byte // the records, back to back
	ends  []int
	side  []byte // user ids and user properties, see amplitudeEvent
	evs   []amplitudeEvent
	rlocs []Location     // per record
	vouch []record.Vouch // per record: what the transform checked (vouch.go)
	recs  [][]byte
	batch store.Batch
	state []recState // per record
	fails []Failure  // lines refused by the transform or the decoder, in that order
}

func newChunk() *chunk { return &chunk{tr: newTransformer()} }

// add copies one exported line (nil: over MaxLineBytes).
func (c *chunk) add(loc Location, b []byte) {
	c.locs = append(c.locs, loc)
	if b == nil {
		c.lines = append(c.lines, span{start: -1})
		return
	}
	start := len(c.data)
	if len(b) > cap(c.data)-len(c.data) {
		c.data = reserve(c.data, len(b), project(len(c.data), len(c.lines), c.want))
	}
	c.data = append(c.data, b...)
	c.lines = append(c.lines, span{start, len(c.data)})
}

func (c *chunk) len() int { return len(c.lines) }

// reset empties the chunk for reuse, keeping its buffers.
func (c *chunk) reset() {
	c.exported = 0
	c.data, c.lines, c.locs = c.data[:0], c.lines[:0], c.locs[:0]
	c.buf, c.ends, c.side, c.evs, c.rlocs = c.buf[:0], c.ends[:0], c.side[:0], c.evs[:0], c.rlocs[:0]
	c.vouch = c.vouch[:0]
	clear(c.recs) // do not pin an old batch's bytes
	c.recs = c.recs[:0]
	clear(c.fails)
	c.fails = c.fails[:0]
	clear(c.batch.Events)
	clear(c.batch.Changes)
	c.batch = store.Batch{Events: c.batch.Events[:0], Changes: c.batch.Changes[:0]}
	c.dec.Reset()
}

// prepare transforms the lines and validates the records exactly as POST
// /import does (record.Decoder, strict). It touches nothing but the chunk,
// so workers run it in parallel.
func (c *chunk) prepare() {
	maxBytes := record.DefaultLimits().MaxEventBytes
	for i, ln := range c.lines {
		loc := c.locs[i]
		if ln.start < 0 {
			c.fails = append(c.fails, Failure{Location: loc, Message: fmt.Sprintf("event too large: over %d bytes", MaxLineBytes)})
			continue
		}
		start, sideStart := len(c.buf), len(c.side)
		// A record is about the size of its line, a user's part smaller.
		if n := ln.end - ln.start; 2*n > cap(c.buf)-len(c.buf) || n > cap(c.side)-len(c.side) {
			c.buf = reserve(c.buf, 2*n, project(len(c.buf), len(c.ends), len(c.lines)))
			c.side = reserve(c.side, n, project(len(c.side), len(c.ends), len(c.lines)))
		}
		var ev amplitudeEvent
		var ferr *fieldError
		c.buf, c.side, ferr = c.tr.appendRecord(c.buf, c.side, ln.of(c.data), &ev)
		if ferr != nil {
			c.buf, c.side = c.buf[:start], c.side[:sideStart]
			c.fails = append(c.fails, Failure{Location: loc, Field: ferr.field, Message: ferr.msg})
			continue
		}
		if n := len(c.buf) - start; n > maxBytes {
			c.buf, c.side = c.buf[:start], c.side[:sideStart]
			c.fails = append(c.fails, Failure{Location: loc,
				Message: fmt.Sprintf("%v: the record is %d bytes; /import allows %d", record.ErrEventTooLarge, n, maxBytes)})
			continue
		}
		c.ends = append(c.ends, len(c.buf))
		c.evs = append(c.evs, ev)
		c.rlocs = append(c.rlocs, loc)
		c.vouch = append(c.vouch, c.tr.vouch.done())
	}
	start := 0
	for _, end := range c.ends {
		c.recs = append(c.recs, c.buf[start:end])
		start = end
	}
	c.batch.Source = store.SourceAmplitude
	opt := c.opt
	opt.Vouched = c.vouch
	// The records stay in c.buf until the batch is written and are not
	// read again: the events' properties can be their bytes.
	opt.Lend = true
	fails := c.dec.Decode(opt, c.recs, &c.batch)
	c.state = slices.Grow(c.state[:0], len(c.recs))[:len(c.recs)]
	clear(c.state)
	for _, f := range fails {
		c.state[f.Index] = recInvalid
		c.fails = append(c.fails, Failure{Location: c.rlocs[f.Index], InsertID: f.InsertID, Field: f.Field, Message: f.Message})
	}
}

// reserve makes room for n more bytes, in a buffer of want bytes when
// that is more than twice the current one. append grows a large slice by
// a quarter at a time, and slices.Grow zeroes the room it adds: a fresh
// chunk filling up to a batch of lines allocated, zeroed and copied them
// several times over, and each new page costs a fault the first time it
// is written. make zeroes only memory the heap reused, not pages fresh
// from the system.
func reserve(b []byte, n, want int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), max(len(b)+n, 2*cap(b), want))
	copy(nb, b)
	return nb
}

// projectAfter is how many items a buffer's size is projected from.
const projectAfter = 64

// project is the bytes of a buffer holding have bytes of items, once
// it holds all of want items: their average so far, and an eighth more
// for the spread (0 while there are too few items to tell).
func project(have, items, want int) int {
	if items < projectAfter || want <= items {
		return 0
	}
	whole := have / items * want
	return whole + whole/8
}
