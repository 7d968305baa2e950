package bigquery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resumes is how often one stream is resumed at its offset after a
// transient failure mid-stream before the read fails.
const resumes = 3

// fnError carries the callback's own error out unclassified.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }
func (e fnError) Unwrap() error { return e.err }

// readSession opens a read session for p and hands its batches to fn.
//
// Each stream is decoded by its own goroutine into a channel with one slot
// per stream; fn runs on the caller's goroutine, one batch at a time. So at
// most about two batches per stream are in memory (one being decoded, one
// queued), whatever the table size, and gRPC flow control holds the server
// back meanwhile. With one stream, batches reach fn in the stream's order.
func (s *Source) readSession(ctx context.Context, op string, p *plan, fn func(arrow.RecordBatch) error) error {
	sess, err := s.read.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{
		Parent: "projects/" + s.project,
		ReadSession: &storagepb.ReadSession{
			Table:      p.table.path(),
			DataFormat: storagepb.DataFormat_ARROW,
			ReadOptions: &storagepb.ReadSession_TableReadOptions{
				SelectedFields: p.fields,
				RowRestriction: p.restriction,
			},
		},
		MaxStreamCount: int32(p.streams),
	})
	if err != nil {
		return classify(ctx, op, err)
	}
	streams := sess.GetStreams()
	if len(streams) == 0 {
		return nil // BigQuery gives an empty table (or result) no streams
	}
	schema := sess.GetArrowSchema().GetSerializedSchema()
	if len(schema) == 0 {
		return fmt.Errorf("bigquery source: %s: the read session has no Arrow schema", op)
	}

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan arrow.RecordBatch, len(streams))
	var streamErr error // the first stream's failure; it stops the others
	var once sync.Once
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.readStream(rctx, st.GetName(), schema, func(rec arrow.RecordBatch) bool {
				select {
				case out <- rec:
					return true
				case <-rctx.Done():
					rec.Release()
					return false
				}
			})
			if err != nil && rctx.Err() == nil {
				once.Do(func() { streamErr = err; cancel() })
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()

	conf := &conformer{want: p.want, log: s.log}
	var stop error // why delivery stopped early: fn's error, the limit, a bad batch
	var rows int64
	for rec := range out {
		if stop == nil && rctx.Err() == nil {
			if stop = s.deliver(rctx, conf, rec, p.limit, &rows, fn); stop != nil {
				cancel()
			}
		}
		rec.Release()
	}
	// wg.Wait happened before out was closed, so streamErr is settled.
	var fe fnError
	switch {
	case errors.As(stop, &fe):
		return fe.err
	case ctx.Err() != nil:
		return fmt.Errorf("bigquery source: %s: %w", op, ctx.Err())
	case streamErr != nil:
		return classify(ctx, op, streamErr)
	case stop != nil && !errors.Is(stop, errLimit) && !errors.Is(stop, context.Canceled):
		return fmt.Errorf("bigquery source: %s: %w", op, stop)
	}
	return nil
}

var errLimit = errors.New("limit reached")

// deliver conforms rec and passes it to fn, cut at the limit.
func (s *Source) deliver(ctx context.Context, conf *conformer, rec arrow.RecordBatch, limit int64, rows *int64, fn func(arrow.RecordBatch) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := conf.conform(rec)
	if err != nil {
		return err
	}
	defer b.Release()
	n := b.NumRows()
	if limit > 0 && *rows+n > limit {
		cut := b.NewSlice(0, limit-*rows)
		defer cut.Release()
		b, n = cut, limit-*rows
	}
	*rows += n
	if n > 0 {
		if err := fn(b); err != nil {
			return fnError{err}
		}
	}
	if limit > 0 && *rows >= limit {
		return errLimit
	}
	return ctx.Err()
}

// readStream decodes one stream's batches and passes each (retained) to
// emit until the stream ends or emit returns false. After a transient
// failure it resumes at the offset of the next unread row.
func (s *Source) readStream(ctx context.Context, name string, schema []byte, emit func(arrow.RecordBatch) bool) error {
	var offset int64
	for attempt := 0; ; attempt++ {
		done, err := s.readFrom(ctx, name, schema, &offset, emit)
		if err == nil || done {
			return err
		}
		code := status.Code(err)
		if attempt >= resumes || ctx.Err() != nil || (code != codes.Unavailable && code != codes.Internal) {
			return err
		}
		s.log.Info("resuming Storage Read stream", "stream", name, "offset", offset, "err", err)
		select {
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readFrom reads name from *offset on; done reports that emit stopped it.
func (s *Source) readFrom(ctx context.Context, name string, schema []byte, offset *int64, emit func(arrow.RecordBatch) bool) (done bool, err error) {
	rs, err := s.read.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: name, Offset: *offset})
	if err != nil {
		return false, err
	}
	src := &responses{stream: rs, buf: schema}
	r, err := ipc.NewReader(src, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return false, errors.Join(src.err, err)
	}
	defer r.Release()
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		*offset += rec.NumRows()
		if !emit(rec) {
			return true, ctx.Err()
		}
	}
	if src.err != nil {
		return false, src.err
	}
	return false, r.Err()
}

// responses is the byte stream of a ReadRows call as the Arrow IPC stream
// format expects it: the session's schema message, then each response's
// record batch message (BigQuery sends both as encapsulated IPC messages),
// so one ipc.Reader decodes the whole stream with one schema.
type responses struct {
	stream storagepb.BigQueryRead_ReadRowsClient
	buf    []byte
	err    error // the stream's own error, kept apart from io.EOF
	eof    bool
}

func (r *responses) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		resp, err := r.stream.Recv()
		if err != nil {
			r.eof = true
			if err != io.EOF {
				r.err = err
			}
			return 0, io.EOF
		}
		r.buf = resp.GetArrowRecordBatch().GetSerializedRecordBatch()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
