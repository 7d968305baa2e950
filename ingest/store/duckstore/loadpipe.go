package duckstore

import (
	"context"
	"github.com/tributary-dev/tributary/internal/duckarrow"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// loadPipe lets the loader fill one Arrow chunk from the log while DuckDB
// inserts the previous one. Filling (replaying and checksumming the log,
// decoding entries, copying strings into the columns) is a tenth to a
// quarter of the loader's time (perf); run in turn with the INSERT, it
// added to the wait whenever the loader ran alone with a core to spare,
// as at the end of a sync, when the rows the loader is behind by are all
// that is left to do. COMMIT (DuckDB compressing the rows) still runs
// alone.
//
// The connection is never used by two goroutines at once: the INSERT runs
// on its own goroutine, and every other use of the connection (the next
// INSERT, the common-properties lookup that may insert a row, the
// appenders, COMMIT and ROLLBACK) waits for it first. The pipe only swaps
// the chunk being filled; what a transaction holds and commits is
// unchanged, so exactly-once is untouched.
type loadPipe struct {
	fill, spare *eventChunk
	done        chan error // the INSERT in flight; nil when none

	// beforeInsert, when set by tests, runs on the INSERT's goroutine
	// before each pipelined INSERT; an error fails that INSERT.
	beforeInsert func() error
}

func newLoadPipe(chunkBytes int) *loadPipe {
	return &loadPipe{fill: newEventChunk(chunkBytes), spare: newEventChunk(chunkBytes)}
}

// idle waits for the INSERT in flight, if any, and returns its error.
// After it the connection is free and the spare chunk empty.
func (p *loadPipe) idle() error {
	if p.done == nil {
		return nil
	}
	err := <-p.done
	p.done = nil
	return err
}

// flush starts inserting the chunk being filled and swaps in the spare,
// after the previous INSERT (which emptied the spare) has finished.
func (p *loadPipe) flush(ctx context.Context, conn *duckdb.Conn, ar *duckarrow.Arrow) error {
	if err := p.idle(); err != nil {
		return err
	}
	full := p.fill
	p.fill, p.spare = p.spare, full
	done := make(chan error, 1)
	p.done = done
	hook := p.beforeInsert
	go func() {
		if hook != nil {
			if err := hook(); err != nil {
				full.discard()
				done <- err
				return
			}
		}
		done <- full.insert(ctx, conn, ar)
	}()
	return nil
}

// discard drops both chunks' rows after a failed load; call idle first.
func (p *loadPipe) discard() {
	p.fill.discard()
	p.spare.discard()
}
