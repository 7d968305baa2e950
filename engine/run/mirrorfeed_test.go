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
	chop                     int64 // > 0: changes are handed over this many rows at a time
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
	return next, f.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Query: q}}, func(rec arrow.RecordBatch) error {
		if f.st.chop == 0 {
			return fn(rec)
		}
		for i := int64(0); i < rec.NumRows(); i += f.st.chop {
			part := rec.NewSlice(i, min(i+f.st.chop, rec.NumRows()))
			err := fn(part)
			part.Release()
			if err != nil {
				return err
			}
		}
		return nil
	})
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
			ff := newFeedFixture(t, sc, state, 1000)
			f, im, reg, sync := ff.f, ff.im, ff.reg, ff.sync
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

// feedFixture is a Mirror import of table ev (ids 1 to rows) whose source
// has the test's change feed, on one store.
type feedFixture struct {
	t   *testing.T
	f   *mirrorFixture
	im  *importspec.Import
	reg *connectors.Registry
	r   *Runner
}

func newFeedFixture(t *testing.T, sc storeCase, state *feedState, rows int) *feedFixture {
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
		fmt.Sprintf(`INSERT INTO ev SELECT i, 'u' || i, TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND, 'p' FROM range(1, %d) t(i)`, rows+1))
	im, err := importspec.Parse("feed.yaml", []byte(fmt.Sprintf("id: ev-feed\nproject_id: 1\nsync_mode: mirror\nsource: {kind: feedduck, path: %q}\n"+
		"import_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n", f.whPath)), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.im = im
	return &feedFixture{t: t, f: f, im: im, reg: reg, r: &Runner{Registry: reg, Store: f.st}}
}

// sync runs the import and checks its counts, every read against the
// table, and the table's rows the run recorded.
func (ff *feedFixture) sync(step string, rows, ins, upd, del int64) {
	t, f := ff.t, ff.f
	t.Helper()
	f.runs++
	st, err := ff.r.Run(context.Background(), ff.im, importspec.Project{ID: 1, Mode: config.IDSimplified}, Options{RunID: fmt.Sprintf("run-%d", f.runs)})
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

// Changes handed over a few rows at a time are gathered into groups of
// one kind (mirrorgroup.go) across the feed's batches: runs of updates
// and deletes alternate, a key changes twice within a group (the later
// change wins, counted once), and keys deleted come back; the reads
// equal the table after the run.
func TestMirrorChangeFeedGroups(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ff := newFeedFixture(t, sc, &feedState{chop: 7}, 1000)
			ff.sync("first", 1000, 1000, 0, 0)
			ff.f.exec(`UPDATE ev SET plan = 'a' WHERE id <= 300`,
				`INSERT INTO changes SELECT i, 'update', i FROM range(1, 301) t(i)`,
				`UPDATE ev SET plan = 'b', t = t + INTERVAL 1 DAY WHERE id = 5`, `INSERT INTO changes VALUES (301, 'update', 5)`,
				`DELETE FROM ev WHERE id BETWEEN 301 AND 400`,
				`INSERT INTO changes SELECT 1000 + i, 'delete', i FROM range(301, 401) t(i)`,
				`UPDATE ev SET uid = 'moved' || id WHERE id BETWEEN 401 AND 410`,
				`INSERT INTO changes SELECT 2000 + i, 'update', i FROM range(401, 411) t(i)`,
				`DELETE FROM ev WHERE id BETWEEN 411 AND 415`,
				`INSERT INTO changes SELECT 3000 + i, 'delete', i FROM range(411, 416) t(i)`,
				`INSERT INTO ev SELECT i, 'back' || i, TIMESTAMP '2024-05-01', 'c' FROM range(411, 414) t(i)`,
				`INSERT INTO changes SELECT 4000 + i, 'insert', i FROM range(411, 414) t(i)`)
			ff.sync("changes in small batches", 314, 3, 310, 105)
		})
	}
}

// A feed group larger than a flush is mapped a flush at a time: every
// row of a table larger than mirrorFlushRows changes in one group.
func TestMirrorChangeFeedLargeGroup(t *testing.T) {
	const n = mirrorFlushRows + 3000
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ff := newFeedFixture(t, sc, &feedState{}, n)
			ff.sync("first", n, n, 0, 0)
			ff.f.exec(`UPDATE ev SET plan = 'all', uid = 'v' || (id % 7)`,
				fmt.Sprintf(`INSERT INTO changes SELECT i, 'update', i FROM range(1, %d) t(i)`, n+1))
			ff.sync("every row changed", n, 0, n, 0)
		})
	}
}
