package run

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/duckdb"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// testFeed is a change feed over a DuckDB warehouse: the test logs each
// change of table ev in table changes (seq, op, id), and Changes reports
// them with the row as it is now (a replay of a change the full read saw
// is harmless). lost makes the next Changes fail with ErrFeedLost.
type testFeed struct {
	connectors.Source
	st *feedState
}

type feedState struct {
	mu                       sync.Mutex
	lost, unavailable        bool
	starts, changes, dropped int
	confirmed                string
}

func (f *testFeed) maxSeq(ctx context.Context) (string, error) {
	pos := "0"
	err := f.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Query: `SELECT coalesce(max(seq), 0)::BIGINT AS s FROM changes`}},
		func(rec arrow.RecordBatch) error {
			if rec.NumRows() > 0 {
				pos = rec.Column(0).ValueStr(0)
			}
			return nil
		})
	return pos, err
}

func (f *testFeed) StartFeed(ctx context.Context, _ connectors.Feed) (string, error) {
	f.st.mu.Lock()
	f.st.starts++
	f.st.lost = false
	unavailable := f.st.unavailable
	f.st.mu.Unlock()
	if unavailable {
		return "", fmt.Errorf("the role lacks REPLICATION: %w", connectors.ErrFeedUnavailable)
	}
	return f.maxSeq(ctx)
}

func (f *testFeed) Changes(ctx context.Context, _ connectors.Feed, pos string, fn func(arrow.RecordBatch) error) (string, error) {
	f.st.mu.Lock()
	lost := f.st.lost
	f.st.changes++
	f.st.mu.Unlock()
	if lost {
		return "", fmt.Errorf("slot dropped by hand: %w", connectors.ErrFeedLost)
	}
	from, err := strconv.ParseInt(pos, 10, 64)
	if err != nil {
		return "", err
	}
	next, err := f.maxSeq(ctx)
	if err != nil {
		return "", err
	}
	q := fmt.Sprintf(`SELECT c.op AS "$op", c.id AS id, e.uid, e.t, e.plan FROM changes c LEFT JOIN ev e ON e.id = c.id AND c.op <> 'delete'
		WHERE c.seq > %d AND c.seq <= %s ORDER BY c.seq`, from, next)
	return next, f.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Query: q}}, fn)
}

func (f *testFeed) ConfirmFeed(_ context.Context, _ connectors.Feed, pos string) error {
	f.st.mu.Lock()
	f.st.confirmed = pos
	f.st.mu.Unlock()
	return nil
}

func (f *testFeed) DropFeed(context.Context, connectors.Feed) error {
	f.st.mu.Lock()
	f.st.dropped++
	f.st.mu.Unlock()
	return nil
}

