package sourcetest

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// Probe is one hostile table or query an import could name: something
// that reads beyond the source or writes. Every way a sync or preview
// uses a source (Discover, Read, Count) must refuse it with an error
// that is connectors.ErrRefused and permanent, and Unchanged then checks
// that nothing was read into rows or changed (a file not written, a
// sequence not advanced, another database's table still there).
type Probe struct {
	Name  string
	Table connectors.Table
	// RunsOnRead: the effect is at run time, and Discover only describes
	// the statement (Postgres prepares it), so Discover may succeed.
	RunsOnRead bool
	// MayRun: the database lets the statement run in a read-only
	// transaction (lo_create before PostgreSQL 16); the source's rollback
	// must undo it, which Unchanged proves.
	MayRun bool
	// Unchanged, when set, runs after the probe.
	Unchanged func(t *testing.T)
}

// RunHostile runs each probe against src.
func RunHostile(t *testing.T, src connectors.Source, probes []Probe) {
	t.Helper()
	ctx := context.Background()
	for _, p := range probes {
		t.Run(p.Name, func(t *testing.T) {
			if _, err := src.Discover(ctx, p.Table); err != nil || !p.RunsOnRead && !p.MayRun {
				refused(t, "Discover", err)
			}
			rows := int64(0)
			err := src.Read(ctx, connectors.ReadRequest{Table: p.Table, Limit: 5}, func(rec arrow.RecordBatch) error {
				rows += rec.NumRows()
				return nil
			})
			if !p.MayRun {
				refused(t, "Read", err)
				if rows != 0 {
					t.Errorf("Read handed over %d rows before refusing", rows)
				}
			}
			if c, ok := src.(connectors.Counter); ok {
				if _, err := c.Count(ctx, connectors.ReadRequest{Table: p.Table}); err != nil || !p.MayRun {
					refused(t, "Count", err)
				}
			}
			if p.MayRun && p.Unchanged == nil {
				t.Error("a probe that may run needs Unchanged to prove it left nothing")
			}
			if p.Unchanged != nil {
				p.Unchanged(t)
			}
		})
	}
}

func refused(t *testing.T, op string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s succeeded; want it refused", op)
	case !errors.Is(err, connectors.ErrRefused):
		t.Errorf("%s: %v; want connectors.ErrRefused", op, err)
	case !connectors.IsPermanent(err):
		t.Errorf("%s: %v is not permanent", op, err)
	}
}
