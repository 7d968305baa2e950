// Package run executes one sync of a warehouse import: read through the
// source, map column by column, validate like /import, write durably
// through the store. Runs are bounded in memory: one Arrow batch, one
// mapped buffer and one store write are in flight at a time.
//
// This is the first slice of the sync engine: every run reads the whole
// table (dedup on the deterministic $insert_id absorbs rows read before).
// Watermarks committed with the data, run history and scheduling build on
// it (scheduler/).
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// ErrNotSupported marks import types a run cannot handle.
var ErrNotSupported = errors.New("import type not supported")

// Stats summarise a run.
type Stats struct {
	RunID      string
	RowsRead   int64
	Imported   int64 // new records written
	Duplicates int64 // records already stored (re-read rows)
	Failed     int64
	Failures   []mapping.RowError // the first 100
	Bytes      int64              // mapped record bytes
	Started    time.Time
	Duration   time.Duration
}

// Rate is rows read per second.
func (s Stats) Rate() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.RowsRead) / s.Duration.Seconds()
}

// Runner runs imports.
type Runner struct {
	Registry *connectors.Registry
	Store    store.Store
	Log      *slog.Logger
	Now      func() time.Time
}

const maxFailures = 100

// Run syncs im once.
func (r *Runner) Run(ctx context.Context, im *importspec.Import, project importspec.Project, runID string) (Stats, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	st := Stats{RunID: runID, Started: now()}
	defer func() { st.Duration = now().Sub(st.Started) }()
	switch im.ImportType {
	case importspec.EventStream, importspec.People, importspec.Groups, importspec.LookupTable:
	default:
		return st, fmt.Errorf("import %s: %w: %s", im.ID, ErrNotSupported, im.ImportType)
	}
	src, err := r.Registry.Open(ctx, im.SourceConfig())
	if err != nil {
		return st, fmt.Errorf("import %s: connect: %w", im.ID, err)
	}
	defer src.Close()
	schema, err := src.Discover(ctx, im.TableParams)
	if err != nil {
		return st, fmt.Errorf("import %s: discover: %w", im.ID, err)
	}
	if err := im.CheckSchema(schema); err != nil {
		return st, connectors.Permanent(err)
	}
	req := connectors.ReadRequest{Table: im.TableParams}
	var m *mapping.Mapper
	var out mapping.Records
	var v mapping.Validator
	var pv mapping.ProfileValidator
	var table *lookup.Builder
	if im.ImportType == importspec.LookupTable {
		cols := []string{im.PropertyKeyColumnName}
		for _, c := range schema.Columns {
			if c.Name != im.PropertyKeyColumnName {
				cols = append(cols, c.Name)
			}
		}
		table = lookup.NewBuilder(cols, lookup.Options{})
	}
	var batch store.Batch
	err = src.Read(ctx, req, func(rec arrow.RecordBatch) error {
		if m == nil {
			if m, err = mapping.New(mapping.Options{Import: im, Project: project, RunID: runID, Schema: schema}, rec.Schema()); err != nil {
				return connectors.Permanent(err)
			}
		}
		out.Reset()
		m.Map(rec, &out)
		batch = store.Batch{Project: im.ProjectID, Events: batch.Events[:0], Profiles: batch.Profiles[:0]}
		var fails []mapping.RowError
		switch im.ImportType {
		case importspec.People:
			fails = pv.Profiles(profile.User, &out, st.RowsRead, &batch)
		case importspec.Groups:
			fails = pv.Profiles(profile.Group, &out, st.RowsRead, &batch)
		case importspec.LookupTable:
			var err error
			if fails, err = pv.Lookup(&out, st.RowsRead, table); err != nil {
				return connectors.Permanent(fmt.Errorf("lookup table %s: %w", im.LookupTableID, err))
			}
		default:
			fails = v.Events(im.ProjectID, now(), &out, st.RowsRead, &batch)
		}
		st.RowsRead += rec.NumRows()
		st.Bytes += int64(len(out.Buf))
		st.Failed += int64(len(fails))
		for _, f := range fails {
			if len(st.Failures) < maxFailures {
				st.Failures = append(st.Failures, f)
			}
		}
		if len(batch.Events) == 0 && len(batch.Profiles) == 0 {
			return nil
		}
		// Durable before the next batch is read: a crash loses at most
		// the batch in flight, and re-reading it is absorbed by dedup
		// (profile $set updates are idempotent).
		res, err := r.Store.Write(ctx, []store.Batch{batch})
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		st.Imported += int64(res.Profiles)
		for _, rj := range res.Rejected {
			st.Failed++
			if len(st.Failures) < maxFailures {
				st.Failures = append(st.Failures, mapping.RowError{Row: int64(rj.Ref), Message: rj.Err.Error()})
			}
		}
		st.Imported += int64(res.Inserted)
		st.Duplicates += int64(res.Duplicates)
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("import %s: %w", im.ID, err)
	}
	if table != nil {
		// A lookup table is replaced whole, once every row is read.
		if err := r.Store.ReplaceLookup(ctx, im.ProjectID, im.LookupTableID, table.Table()); err != nil {
			return st, fmt.Errorf("import %s: replace lookup table: %w", im.ID, err)
		}
		st.Imported = int64(table.Table().Len())
	}
	if r.Log != nil {
		r.Log.Info("sync finished", "import", im.ID, "run", runID, "rows", st.RowsRead,
			"imported", st.Imported, "duplicates", st.Duplicates, "failed", st.Failed)
	}
	return st, nil
}
