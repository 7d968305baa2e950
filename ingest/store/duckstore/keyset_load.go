package duckstore

import (
	"cmp"
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/duckarrow"
)

// keysMeta describes the tables' state for the dedup set's manifest
// (keyset_persist.go): Open compares it with what Close recorded.
func (s *Store) keysMeta(ctx context.Context) (keysMeta, error) {
	m := keysMeta{AppliedLSN: s.applied}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM events`).Scan(&m.Events, &m.MaxSeq); err != nil {
		return m, fmt.Errorf("count events: %w", err)
	}
	return m, nil
}

// loadKeys adopts the dedup set the last clean Close kept, or else fills
// a new one from the events table. Reading rows and inserting keys cost
// about the same, so a goroutine reads (readKeys) while this one inserts.
func (s *Store) loadKeys(ctx context.Context) error {
	start := time.Now()
	meta, err := s.keysMeta(ctx)
	if err != nil {
		return err
	}
	dir := s.path + ".keys"
	adopted, ok, err := adoptTieredKeys(dir, defaultKeysConfig(), meta)
	if err != nil {
		return err
	}
	if ok {
		s.keys = adopted
		s.log.Info("duckstore: dedup keys adopted", "keys", adopted.len(), "runs", len(adopted.runs), "took", time.Since(start))
		return nil
	}
	if s.keys, err = newTieredKeys(dir, defaultKeysConfig()); err != nil {
		return err
	}
	full := make(chan []store.Key, 4)
	empty := make(chan []store.Key, 4)
	var readErr error
	go func() {
		defer close(full)
		readErr = s.readKeys(ctx, full, empty)
	}()
	var loadErr error // the reader must still be drained
	for buf := range full {
		for _, k := range buf {
			if loadErr == nil {
				loadErr = s.keys.load(k)
			}
		}
		select {
		case empty <- buf[:0]:
		default:
		}
	}
	// full is closed: the reader is done and readErr is safe to read.
	if readErr != nil {
		return fmt.Errorf("load keys: %w", readErr)
	}
	if loadErr == nil {
		loadErr = s.keys.finishLoad()
	}
	if loadErr != nil {
		return fmt.Errorf("load keys: %w", loadErr)
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
	meta, err := s.keysMeta(context.Background())
	if err != nil {
		s.log.Warn("duckstore: dedup keys not kept; the next open rebuilds them", "err", err)
		return tk.close()
	}
	return tk.keep(meta)
}

// readKeys sends the events table's dedup keys to full in chunks, taking
// spent chunks back from empty. It reads Arrow record batches: scanning
// two BIGINTs a row through database/sql cost ~1 µs a row, the better
// part of a rebuild after a crash at 100 M events.
func (s *Store) readKeys(ctx context.Context, full chan<- []store.Key, empty <-chan []store.Key) error {
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
		rdr, err := ar.QueryContext(ctx, `SELECT k_hi, k_lo FROM events WHERE k_hi IS NOT NULL`)
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