// A Mirror import whose source has a change feed: the first run starts
// it and diffs the table, later runs apply only the logged changes (rows
// read = changes, not the table), a lost feed falls back to a full
// re-diff and restarts the feed, and every read equals the table after
// each round, on both stores.
func TestMirrorChangeFeed(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			state := &feedState{}
			kind := duckdb.Kind()
			open := kind.Open
			kind.Name = "feedduck"
			kind.Open = func(ctx context.Context, fields map[string]string) (connectors.Source, error) {
				src, err := open(ctx, fields)
				if err != nil {
					return nil, err
				}
				return &testFeed{Source: src, st: state}, nil
			}
			reg := connectors.NewRegistry(kind)
			f := &mirrorFixture{t: t, st: sc.open(t), whPath: filepath.Join(t.TempDir(), "wh.duckdb")}
			f.exec(`CREATE TABLE ev (id INTEGER PRIMARY KEY, uid VARCHAR, t TIMESTAMP NOT NULL, plan VARCHAR)`,
				`CREATE TABLE changes (seq INTEGER, op VARCHAR, id INTEGER)`,
				`INSERT INTO ev SELECT i, 'u' || i, TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND, 'p' FROM range(1, 1001) t(i)`)
			im, err := importspec.Parse("feed.yaml", []byte(fmt.Sprintf("id: ev-feed\nproject_id: 1\nsync_mode: mirror\nsource: {kind: feedduck, path: %q}\n"+
				"import_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n", f.whPath)), reg, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.im = im
			r := &Runner{Registry: reg, Store: f.st}
			sync := func(step string, rows, ins, upd, del int64) {
				t.Helper()
				f.runs++
				st, err := r.Run(context.Background(), im, importspec.Project{ID: 1, Mode: config.IDSimplified}, Options{RunID: fmt.Sprintf("run-%d", f.runs)})
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if st.RowsRead != rows || st.Inserted != ins || st.Updated != upd || st.Deleted != del {
					t.Fatalf("%s: read %d, inserted %d, updated %d, deleted %d; want %d %d %d %d", step,
						st.RowsRead, st.Inserted, st.Updated, st.Deleted, rows, ins, upd, del)
				}
				f.wantEvents(step)
				// The table's rows after the run, recorded for the volume rule.
				id := fmt.Sprintf("run-%d", f.runs)
				counts, err := f.st.(store.Mirrors).MirrorRunCounts(context.Background(), 1, []string{id})
				if want := f.query(`SELECT count(*) AS n FROM ev`)[0]["n"]; err != nil || fmt.Sprint(counts[id].Rows) != want {
					t.Fatalf("%s: table rows recorded %d (%v), want %s", step, counts[id].Rows, err, want)
				}
			}
			sync("first", 1000, 1000, 0, 0)
			if state.starts != 1 || state.confirmed != "0" {
				t.Fatalf("after the first run: %+v", state)
			}
			// Changes, logged as a trigger would.
			f.exec(`UPDATE ev SET plan = 'q', t = t + INTERVAL 1 HOUR WHERE id IN (5, 6)`,
				`INSERT INTO changes VALUES (1, 'update', 5), (2, 'update', 6)`,
				`DELETE FROM ev WHERE id = 7`, `INSERT INTO changes VALUES (3, 'delete', 7)`,
				`INSERT INTO ev VALUES (2000, 'u2000', TIMESTAMP '2024-02-01', NULL)`, `INSERT INTO changes VALUES (4, 'insert', 2000)`,
				// A key deleted and inserted again within one feed read.
				`DELETE FROM ev WHERE id = 8`, `INSERT INTO changes VALUES (5, 'delete', 8)`,
				`INSERT INTO ev VALUES (8, 'u8', TIMESTAMP '2024-03-01', 'back')`, `INSERT INTO changes VALUES (6, 'insert', 8)`)
			sync("changes", 4, 2, 2, 2)
			if state.starts != 1 || state.changes != 1 || state.confirmed != "6" {
				t.Fatalf("after the feed run: %+v", state)
			}
			sync("quiet", 0, 0, 0, 0)

			// The feed is lost, and changes made meanwhile are only in the
			// table: the run re-diffs it whole and starts the feed again.
			state.lost = true
			f.exec(`UPDATE ev SET plan = 'unlogged' WHERE id = 9`, `DELETE FROM ev WHERE id = 10`)
			sync("feed lost", 999, 0, 1, 1)
			if state.starts != 2 || state.confirmed != "6" {
				t.Fatalf("after the re-diff: %+v", state)
			}
			f.exec(`DELETE FROM ev WHERE id = 11`, `INSERT INTO changes VALUES (7, 'delete', 11)`)
			sync("after restart", 0, 0, 0, 1)
			if state.confirmed != "7" {
				t.Fatalf("after the feed restarted: %+v", state)
			}

			// The feed is lost and cannot be started again (the privilege
			// was revoked): every run diffs the whole table, exactly, and
			// later runs no longer ask for the lost feed.
			state.lost, state.unavailable = true, true
			f.exec(`UPDATE ev SET plan = 'no feed' WHERE id = 12`, `DELETE FROM ev WHERE id = 13`)
			sync("feed unavailable", 997, 0, 1, 1)
			changes := state.changes
			f.exec(`DELETE FROM ev WHERE id = 14`)
			sync("still unavailable", 996, 0, 0, 1)
			if state.changes != changes {
				t.Fatalf("a run asked the unavailable feed for changes: %+v", state)
			}

			// Deleting the import drops its state and its feed.
			if err := ForgetMirror(context.Background(), reg, f.st, im); err != nil {
				t.Fatal(err)
			}
			if state.dropped != 1 {
				t.Fatalf("feed not dropped: %+v", state)
			}
		})
	}
}
