package run

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/internal/config"
)

// A Mirror run calls the preflight before it applies anything: a
// preflight that refuses a truncated table (as the volume rule with
// action: pause does) holds the run before a single delete, and the
// events stay as they were. With a change limit set, the plan carries
// the planning pass's counts.
func TestMirrorPreflightHoldsBeforeDeleting(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			for _, limit := range []string{"", "max_deletes: 100\n"} {
				f := newMirrorFixture(t, sc.open(t),
					"id: ev-pre\nimport_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n"+limit,
					mirrorEventTable...)
				f.sync("first", 4, 0, 0)
				before := f.events()
				f.exec(`DELETE FROM ev`)
				var plans []Plan
				var rows []int64
				f.runs++
				r := &Runner{Registry: f.reg, Store: f.st, Backoff: Backoff{Attempts: 3}}
				if r.Registry == nil {
					r.Registry = kinds.Registry()
				}
				st, err := r.Run(context.Background(), f.im, importspec.Project{ID: 1, Mode: config.IDSimplified}, Options{RunID: "held",
					Preflight: func(ctx context.Context, p Plan) error {
						plans = append(plans, p)
						rows = append(rows, p.SourceRows(ctx))
						return errors.New("volume anomaly")
					}})
				if !errors.Is(err, ErrHeld) || !connectors.IsPermanent(err) {
					t.Fatalf("%q: run: %v, want ErrHeld (permanent)", limit, err)
				}
				if len(plans) != 1 || rows[0] != 0 || plans[0].Import != f.im || len(plans[0].Schema.Columns) != 5 || st.Deleted != 0 {
					t.Fatalf("%q: preflight saw %d plans %+v, rows %v; deleted %d", limit, len(plans), plans, rows, st.Deleted)
				}
				if limit == "" && plans[0].Mirror != nil {
					t.Fatalf("no planning pass, yet a plan: %+v", plans[0].Mirror)
				}
				if limit != "" && (plans[0].Mirror == nil || plans[0].Mirror.Deletes != 4 || plans[0].Mirror.Inserts+plans[0].Mirror.Updates+plans[0].Mirror.Unchanged != 0) {
					t.Fatalf("plan with max_deletes: %+v, want 4 deletes", plans[0].Mirror)
				}
				if got := f.events(); !reflect.DeepEqual(got, before) {
					t.Fatalf("%q: events changed by a held run:\n got %v\nwant %v", limit, got, before)
				}
				// Accepted (no preflight): the deletes apply.
				f.sync("accepted", 0, 0, 4)
				f.wantEvents("accepted")
			}
		})
	}
}
