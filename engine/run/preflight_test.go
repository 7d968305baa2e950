package run

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
)

// A preflight that refuses a full_sync of a truncated people table stops
// the run before anything is written: the properties the table no longer
// holds are not unset, and the run is not retried.
func TestPreflightHoldsBeforeWriting(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newFullFixture(t, st, `CREATE TABLE users (user_id VARCHAR, plan VARCHAR);
				INSERT INTO users VALUES ('u1', 'pro'), ('u2', 'free')`,
				"id: people\nimport_type: people\ntable_params: {table: users}\nuser_column_name: user_id\n")
			f.sync("run-1")
			before := f.profiles()
			f.exec(`DELETE FROM users`)
			var plans []Plan
			var counted []int64
			r := &Runner{Registry: kinds.Registry(), Store: st, Backoff: Backoff{Attempts: 3}}
			_, err := r.Run(context.Background(), f.im, f.project, Options{RunID: "run-2", Preflight: func(ctx context.Context, p Plan) error {
				plans = append(plans, p)
				counted = append(counted, p.SourceRows(ctx))
				return errors.New("volume anomaly")
			}})
			if !errors.Is(err, ErrHeld) || !connectors.IsPermanent(err) {
				t.Fatalf("run: %v, want ErrHeld (permanent)", err)
			}
			if len(plans) != 1 || !plans[0].Whole || plans[0].Import != f.im || len(plans[0].Schema.Columns) != 2 || counted[0] != 0 {
				t.Fatalf("preflight saw %d plans %+v, counts %v", len(plans), plans, counted)
			}
			if got := f.profiles(); !reflect.DeepEqual(got, before) {
				t.Fatalf("profiles changed by a held run:\n got %v\nwant %v", got, before)
			}
		})
	}
}
