package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Helpers of the tests where several server processes share one
// PostgreSQL store (multiproc_*_test.go).

// storeURL is the postgres:// URL of db, as a server config's store key
// takes it.
func storeURL(t testing.TB, db *pgDB) string {
	t.Helper()
	c, err := pgx.ParseConfig(db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), Path: "/" + c.Database,
		RawQuery: "sslmode=disable", User: url.User(c.User)}
	if c.Password != "" {
		u.User = url.UserPassword(c.User, c.Password)
	}
	return u.String()
}

// startCluster starts n servers of cfg on loopback ports (each with its
// own data directory, all on cfg's store) and checks each one's /healthz.
func startCluster(t *testing.T, n int, cfg serverConfig) []*server {
	t.Helper()
	servers := make([]*server, n)
	for i := range servers {
		servers[i] = startServer(t, cfg)
		r := servers[i].do(t, request{Method: http.MethodGet, Path: "/healthz"})
		if m := r.JSON(t); r.Status != http.StatusOK || m["status"] != "ok" || m["store_kind"] != "postgres" {
			t.Fatalf("server %d healthz: %s", i, r)
		}
	}
	return servers
}

// ownerOf tells whether a run owner string names the process pid
// (owners are host/pid/random).
func ownerOf(owner string, pid int) bool {
	return strings.Contains(owner, fmt.Sprintf("/%d/", pid))
}

// storeRun is one row of the store's sync_runs table.
type storeRun struct {
	ID, Import, Period, Status, Reason, Trigger, Owner string
	StartedMs, EndedMs, RowsRead                       int64
}

func storeRuns(t testing.TB, st *pgDB) []storeRun {
	t.Helper()
	rows, err := st.conn.Query(context.Background(), `SELECT id, import, period, status, reason, trigger, owner,
		started_ms, ended_ms, rows_read FROM sync_runs WHERE project = $1 ORDER BY started_ms, id`, mainID)
	if err != nil {
		t.Fatal(err)
	}
	var out []storeRun
	var r storeRun
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Import, &r.Period, &r.Status, &r.Reason, &r.Trigger, &r.Owner,
		&r.StartedMs, &r.EndedMs, &r.RowsRead}, func() error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventCounts returns, per event name of the main project, the number of
// stored events and of distinct $insert_ids.
func eventCounts(t testing.TB, st *pgDB) (total, distinct map[string]int64) {
	t.Helper()
	rows, err := st.conn.Query(context.Background(), `SELECT name, count(*), count(DISTINCT insert_id)
		FROM events WHERE project = $1 GROUP BY name`, mainID)
	if err != nil {
		t.Fatal(err)
	}
	total, distinct = map[string]int64{}, map[string]int64{}
	var name string
	var n, d int64
	_, err = pgx.ForEachRow(rows, []any{&name, &n, &d}, func() error {
		total[name], distinct[name] = n, d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, distinct
}

// metricValue sums the samples of a metric family in a /metrics page.
func metricValue(page, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // another family sharing the prefix
		}
		f := strings.Fields(rest)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// sourceTable creates table name of rows 1..n in db (the warehouse), as
// pgDB.eventTable does for ev.
func (db *pgDB) sourceTable(t testing.TB, name string, n int) {
	t.Helper()
	db.exec(t, `CREATE TABLE `+name+` (id bigint PRIMARY KEY, user_id text NOT NULL, event_time timestamptz NOT NULL,
		loaded_at timestamptz NOT NULL)`)
	db.addSourceRows(t, name, 1, n)
}

// addSourceRows adds rows from..to. Insert times grow with the id (500
// rows share each), so a time_based sync's watermark never passes rows
// added later.
func (db *pgDB) addSourceRows(t testing.TB, name string, from, to int) {
	t.Helper()
	db.exec(t, `INSERT INTO `+name+` SELECT i, 'u' || i, now() - interval '20 hours' + i * interval '1 millisecond',
		timestamptz '2026-01-01' + (i / 500) * interval '1 second' FROM generate_series($1::bigint, $2::bigint) i`, from, to)
}
