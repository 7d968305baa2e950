package main

import (
	"bytes"
	"compress/gzip"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// pregenerate builds up to n gzip payloads on every core, stopping at the
// memory cap; it also returns a few uncompressed bodies for decodeOnly.
func pregenerate(gen *generator, n int, o options) (payloads, raw [][]byte, rawBytes int) {
	payloads = make([][]byte, n)
	var next, wire atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n || wire.Load() >= int64(o.maxPayloadMB)<<20 {
					return
				}
				body := gen.batch(o.batch)
				payloads[k] = gz(body)
				wire.Add(int64(len(payloads[k])))
				mu.Lock()
				rawBytes += len(body)
				if len(raw) < 16 {
					raw = append(raw, body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out := payloads[:0] // drop the slots left empty by the cap
	for _, p := range payloads {
		if p != nil {
			out = append(out, p)
		}
	}
	return out, raw, rawBytes
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // client CPU is scarce; inflating costs the server about the same
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// generator makes realistic ~300-byte events with unique $insert_ids;
// a share of each batch (dup) re-sends earlier events unchanged, as a
// client retrying would. Each event's fields follow from its sequence
// number alone, so a re-sent one is an exact duplicate.
//
// Without a live window, every event (preloaded or measured) falls at a
// random time in the span before base: a backfill of old events in no
// order. With one, the preload is history as it happened: its events
// spread over the span before the live window, oldest first, and the
// measured events fall at random times in the live window, as live
// traffic (with late arrivals) does.
type generator struct {
	mu      sync.Mutex
	seq     int64
	run     string
	base    int64   // ms; the newest event time
	spanMs  int64   // > 0
	liveMs  int64   // 0: no live window
	preload int64   // events of the preload (seq below it)
	dup     float64 // share of re-sent events, 0 to 1
}

func newGenerator(now time.Time, span, live time.Duration, preload int, dup float64) *generator {
	g := &generator{run: strconv.FormatInt(now.UnixNano()%1e9, 36), base: now.Add(-time.Minute).UnixMilli(),
		spanMs: max(span.Milliseconds(), 1), preload: int64(preload), dup: dup}
	if live > 0 {
		g.liveMs = max(live.Milliseconds(), 1)
	}
	return g
}

// timeOf is event seq's time; r draws the random ones.
func (g *generator) timeOf(r *rand.Rand, seq int64) int64 {
	switch {
	case g.liveMs == 0:
		return g.base - r.Int64N(g.spanMs)
	case seq < g.preload:
		history := max(g.spanMs-g.liveMs, 1)
		return g.base - g.spanMs + int64(float64(seq)/float64(g.preload)*float64(history))
	default:
		return g.base - r.Int64N(g.liveMs)
	}
}

var (
	eventNames = []string{"Product Viewed", "Added To Cart", "Checkout Started", "Order Completed", "Page View", "Search", "Sign Up", "Login"}
	browsers   = []string{"Chrome", "Safari", "Firefox", "Edge", "Mobile Safari"}
	oses       = []string{"Mac OS X", "Windows", "iOS", "Android", "Linux"}
	categories = []string{"shoes", "shirts", "outdoor", "kitchen", "books", "toys", "garden"}
	sources    = []string{"google", "newsletter", "facebook", "direct", "partner"}
)

func (g *generator) batch(n int) []byte { return g.batchSeqs(n, nil) }

// next is the first sequence number not yet handed out.
func (g *generator) next() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seq
}

// batchSeqs is batch that also marks the sequence number of every event
// in it in seqs, when that is not nil (the crash check's bookkeeping).
func (g *generator) batchSeqs(n int, seqs *bitset) []byte {
	_, b := g.batchAt(n, seqs)
	return b
}

// batchAt is batchSeqs that also returns the batch's first sequence number.
func (g *generator) batchAt(n int, seqs *bitset) (int64, []byte) {
	g.mu.Lock()
	first := g.seq
	g.seq += int64(n)
	g.mu.Unlock()
	pick := rand.New(rand.NewPCG(uint64(first), 0xd0b))
	src := rand.NewPCG(0, 0)
	r := rand.New(src)
	b := make([]byte, 0, n*320)
	b = append(b, '[')
	for i := int64(0); i < int64(n); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		seq := first + i
		if first > 0 && pick.Float64() < g.dup {
			seq = pick.Int64N(first) // an event sent before, again
		}
		if seqs != nil {
			seqs.set(seq)
		}
		src.Seed(uint64(seq), 0x5eed)
		user := r.IntN(500_000)
		b = append(b, `{"event":"`...)
		b = append(b, eventNames[r.IntN(len(eventNames))]...)
		b = append(b, `","properties":{"time":`...)
		b = strconv.AppendInt(b, g.timeOf(r, seq), 10)
		b = append(b, `,"distinct_id":"user-`...)
		b = strconv.AppendInt(b, int64(user), 10)
		b = append(b, `","$insert_id":"lg-`...)
		b = append(b, g.run...)
		b = append(b, '-')
		b = strconv.AppendInt(b, seq, 10)
		b = append(b, `","$browser":"`...)
		b = append(b, browsers[r.IntN(len(browsers))]...)
		b = append(b, `","$os":"`...)
		b = append(b, oses[r.IntN(len(oses))]...)
		b = append(b, `","$current_url":"https://shop.example.com/p/`...)
		sku := r.IntN(20_000)
		b = strconv.AppendInt(b, int64(sku), 10)
		b = append(b, `","product_id":"sku-`...)
		b = strconv.AppendInt(b, int64(sku), 10)
		b = append(b, `","category":"`...)
		b = append(b, categories[r.IntN(len(categories))]...)
		b = append(b, `","price":`...)
		b = strconv.AppendFloat(b, float64(r.IntN(20000))/100, 'f', 2, 64)
		b = append(b, `,"utm_source":"`...)
		b = append(b, sources[r.IntN(len(sources))]...)
		b = append(b, `","mp_lib":"web"}}`...)
	}
	return first, append(b, ']')
}
