package duckstore

import (
	"cmp"
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/duckarrow"
)

// keysMeta describes the tables' state for the dedup set's manifest
// (keyset_persist.go): Open compares it with what Close recorded. keyed
// is the number of events with a dedup key, for the check of a set
// adopted from a crash checkpoint: counted in the same scan (after a
// crash's replay the table's newest rows are not checkpointed, and each
// scan of 100 M events cost ≈ 0.5 s of CPU).
func (s *Store) keysMeta(ctx context.Context) (m keysMeta, keyed int64, err error) {
	m = keysMeta{AppliedLSN: s.applied}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(max(seq), 0), count(k_hi) FROM events`).Scan(&m.Events, &m.MaxSeq, &keyed); err != nil {
		return m, 0, fmt.Errorf("count events: %w", err)
	}
	return m, keyed, nil
}

// loadKeys adopts the dedup set the last clean Close kept, or else fills
// a new one from the events table. Reading rows and inserting keys cost
// about the same, so a goroutine reads (readKeys) while this one inserts.
func (s *Store) loadKeys(ctx context.Context) error {
	start := time.Now()
	meta, keyed, err := s.keysMeta(ctx)
	if err != nil {
		return err
	}
	dir := s.path + ".keys"
	adopted, exact, fromSeq, err := adoptTieredKeys(dir, s.keysCfg, meta)
	if err != nil {
		return err
	}
	if adopted != nil && !exact {
		added, err := s.catchUpKeys(ctx, adopted, fromSeq, keyed)
		if err != nil {
			s.log.Warn("duckstore: dedup keys' checkpoint not usable; rebuilding them from the events table", "err", err)
			if err := adopted.close(); err != nil {
				return fmt.Errorf("load keys: %w", err)
			}
			adopted = nil
		} else {
			s.log.Info("duckstore: dedup keys caught up from their checkpoint", "from_seq", fromSeq, "added", added)
		}
	}
	if adopted != nil {
		s.keys = adopted
		s.log.Info("duckstore: dedup keys adopted", "keys", adopted.len(), "runs", len(adopted.runs), "exact", exact, "took", time.Since(start))
		return nil
	}
	if s.keys, err = newTieredKeys(dir, s.keysCfg); err != nil {
		return err
	}
	err = s.eachKey(ctx, 0, s.keys.load)
	if err == nil {
		err = s.keys.finishLoad()
	}
	if err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	if tk, ok := s.keys.(*tieredKeys); ok {
		tk.afterLoad(s.nextSeq)
	}
	s.log.Info("duckstore: dedup keys loaded", "keys", s.keys.len(), "took", time.Since(start))
	return nil
}

// keepKeys closes the dedup set, keeping it for the next Open when the
// tables' state can be read (else the next Open rebuilds it). A set that
// failed an add or remove since Open (s.broken says "restart the server"
// after one) may hold keys of events that are not stored: kept, it would
// make the next Open drop those events as duplicates when sent again.
func (s *Store) keepKeys() error {
	tk, ok := s.keys.(*tieredKeys)
	if !ok {
		return s.keys.close()
	}
	if err := cmp.Or(s.broken, tk.failed); err != nil {
		s.log.Warn("duckstore: dedup keys not kept after a failure; the next open rebuilds them", "err", err)
		return tk.close()
	}
	meta, _, err := s.keysMeta(context.Background())
	if err != nil {
		s.log.Warn("duckstore: dedup keys not kept; the next open rebuilds them", "err", err)
		return tk.close()
	}
	return tk.keep(meta)
}

// catchUpKeys adds to a set adopted from a checkpoint the keys of the
// events from fromSeq on, then checks that the set holds as many keys as
// the table does (keyset_checkpoint.go says why that suffices).
func (s *Store) catchUpKeys(ctx context.Context, t *tieredKeys, fromSeq, keyed int64) (int, error) {
	added := 0
	if err := s.eachKey(ctx, fromSeq, func(k store.Key) error {
		isNew, err := t.add(k)
		if isNew {
			added++
		}
		return err
	}); err != nil {
		return added, err
	}
	if int64(t.len()) != keyed {
		return added, fmt.Errorf("%w: %d keys, %d keyed events", errKeysDiffer, t.len(), keyed)
	}
	// What came back is durable: the next checkpoint may name it.
	t.ckpt.seqHint = s.nextSeq
	return added, nil
}

// eachKey calls fn with the dedup key of every event from seq fromSeq on
// (0: all): a goroutine reads them (readKeysFrom) while this one calls
// fn, which costs about the same. After fn's first error the rest is
// only drained; the read's error comes first.
func (s *Store) eachKey(ctx context.Context, fromSeq int64, fn func(store.Key) error) error {
	full := make(chan []store.Key, 4)
	empty := make(chan []store.Key, 4)
	var readErr error
	go func() {
		defer close(full)
		readErr = s.readKeysFrom(ctx, fromSeq, full, empty)
	}()
	var fnErr error // the reader must still be drained
	for buf := range full {
		for _, k := range buf {
			if fnErr == nil {
				fnErr = fn(k)
			}
		}
		select {
		case empty <- buf[:0]:
		default:
		}
	}
	// full is closed: the reader is done and readErr is safe to read.
	if readErr != nil {
		return readErr
	}
	return fnErr
}

// readKeysFrom sends the dedup keys of the events from seq fromSeq on (0:
// all) to full in chunks, taking spent chunks back from empty. It reads
// Arrow record batches: scanning two BIGINTs a row through database/sql
// cost ~1 µs a row, the better part of a rebuild after a crash at 100 M
// events.
func (s *Store) readKeysFrom(ctx context.Context, fromSeq int64, full chan<- []store.Key, empty <-chan []store.Key) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		ar, err := duckarrow.New(dconn)
		if err != nil {
			return fmt.Errorf("arrow interface: %w", err)
		}
		q := `SELECT k_hi, k_lo FROM events WHERE k_hi IS NOT NULL`
		if fromSeq > 0 {
			// seq grows with the table's rows: its zone maps skip the rest.
			q += ` AND seq >= ` + strconv.FormatInt(fromSeq, 10)
		}
		rdr, err := ar.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rdr.Release()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			hi, okh := rec.Column(0).(*array.Int64)
			lo, okl := rec.Column(1).(*array.Int64)
			if !okh || !okl {
				return fmt.Errorf("unexpected key columns %T, %T", rec.Column(0), rec.Column(1))
			}
			var buf []store.Key
			select {
			case buf = <-empty:
			default:
			}
			his, los := hi.Int64Values(), lo.Int64Values()
			for i := range his {
				buf = append(buf, joinKey(his[i], los[i]))
			}
			full <- buf
		}
		return rdr.Err()
	})
}
