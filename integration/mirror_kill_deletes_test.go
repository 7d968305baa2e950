package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// A Mirror run killed with SIGKILL while it deletes: each round deletes
// a large share of the table. With the replication slot dropped by hand
// (the feed lost) the run re-reads the table and deletes the keys it did
// not see after the read, so the kill comes as soon as the run has read
// every remaining row; with the feed intact the deletes arrive as the
// feed's changes and the kill comes at a random early point. The export
// after each kill shows whether deletes were cut off midway (a re-diff
// round kills later and later after the read until one does); the final
// run leaves exactly the table, nothing deleted or written twice, and
// at least one kill must have cut a delete phase midway.
func TestMirrorKill9WhileDeleting(t *testing.T) {
	for _, kind := range []string{"embedded", "postgres"} {
		t.Run(kind, func(t *testing.T) { testMirrorKillDeletes(t, kind) })
	}
}

func testMirrorKillDeletes(t *testing.T, storeKind string) {
	const rows = 120_000
	s, db, imp := mirrorKillSetup(t, storeKind, rows)
	final := func(label string) {
		t.Helper()
		id := manualSync(t, s, imp)
		if r := waitRun(t, s, imp, id); r.Status != "SUCCEEDED" || r.Failed != 0 {
			t.Fatalf("%s: final run %+v", label, r)
		}
		wantTable(t, s, db, label)
		time.Sleep(2100 * time.Millisecond) // past the join window: the next trigger starts a new run
	}
	final("first load")

	left := rows
	midway := 0
	// killAt kills the run once until(rows read) holds, restarts the
	// server and reports how many events the export holds.
	killAt := func(label string, until func(read int64, elapsed time.Duration) bool) int {
		t.Helper()
		id := manualSync(t, s, imp)
		start := time.Now()
		for deadline := start.Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
			r, _ := findRun(history(t, s, imp), id)
			if r.Status != "RUNNING" {
				t.Logf("%s: run %s ended (%s) before the kill", label, id, r.Status)
				break
			}
			if until(r.RowsRead, time.Since(start)) || time.Now().After(deadline) {
				t.Logf("%s: killing run %s at %d rows read", label, id, r.RowsRead)
				break
			}
		}
		s.Kill()
		s.Start()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			if r, _ := findRun(history(t, s, imp), id); r.Status != "RUNNING" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: killed run %s still RUNNING a minute after the restart", label, id)
			}
		}
		return exportCount(t, s)
	}
	// Each round keeps the multiples of its k: 60 000, then 40 000, then
	// 16 000 deletes, beyond one batch of removals (16 384) in the first two.
	for round, k := range []int{2, 6, 30} {
		// Drop the feed: the next run re-diffs the whole table.
		db.exec(t, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active`)
		before := left
		left -= int(db.execCount(t, fmt.Sprintf(`DELETE FROM ev WHERE id %% %d <> 0`, k)))
		label := fmt.Sprintf("re-diff round %d", round)
		// Killed once the read is done, then later and later after it
		// until a kill finds deletes applied.
		for attempt := range 6 {
			var reached time.Time
			wait := time.Duration(attempt) * 150 * time.Millisecond
			n := killAt(label, func(read int64, _ time.Duration) bool {
				if read < int64(left) {
					return false
				}
				if reached.IsZero() {
					reached = time.Now()
				}
				return time.Since(reached) >= wait
			})
			t.Logf("%s: %d events after a kill %s after the read; the table went from %d to %d rows", label, n, wait, before, left)
			if n < before {
				if n > left {
					midway++
				}
				break
			}
		}
		final(label)
	}
	// The feed path: a big delete arrives as the feed's changes.
	before := left
	left -= int(db.execCount(t, `DELETE FROM ev WHERE id % 60 <> 0`))
	delay := time.Duration(50+rand.IntN(400)) * time.Millisecond
	n := killAt("feed round", func(_ int64, elapsed time.Duration) bool { return elapsed >= delay })
	t.Logf("feed round: %d events after the kill; the table went from %d to %d rows", n, before, left)
	if n > left && n < before {
		midway++
	}
	final("feed round")
	if midway == 0 {
		t.Fatal("no kill landed while the run was deleting (every export after a kill held all or none of the deleted rows)")
	}
	t.Logf("%d of 4 rounds were killed midway through their deletes", midway)
}

func (db *pgDB) execCount(t *testing.T, sql string) int64 {
	t.Helper()
	tag, err := db.conn.Exec(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// exportCount is the number of events the export returns.
func exportCount(t *testing.T, s *server) int {
	t.Helper()
	q := url.Values{"from_date": {time.Now().UTC().AddDate(0, 0, -3).Format(time.DateOnly)},
		"to_date": {time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)}, "project_id": {fmt.Sprint(mainID)}}
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: q, Auth: asOwner})
	if r.Status != http.StatusOK {
		t.Fatalf("export: %s", r)
	}
	return bytes.Count(r.Body, []byte("\n"))
}
